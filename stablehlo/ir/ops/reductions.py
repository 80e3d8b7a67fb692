"""Ops with a reducer or comparator region: reduce, windows, sort, scatter's cousins."""
from stablehlo.ir.ops.base import define

define("stablehlo.reduce", properties=("dimensions",), syntax="reduce", num_regions=1)
define("stablehlo.reduce_window",
       properties=("window_dimensions", "window_strides", "base_dilations",
                   "window_dilations", "padding"), num_regions=1)
define("stablehlo.select_and_scatter", properties=("window_dimensions", "window_strides",
                                                   "padding"), num_regions=2)
define("stablehlo.sort", properties=("dimension", "is_stable"), num_regions=1)
define("stablehlo.map", properties=("dimensions",), num_regions=1)
