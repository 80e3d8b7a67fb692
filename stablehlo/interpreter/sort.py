"""Interpreter kernels for sort and map, the region-per-element ops.

sort: every 1-d slice along ``dimension`` is sorted with the comparator
region, which sees ``(lhs_0, rhs_0, lhs_1, rhs_1, ...)``. The result is
always the stable order (a valid answer for ``is_stable = false`` too). Three
strategies compute it, fastest first; all give the same order for any
comparator that is a strict weak order (tests compare them):

1. the comparator is one ``compare LT|GT`` of operand 0's pair on integers or
   IEEE floats (TOTALORDER, or FLOAT on NaN-free keys): a numpy stable argsort;
2. the comparator is lane-wise (see lanes.py): a bottom-up merge sort where
   every merge step places all elements at once by binary search, with one
   comparator evaluation over arrays per search step;
3. otherwise (or when the comparator is no strict weak order, so 2 cannot
   place elements consistently): Python's stable sort calling the comparator
   per pair.

map: the region applied to every element; on whole arrays when lane-wise.
"""
from __future__ import annotations

import functools

import numpy as np

from stablehlo.interpreter.index_values import result_dtype
from stablehlo.interpreter.kernels import kernel
from stablehlo.interpreter.lanes import LaneBody, NotLaneWise
from stablehlo.interpreter.opattrs import bool_value, fail, int_list, int_value
from stablehlo.interpreter.region_patterns import single_compare
from stablehlo.ir.types import FloatType, IntegerType, TensorType

# Float types whose bit pattern is sign | exponent | mantissa over the whole
# storage word, so the usual integer transform gives IEEE totalOrder.
_TOTAL_ORDER_VIEW = {"f16": np.int16, "bf16": np.int16, "f32": np.int32, "f64": np.int64}


@kernel("stablehlo.sort", multi=True)
def sort(ctx, op, *inputs):
    if not inputs:
        raise fail(op, "needs at least one operand")
    if any(x.shape != inputs[0].shape for x in inputs):
        raise fail(op, "all operands must have the same shape")
    rank = inputs[0].ndim
    dimension = int_value(op, "dimension", -1)
    if not -rank <= dimension < rank:
        raise fail(op, f"dimension {dimension} out of range for rank {rank}")
    dimension %= rank
    bool_value(op, "is_stable", False)  # validated; the stable order is always produced
    if len(op.regions) != 1:
        raise fail(op, "expects one comparator region")
    if inputs[0].size == 0:
        return [x.copy() for x in inputs]
    rows = [np.moveaxis(x, dimension, -1) for x in inputs]
    moved_shape = rows[0].shape
    rows = [r.reshape(-1, moved_shape[-1]) for r in rows]
    perm = _sort_permutation(ctx, op, rows)
    return [np.moveaxis(np.take_along_axis(r, perm, axis=1).reshape(moved_shape), -1,
                        dimension).copy() for r in rows]


def _sort_permutation(ctx, op, rows) -> np.ndarray:
    """perm[b, p] = index within row b of the element that ends at position p."""
    region = op.regions[0]
    perm = _argsort_single_compare(op, region, rows[0])
    if perm is not None:
        return perm
    less = _lane_less(ctx, region, rows)
    if less is not None:
        try:
            perm = _merge_sort(less, *rows[0].shape)
            if perm is not None:
                return perm
        except NotLaneWise:
            less = None
    if less is None:
        less = _region_less(ctx, op, region, rows)
    return _python_sort(less, *rows[0].shape)


# -- strategy 1: numpy argsort


def _argsort_single_compare(op, region, keys):
    pattern = single_compare(region)
    if pattern is None:
        return None
    direction, compare_type = pattern
    if direction not in ("LT", "GT"):
        return None
    sortable = _sort_keys(op.operand_types[0], keys, compare_type)
    if sortable is None:
        return None
    if direction == "LT":
        return np.argsort(sortable, axis=1, kind="stable")
    # Descending and stable: sort the reversed rows ascending, then reverse back.
    n = sortable.shape[1]
    return n - 1 - np.argsort(sortable[:, ::-1], axis=1, kind="stable")[:, ::-1]


def _sort_keys(type, keys, compare_type):
    """Keys whose numpy order is the comparator's order, or None."""
    if not isinstance(type, TensorType):
        return None
    element = type.element_type
    if isinstance(element, IntegerType):
        natural = "UNSIGNED" if (element.width == 1 or not element.signed) else "SIGNED"
        if compare_type not in (None, natural):
            return None
        return keys.astype(np.uint64 if natural == "UNSIGNED" else np.int64)
    if isinstance(element, FloatType) and element.name in _TOTAL_ORDER_VIEW:
        if compare_type == "TOTALORDER":
            bits = keys.view(_TOTAL_ORDER_VIEW[element.name]).astype(np.int64)
            # negative floats order by decreasing magnitude: flip their non-sign bits
            return np.where(bits < 0, bits ^ ((1 << (8 * keys.itemsize - 1)) - 1), bits)
        if compare_type in (None, "FLOAT"):
            wide = keys.astype(np.float64)
            return None if np.isnan(wide).any() else wide
    return None


# -- strategy 2: merge sort with a lane-wise comparator


def _lane_less(ctx, region, rows):
    """less(lhs, rhs) over flat element indices, evaluating the region on arrays."""
    body = LaneBody(ctx, region)
    if not body.accepts:
        return None
    flat = [r.ravel() for r in rows]

    def less(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        args = []
        for values in flat:
            args += [values[lhs], values[rhs]]
        out = body.run(args)[0]
        return np.broadcast_to(np.asarray(out, dtype=bool), lhs.shape)

    return less


def _merge_sort(less, batch: int, n: int):
    """Bottom-up stable merge sort of all rows at once; None if inconsistent.

    Left runs hold earlier elements than right runs, so stability means: a
    left element ``a`` is preceded by the right elements ``b`` with
    ``less(b, a)``; a right element ``b`` by the left elements ``a`` with
    ``not less(b, a)``. Both counts are found by binary search in the other
    (sorted) run, all elements searching in lock step.
    """
    perm = np.tile(np.arange(n, dtype=np.int64), (batch, 1))
    base = (np.arange(batch, dtype=np.int64) * n)[:, None]
    pos = np.arange(n, dtype=np.int64)
    width = 1
    while width < n:
        block = (pos // (2 * width)) * (2 * width)
        is_left = pos - block < width
        right = block + width
        other_start = np.where(is_left, right, block)
        other_len = np.where(is_left, np.clip(n - right, 0, width), np.minimum(width, n - block))
        own = np.where(is_left, pos - block, pos - right)
        lo = np.zeros((batch, n), dtype=np.int64)
        hi = np.broadcast_to(other_len, (batch, n)).copy()
        while True:
            b, p = np.nonzero(lo < hi)
            if not len(b):
                break
            mid = (lo[b, p] + hi[b, p]) // 2
            me = perm[b, p] + base[b, 0]
            other = perm[b, other_start[p] + mid] + base[b, 0]
            left = is_left[p]
            c = less(np.where(left, other, me), np.where(left, me, other))
            step = np.where(left, c, ~c)
            lo[b, p] = np.where(step, mid + 1, lo[b, p])
            hi[b, p] = np.where(step, hi[b, p], mid)
        target = block + own + lo
        if not _is_permutation(target):
            return None
        merged = np.empty_like(perm)
        np.put_along_axis(merged, target, perm, axis=1)
        perm = merged
        width *= 2
    return perm


def _is_permutation(target: np.ndarray) -> bool:
    n = target.shape[1]
    if target.min() < 0 or target.max() >= n:
        return False
    marks = np.zeros(target.shape, dtype=bool)
    np.put_along_axis(marks, target, True, axis=1)
    return bool(marks.all())


# -- strategy 3: one region call per comparison


def _region_less(ctx, op, region, rows):
    flat = [r.ravel() for r in rows]

    def less(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
        out = []
        for i, j in zip(np.ravel(lhs), np.ravel(rhs)):
            args = []
            for values in flat:
                args += [np.asarray(values[i]), np.asarray(values[j])]
            results = ctx.run_region(region, args)
            if len(results) != 1:
                raise fail(op, f"comparator returned {len(results)} values, expected 1")
            out.append(bool(np.asarray(results[0])))
        return np.array(out, dtype=bool)

    return less


def _python_sort(less, batch: int, n: int) -> np.ndarray:
    def compare(i: int, j: int) -> int:
        # list.sort only asks "<", so -1 / 0 is enough
        return -1 if less(np.array([i]), np.array([j]))[0] else 0

    perm = np.empty((batch, n), dtype=np.int64)
    for b in range(batch):
        base = b * n
        order = sorted(range(base, base + n), key=functools.cmp_to_key(compare))
        perm[b] = np.array(order, dtype=np.int64) - base
    return perm


# ---------------------------------------------------------------------------
# map


@kernel("stablehlo.map")
def map_(ctx, op, *inputs):
    if not inputs:
        raise fail(op, "needs at least one operand")
    shape = inputs[0].shape
    if any(x.shape != shape for x in inputs):
        raise fail(op, "all operands must have the same shape")
    dims = int_list(op, "dimensions", list(range(len(shape))))
    if dims != list(range(len(shape))):
        raise fail(op, f"dimensions must be {list(range(len(shape)))}, got {dims}")
    if len(op.regions) != 1:
        raise fail(op, "expects one computation region")
    region = op.regions[0]
    flat = [x.ravel() for x in inputs]
    body = LaneBody(ctx, region)
    if body.accepts and flat[0].size:
        try:
            out = body.run(flat)[0]
            return np.broadcast_to(out, flat[0].shape).reshape(shape).copy()
        except NotLaneWise:
            pass
    results = []
    for i in range(flat[0].size):
        outs = ctx.run_region(region, [np.asarray(x[i]) for x in flat])
        if len(outs) != 1:
            raise fail(op, f"computation returned {len(outs)} values, expected 1")
        results.append(np.asarray(outs[0]))
    if not results:
        return np.zeros(shape, dtype=result_dtype(op))
    return np.stack(results).reshape(shape)
