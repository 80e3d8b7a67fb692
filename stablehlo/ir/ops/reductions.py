"""Ops with a reducer or comparator region: reduce, windows, sort, scatter's cousins."""
from stablehlo.ir.ops.base import define_pure
from stablehlo.ir.ops.reductions_rules import rule_for

define_pure("stablehlo.reduce", properties=("dimensions",), syntax="reduce", num_regions=1,
            verify=rule_for("reduce"))
define_pure("stablehlo.reduce_window",
            properties=("window_dimensions", "window_strides", "base_dilations",
                        "window_dilations", "padding"), num_regions=1,
            verify=rule_for("reduce_window"))
define_pure("stablehlo.select_and_scatter", properties=("window_dimensions", "window_strides",
                                                        "padding"), num_regions=2,
            verify=rule_for("select_and_scatter"))
define_pure("stablehlo.sort", properties=("dimension", "is_stable"), num_regions=1,
            verify=rule_for("sort"))
define_pure("stablehlo.map", properties=("dimensions",), num_regions=1, verify=rule_for("map"))
