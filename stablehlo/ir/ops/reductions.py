"""Ops with a reducer or comparator region: reduce, windows, sort, scatter's cousins."""
from stablehlo.ir.ops.base import define
from stablehlo.ir.ops.reductions_rules import rule_for

define("stablehlo.reduce", properties=("dimensions",), syntax="reduce", num_regions=1,
       verify=rule_for("reduce"))
define("stablehlo.reduce_window",
       properties=("window_dimensions", "window_strides", "base_dilations",
                   "window_dilations", "padding"), num_regions=1, verify=rule_for("reduce_window"))
define("stablehlo.select_and_scatter", properties=("window_dimensions", "window_strides",
                                                   "padding"), num_regions=2,
       verify=rule_for("select_and_scatter"))
define("stablehlo.sort", properties=("dimension", "is_stable"), num_regions=1,
       verify=rule_for("sort"))
define("stablehlo.map", properties=("dimensions",), num_regions=1, verify=rule_for("map"))
