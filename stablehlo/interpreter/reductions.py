"""Interpreter kernel of ``stablehlo.reduce`` (variadic, promotable bodies).

``results...[j] = body-fold of inputs...[j with ':' at dimensions]`` with the
init values, computed in the body's element types (``is_promotable``: an i8
input may be reduced by an i32 body). Single-op bodies run as numpy ufunc
reductions; any other body runs lane-wise (reducer.py).
"""
from __future__ import annotations

import numpy as np

from stablehlo.interpreter.kernels import kernel
from stablehlo.interpreter.opattrs import fail, int_list
from stablehlo.interpreter.reducer import (Body, binary_body_ops, body_dtypes, fast_reduce,
                                           fast_reducible, fold_reduce)


def split_operands(op, operands) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(inputs, init_values) of a variadic reducer op; checks the pairing."""
    if len(operands) % 2 or not operands:
        raise fail(op, f"expected inputs and as many init values, got {len(operands)} operands")
    n = len(operands) // 2
    inputs = [np.asarray(x) for x in operands[:n]]
    inits = [np.asarray(v) for v in operands[n:]]
    shape = inputs[0].shape
    for i, x in enumerate(inputs):
        if x.shape != shape:
            raise fail(op, f"input #{i} has shape {x.shape}, expected {shape}")
    for i, v in enumerate(inits):
        if v.shape != ():
            raise fail(op, f"init value #{i} must be a scalar, got shape {v.shape}")
    return inputs, inits


def to_body_types(op, region, inputs, inits):
    """Inputs and inits converted to the body's accumulator types (spec C6)."""
    if not op.regions or not region.blocks:
        raise fail(op, "missing reducer body")
    dtypes = body_dtypes(region)
    if len(region.blocks[0].arguments) != 2 * len(inputs):
        raise fail(op, f"reducer body takes {len(region.blocks[0].arguments)} arguments, "
                       f"expected {2 * len(inputs)}")
    inputs = [x.astype(d, copy=False) for x, d in zip(inputs, dtypes)]
    inits = [v.astype(d, copy=False) for v, d in zip(inits, dtypes)]
    return inputs, inits, dtypes


def reduce_axes(ctx, op, region, inputs, inits, axes: tuple) -> list[np.ndarray]:
    """Reduce ``inputs`` (already in body types) over ``axes`` with ``region``."""
    n = len(inputs)
    names = binary_body_ops(region, n)
    if fast_reducible(names, [x.dtype for x in inputs]):
        return [fast_reduce(name, x, axes, init) for name, x, init in zip(names, inputs, inits)]
    rank = inputs[0].ndim
    kept = [d for d in range(rank) if d not in axes]
    reduced = sorted(axes)  # lexicographic order of the reduced index (spec)
    lanes = tuple(inputs[0].shape[d] for d in kept)
    count = int(np.prod([inputs[0].shape[d] for d in reduced], dtype=np.int64))
    flat = [np.transpose(x, kept + reduced).reshape(lanes + (count,)) for x in inputs]
    return fold_reduce(Body(ctx, region), flat, inits)


@kernel("stablehlo.reduce", multi=True)
def reduce(ctx, op, *operands):
    inputs, inits = split_operands(op, operands)
    region = op.regions[0] if op.regions else None
    inputs, inits, _ = to_body_types(op, region, inputs, inits)
    dims = int_list(op, "dimensions")
    rank = inputs[0].ndim
    if len(set(dims)) != len(dims) or any(d < 0 or d >= rank for d in dims):
        raise fail(op, f"dimensions {dims} must be unique and within rank {rank}")
    return reduce_axes(ctx, op, region, inputs, inits, tuple(dims))
