"""Interpreter kernels of the windowed ops: reduce_window and select_and_scatter.

Windows are strided numpy views over the padded (and base-dilated) input,
shaped ``(num_windows..., window_dimensions...)``; no element is copied per
window. reduce_window then reduces the trailing window axes exactly like
``stablehlo.reduce``. select_and_scatter walks the window offsets in
lexicographic order keeping, per window, the selected value and the flat
operand index it came from, then scatters the source values onto those
indices with the scatter body.
"""
from __future__ import annotations

import numpy as np

from stablehlo.interpreter.accumulate import to_result, widen
from stablehlo.interpreter.kernels import kernel
from stablehlo.interpreter.opattrs import fail, int_list, int_matrix
from stablehlo.interpreter.reducer import Body, body_ufunc, binary_body_ops
from stablehlo.interpreter.reductions import reduce_axes, split_operands, to_body_types


def pad_dilate(x: np.ndarray, value, padding: np.ndarray, dilation=None) -> np.ndarray:
    """``pad(x, value, low, high, interior=dilation-1)``; negative padding crops."""
    rank = x.ndim
    dilation = [1] * rank if dilation is None else list(dilation)
    dilated = [0 if s == 0 else (s - 1) * d + 1 for s, d in zip(x.shape, dilation)]
    low = [int(p) for p in padding[:, 0]]
    high = [int(p) for p in padding[:, 1]]
    grown = [max(lo, 0) + n + max(hi, 0) for lo, n, hi in zip(low, dilated, high)]
    buf = np.full(grown, value, dtype=x.dtype)
    place = tuple(slice(max(lo, 0), max(lo, 0) + n, d)
                  for lo, n, d in zip(low, dilated, dilation))
    buf[place] = x
    crop = tuple(slice(max(-lo, 0), max(g - max(-hi, 0), max(-lo, 0)))
                 for lo, hi, g in zip(low, high, grown))
    return buf[crop]


def window_view(padded: np.ndarray, window, strides, dilations) -> np.ndarray:
    """Read-only view of shape ``num_windows + window`` over ``padded`` (spec C15)."""
    out = []
    for size, w, s, d in zip(padded.shape, window, strides, dilations):
        span = (w - 1) * d + 1
        out.append(0 if size == 0 or span > size else (size - span) // s + 1)
    shape = tuple(out) + tuple(window)
    if 0 in shape:
        return np.empty(shape, dtype=padded.dtype)
    steps = tuple(st * s for st, s in zip(padded.strides, strides))
    taps = tuple(st * d for st, d in zip(padded.strides, dilations))
    return np.lib.stride_tricks.as_strided(padded, shape, steps + taps, writeable=False)


def _window_attrs(op, rank: int, dilated: bool):
    window = int_list(op, "window_dimensions")
    strides = int_list(op, "window_strides", [1] * rank)
    padding = int_matrix(op, "padding", rank)
    base = int_list(op, "base_dilations", [1] * rank) if dilated else [1] * rank
    wdil = int_list(op, "window_dilations", [1] * rank) if dilated else [1] * rank
    for name, values in (("window_dimensions", window), ("window_strides", strides),
                         ("base_dilations", base), ("window_dilations", wdil)):
        if len(values) != rank:
            raise fail(op, f"{name} has {len(values)} entries, expected rank {rank}")
        if any(v <= 0 for v in values):
            raise fail(op, f"{name} must be positive, got {values}")
    return window, strides, padding, base, wdil


@kernel("stablehlo.reduce_window", multi=True)
def reduce_window(ctx, op, *operands):
    inputs, inits = split_operands(op, operands)
    region = op.regions[0] if op.regions else None
    inputs, inits, _ = to_body_types(op, region, inputs, inits)
    rank = inputs[0].ndim
    window, strides, padding, base, wdil = _window_attrs(op, rank, dilated=True)
    views = [window_view(pad_dilate(x, v, padding, base), window, strides, wdil)
             for x, v in zip(inputs, inits)]
    axes = tuple(range(rank, 2 * rank))
    return reduce_axes(ctx, op, region, views, inits, axes)


@kernel("stablehlo.select_and_scatter")
def select_and_scatter(ctx, op, operand, source, init_value):
    if len(op.regions) != 2:
        raise fail(op, "expected a select and a scatter region")
    operand = np.asarray(operand)
    rank = operand.ndim
    window, strides, padding, _, _ = _window_attrs(op, rank, dilated=False)
    ones = [1] * rank
    # Padding elements are never selected: track flat operand indices, -1 for padding.
    index = np.arange(operand.size, dtype=np.int64).reshape(operand.shape)
    values = window_view(pad_dilate(operand, 0, padding), window, strides, ones)
    indices = window_view(pad_dilate(index, -1, padding), window, strides, ones)
    if values.shape[:rank] != np.shape(source):
        raise fail(op, f"source has shape {np.shape(source)}, expected {values.shape[:rank]}")
    chosen = _select(Body(ctx, op.regions[0]), values, indices, rank)
    return _scatter(ctx, op.regions[1], chosen, np.asarray(source), init_value,
                    operand.shape)


def _select(select: Body, values: np.ndarray, indices: np.ndarray, rank: int) -> np.ndarray:
    """Per window, the flat operand index the select body picks (-1: none)."""
    lanes = values.shape[:rank]
    count = int(np.prod(values.shape[rank:], dtype=np.int64))
    values = values.reshape(lanes + (count,))
    indices = indices.reshape(lanes + (count,))
    best = np.empty(lanes, dtype=values.dtype)
    best_index = np.full(lanes, -1, dtype=np.int64)
    for k in range(count):
        cand, cand_index = values[..., k], indices[..., k]
        valid = cand_index >= 0
        take = valid & (best_index < 0)
        if k and np.any(valid & ~take):
            keep = np.asarray(select(best, cand)[0], dtype=bool)
            take |= valid & (best_index >= 0) & ~keep
        best = np.where(take, cand, best)
        best_index = np.where(take, cand_index, best_index)
    return best_index


def _scatter(ctx, region, targets, source, init_value, shape) -> np.ndarray:
    """``result[t] = fold(scatter, init, source values with target t)`` in source order."""
    body = Body(ctx, region)
    dtype = body.dtypes[0]
    flat_targets = targets.reshape(-1)
    values = source.reshape(-1).astype(dtype, copy=False)
    keep = flat_targets >= 0
    flat_targets, values = flat_targets[keep], values[keep]
    size = int(np.prod(shape, dtype=np.int64))
    init = np.asarray(init_value).astype(dtype)
    names = binary_body_ops(region, 1)
    fast = body_ufunc(names[0], dtype) if names else None
    if fast is not None:
        ufunc, compute = fast
        acc = np.full(size, widen(init, compute), dtype=compute)
        ufunc.at(acc, flat_targets, widen(values, compute))
        return to_result(acc, dtype).reshape(shape)
    acc = np.full(size, init, dtype=dtype)
    order = np.argsort(flat_targets, kind="stable")
    flat_targets, values = flat_targets[order], values[order]
    starts = np.r_[0, np.flatnonzero(np.diff(flat_targets)) + 1]
    run_start = np.repeat(starts, np.diff(np.r_[starts, len(flat_targets)]))
    rank_in_run = np.arange(len(flat_targets)) - run_start
    for r in range(int(rank_in_run.max(initial=-1)) + 1):
        pick = rank_in_run == r
        where = flat_targets[pick]
        acc[where] = body(acc[where], values[pick])[0]
    return acc.reshape(shape)
