"""Ops that create, move or reshape data without arithmetic."""
from stablehlo.ir.ops.base import define_pure
from stablehlo.ir.ops.data_movement_rules import rule_for

define_pure("stablehlo.constant", properties=("value",), syntax="constant",
            verify=rule_for("constant"))
define_pure("stablehlo.iota", properties=("iota_dimension",), syntax="iota",
            verify=rule_for("iota"))
define_pure("stablehlo.broadcast_in_dim", properties=("broadcast_dimensions",),
            syntax="broadcast_in_dim", verify=rule_for("broadcast_in_dim"))
define_pure("stablehlo.broadcast", properties=("broadcast_sizes",), syntax="broadcast",
            verify=rule_for("broadcast"))
define_pure("stablehlo.reshape", syntax="functional", verify=rule_for("reshape"))
define_pure("stablehlo.transpose", properties=("permutation",), syntax="transpose",
            verify=rule_for("transpose"))
define_pure("stablehlo.reverse", properties=("dimensions",), syntax="reverse",
            verify=rule_for("reverse"))
define_pure("stablehlo.concatenate", properties=("dimension",), syntax="concatenate",
            verify=rule_for("concatenate"))
define_pure("stablehlo.pad",
            properties=("edge_padding_low", "edge_padding_high", "interior_padding"),
            syntax="pad", verify=rule_for("pad"))
define_pure("stablehlo.slice", properties=("start_indices", "limit_indices", "strides"),
            syntax="slice", verify=rule_for("slice"))
define_pure("stablehlo.dynamic_slice", properties=("slice_sizes",), syntax="dynamic_slice",
            verify=rule_for("dynamic_slice"))
define_pure("stablehlo.dynamic_update_slice", syntax="functional",
            verify=rule_for("dynamic_update_slice"))
define_pure("stablehlo.gather",
            properties=("dimension_numbers", "slice_sizes", "indices_are_sorted"),
            verify=rule_for("gather"))
define_pure("stablehlo.scatter", properties=("scatter_dimension_numbers", "indices_are_sorted",
                                             "unique_indices"), num_regions=1,
            verify=rule_for("scatter"))
define_pure("stablehlo.torch_index_select", properties=("dim", "batch_dims"),
            verify=rule_for("torch_index_select"))
define_pure("stablehlo.get_tuple_element", properties=("index",), syntax="get_tuple_element",
            verify=rule_for("get_tuple_element"))
define_pure("stablehlo.tuple", syntax="tuple", verify=rule_for("tuple"))
define_pure("stablehlo.get_dimension_size", properties=("dimension",), syntax="get_dimension_size",
            verify=rule_for("get_dimension_size"))
define_pure("stablehlo.set_dimension_size", properties=("dimension",), syntax="set_dimension_size",
            verify=rule_for("set_dimension_size"))
# dynamic-shape forms: the interpreter may reject them when shapes are dynamic
define_pure("stablehlo.dynamic_iota", properties=("iota_dimension",), syntax="dynamic_iota",
            verify=rule_for("dynamic_iota"))
define_pure("stablehlo.dynamic_broadcast_in_dim",
            properties=("broadcast_dimensions", "known_expanding_dimensions",
                        "known_nonexpanding_dimensions"), syntax="dynamic_broadcast_in_dim",
            verify=rule_for("dynamic_broadcast_in_dim"))
define_pure("stablehlo.dynamic_reshape", syntax="functional", verify=rule_for("dynamic_reshape"))
define_pure("stablehlo.dynamic_pad", syntax="functional", verify=rule_for("dynamic_pad"))
define_pure("stablehlo.real_dynamic_slice", syntax="functional",
            verify=rule_for("real_dynamic_slice"))
define_pure("stablehlo.dynamic_gather", properties=("dimension_numbers", "indices_are_sorted"),
            verify=rule_for("dynamic_gather"))
