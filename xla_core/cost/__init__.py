"""Cost model: hardware descriptions, flop/byte estimates and a roofline time.

    from xla_core.cost import hardware, op_cost, roofline_seconds
    seconds = roofline_seconds(op_cost(op), hardware("cpu"))

``hardware("cpu")`` measures this machine once (under two seconds) and caches
the numbers on disk; ``hardware("generic-cpu")`` is fixed and deterministic.
"""
from xla_core.cost.estimates import (
    COMPLEX_FACTOR,
    DEFAULT_TRIP_COUNT,
    COST_RULES,
    Cost,
    CostModelError,
    ElementwiseRule,
    elementwise_weight,
    fusion_cost,
    module_cost,
    op_cost,
    roofline_seconds,
    type_bytes,
    while_trip_count,
)
from xla_core.cost.hardware import HARDWARE, HardwareDescription, hardware, register_hardware

__all__ = [
    "COMPLEX_FACTOR",
    "DEFAULT_TRIP_COUNT",
    "COST_RULES",
    "HARDWARE",
    "Cost",
    "CostModelError",
    "ElementwiseRule",
    "HardwareDescription",
    "elementwise_weight",
    "fusion_cost",
    "hardware",
    "module_cost",
    "op_cost",
    "register_hardware",
    "roofline_seconds",
    "type_bytes",
    "while_trip_count",
]
