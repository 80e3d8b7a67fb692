"""Ops that create, move or reshape data without arithmetic."""
from stablehlo.ir.ops.base import define

define("stablehlo.constant", properties=("value",), syntax="constant")
define("stablehlo.iota", properties=("iota_dimension",), syntax="iota")
define("stablehlo.broadcast_in_dim", properties=("broadcast_dimensions",),
       syntax="broadcast_in_dim")
define("stablehlo.broadcast", properties=("broadcast_sizes",), syntax="broadcast")
define("stablehlo.reshape", syntax="functional")
define("stablehlo.transpose", properties=("permutation",), syntax="transpose")
define("stablehlo.reverse", properties=("dimensions",), syntax="reverse")
define("stablehlo.concatenate", properties=("dimension",), syntax="concatenate")
define("stablehlo.pad", properties=("edge_padding_low", "edge_padding_high", "interior_padding"),
       syntax="pad")
define("stablehlo.slice", properties=("start_indices", "limit_indices", "strides"),
       syntax="slice")
define("stablehlo.dynamic_slice", properties=("slice_sizes",), syntax="dynamic_slice")
define("stablehlo.dynamic_update_slice", syntax="functional")
define("stablehlo.gather", properties=("dimension_numbers", "slice_sizes", "indices_are_sorted"))
define("stablehlo.scatter", properties=("scatter_dimension_numbers", "indices_are_sorted",
                                        "unique_indices"), num_regions=1)
define("stablehlo.torch_index_select", properties=("dim", "batch_dims"))
define("stablehlo.get_tuple_element", properties=("index",), syntax="get_tuple_element")
define("stablehlo.tuple", syntax="tuple")
define("stablehlo.get_dimension_size", properties=("dimension",), syntax="get_dimension_size")
define("stablehlo.set_dimension_size", properties=("dimension",), syntax="set_dimension_size")
# dynamic-shape forms: the interpreter may reject them when shapes are dynamic
define("stablehlo.dynamic_iota", properties=("iota_dimension",), syntax="dynamic_iota")
define("stablehlo.dynamic_broadcast_in_dim",
       properties=("broadcast_dimensions", "known_expanding_dimensions",
                   "known_nonexpanding_dimensions"), syntax="dynamic_broadcast_in_dim")
define("stablehlo.dynamic_reshape", syntax="functional")
define("stablehlo.dynamic_pad", syntax="functional")
define("stablehlo.real_dynamic_slice", syntax="functional")
define("stablehlo.dynamic_gather", properties=("dimension_numbers", "indices_are_sorted"))
