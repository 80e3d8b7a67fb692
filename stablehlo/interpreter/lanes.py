"""Evaluating an elementwise body once on whole arrays of lanes.

A reducer body (reduce, reduce_window, select_and_scatter) is written for
scalars, but when every op in it is elementwise, running it once on arrays
that hold many scalars ("lanes") computes all the scalar applications at
once. Unlike vectorized_region.run_vectorized, this runner

* accepts lanes of any shape (window views are N-d),
* follows ``func.call`` into functions whose bodies are elementwise too
  (JAX emits ``call @logaddexp`` inside cumlogsumexp bodies), and
* reads values captured from the enclosing scope through ``ctx.lookup``.

It calls the same kernels the evaluator calls for each op, so it computes
what the per-lane evaluation would. ``LaneBody.accepts`` says whether a region
qualifies; callers fall back to one ``ctx.run_region`` per lane otherwise.
"""
from __future__ import annotations

import numpy as np

from stablehlo.interpreter.kernels import KERNELS
from stablehlo.ir.ops.base import ELEMENTWISE
from stablehlo.ir.types import QuantizedType, TensorType, numpy_dtype

_CALLS = ("func.call", "call")
_TERMINATORS = ("stablehlo.return", "func.return")
# Elementwise by trait but not plain lane-wise math on storage values.
_EXCLUDED = frozenset({"stablehlo.uniform_quantize", "stablehlo.uniform_dequantize"})
_MAX_CALL_DEPTH = 16


class NotLaneWise(Exception):
    """The body cannot be evaluated on arrays of lanes."""


def _scalar_type(t) -> bool:
    return (isinstance(t, TensorType) and t.shape == ()
            and not isinstance(t.element_type, QuantizedType))


def _callee_name(op) -> str | None:
    callee = op.attributes.get("callee")
    return getattr(callee, "name", None)


def _op_is_lane_wise(op) -> bool:
    if op.regions or not all(_scalar_type(t) for t in op.result_types):
        return False
    if not all(_scalar_type(v.type) for v in op.operands):
        return False
    if op.name == "stablehlo.constant":
        return True
    if op.name == "stablehlo.bitcast_convert":
        return (numpy_dtype(op.operand_types[0].element_type).itemsize ==
                numpy_dtype(op.result_types[0].element_type).itemsize)
    opdef = op.opdef
    return opdef is not None and opdef.has(ELEMENTWISE) and op.name not in _EXCLUDED


def _block_is_lane_wise(ctx, block, depth: int) -> bool:
    if depth > _MAX_CALL_DEPTH or not block.operations:
        return False
    if block.operations[-1].name not in _TERMINATORS:
        return False
    if not all(_scalar_type(a.type) for a in block.arguments):
        return False
    for op in block.operations[:-1]:
        if op.name in _CALLS:
            name = _callee_name(op)
            try:
                func = ctx.function(name) if name else None
            except Exception:  # noqa: BLE001 - unknown callee: not lane-wise
                return False
            if func is None or func.body is None:
                return False
            if not _block_is_lane_wise(ctx, func.body, depth + 1):
                return False
        elif not _op_is_lane_wise(op):
            return False
    return True


class LaneBody:
    """A single-block region that can run on arrays of lanes."""

    def __init__(self, ctx, region):
        self.ctx = ctx
        self.block = region.blocks[0] if len(region.blocks) == 1 else None
        self.accepts = self.block is not None and _block_is_lane_wise(ctx, self.block, 0)

    def run(self, args) -> list[np.ndarray]:
        """The body's results for lane arrays ``args`` (shapes must broadcast)."""
        if not self.accepts:
            raise NotLaneWise("body has ops that are not elementwise")
        return _run_block(self.ctx, self.block, args)


def _run_block(ctx, block, args) -> list:
    env = {}
    for value, arg in zip(block.arguments, args):
        env[value] = _exact(arg, value.type)
    *body, terminator = block.operations
    for op in body:
        operands = [_read(ctx, env, v) for v in op.operands]
        if op.name in _CALLS:
            outs = _run_block(ctx, ctx.function(_callee_name(op)).body, operands)
        else:
            try:
                outs = KERNELS.get(op.name)(ctx, op, *operands)
            except Exception as exc:  # a kernel that insists on scalars
                raise NotLaneWise(f"{op.where()}: {type(exc).__name__}: {exc}") from exc
        for value, out in zip(op.results, outs):
            env[value] = _exact(out, value.type)
    return [_read(ctx, env, v) for v in terminator.operands]


def _read(ctx, env: dict, value):
    found = env.get(value)
    return found if found is not None else ctx.lookup(value)


def _exact(value, type) -> np.ndarray:
    value = np.asarray(value)
    dtype = numpy_dtype(type.element_type)
    return value if value.dtype == dtype else value.astype(dtype)
