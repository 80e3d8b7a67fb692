"""Every op OpenHLO knows, declared once per family (see base.py)."""
from stablehlo.ir.ops.base import OPS, Effect, OpDef, op_effects, op_error, VARIADIC  # noqa: F401
from stablehlo.ir.ops import (  # noqa: F401  (importing registers the ops)
    elementwise, data_movement, reductions, linalg, control_flow, collectives, testing, chlo,
    async_collectives,
)
