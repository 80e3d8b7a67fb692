"""Running reducer bodies (reduce, reduce_window, select_and_scatter) on whole arrays.

A reducer body is a region ``(acc_0..acc_N-1, x_0..x_N-1) -> (r_0..r_N-1)``
that StableHLO applies to scalars. The kernels here never loop over
elements in Python:

* ``binary_body_ops`` gives the ops of the common bodies where every result
  is a single monoid (add, multiply, maximum, minimum, and, or, xor) of its
  own pair of arguments (``stablehlo.ir.regions.region_monoids``); such
  reductions run as numpy ufunc reductions (``fast_reduce``);
* any other body is applied lane-wise (``Body``, via lanes.py): its ops are
  elementwise, so running the region once on arrays holding all lanes
  computes every scalar application at once. Bodies with ops that are not
  elementwise fall back to one region run per lane.

``fold_reduce`` folds the trailing axis of arrays with a body. The order of
float folds follows XLA's where it can (Note [float reduction order]).
"""
from __future__ import annotations

import numpy as np

from stablehlo.interpreter.accumulate import kind, to_result, widen
from stablehlo.interpreter.lanes import LaneBody, NotLaneWise
from stablehlo.ir.regions import region_monoids
from stablehlo.ir.types import numpy_dtype


def body_dtypes(region) -> list[np.dtype]:
    """The numpy dtypes of the accumulator arguments of a reducer body."""
    args = region.blocks[0].arguments
    half = len(args) // 2
    return [numpy_dtype(a.type.element_type) for a in args[:half]]


def binary_body_ops(region, n: int) -> list[str] | None:
    """Op names if result i of the body is ``op_i(arg_i, arg_{n+i})``, else None."""
    monoids = region_monoids(region)
    if monoids is None or len(monoids) != n:
        return None
    return [m.op for m in monoids]


def body_ufunc(name: str, dtype) -> tuple[np.ufunc, np.dtype] | None:
    """The numpy ufunc and compute dtype of a fast body op on ``dtype``, if any."""
    k = kind(dtype)
    short = name.split(".", 1)[1]
    if k == "b":
        table = {"add": np.logical_or, "or": np.logical_or, "maximum": np.logical_or,
                 "multiply": np.logical_and, "and": np.logical_and,
                 "minimum": np.logical_and, "xor": np.logical_xor}
        return table[short], np.dtype(np.bool_)
    if k in "iu":
        table = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum,
                 "minimum": np.minimum, "and": np.bitwise_and, "or": np.bitwise_or,
                 "xor": np.bitwise_xor}
        return table[short], np.dtype(np.uint64 if k == "u" else np.int64)
    if k == "f":
        if short in ("add", "multiply"):  # rounded in the body's type at every step
            return (np.add if short == "add" else np.multiply), np.dtype(dtype)
        table = {"maximum": np.maximum, "minimum": np.minimum}
        wide = np.dtype(dtype) == np.float64
        compute = np.dtype(np.float64 if wide else np.float32)  # exact: only picks a value
        return (table[short], compute) if short in table else None
    if k == "c" and short in ("add", "multiply"):
        return (np.add if short == "add" else np.multiply), np.dtype(dtype)
    return None


def fast_reducible(names: list[str] | None, dtypes) -> bool:
    return names is not None and all(body_ufunc(n, d) is not None for n, d in zip(names, dtypes))


# Note [float reduction order]
# The spec lets the implementation fold the inputs with any binary tree
# whose in-order traversal is the index order, init values anywhere.
# Integer and min/max reductions give the same result for every tree, so
# they use numpy's ufunc.reduce. Float sums and products do not, and the
# conformance checks (from XLA's CPU backend) allow only 3 ULPs: XLA folds a
# window or a short reduction one element at a time, init first, in index
# order, rounding every step in the body's element type (bf16 sums round to
# bf16 at each step). We do the same up to SEQUENTIAL_LIMIT elements per
# output, for single-op bodies and general bodies alike; longer folds use a
# pairwise tree (init first, neighbours paired level by level: log2(K) body
# runs, still rounding in the body type, and far more accurate than a long
# sequential fold in a narrow type).
SEQUENTIAL_LIMIT = 256


def fast_reduce(name: str, x: np.ndarray, axes: tuple, init: np.ndarray) -> np.ndarray:
    """``init (op) x[reduced over axes]`` for a fast body op, in ``x``'s dtype."""
    ufunc, compute = body_ufunc(name, x.dtype)
    init_c = widen(np.asarray(init), compute)
    out_shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    if any(x.shape[a] == 0 for a in axes):
        result = np.broadcast_to(init_c, out_shape)
    elif kind(compute) in "fc" and ufunc in (np.add, np.multiply):
        result = _ordered_reduce(ufunc, x.astype(compute, copy=False), axes, init_c)
    else:
        with np.errstate(all="ignore"):
            result = ufunc(init_c, ufunc.reduce(widen(x, compute), axis=axes))
    return to_result(np.asarray(result), x.dtype)


def _ordered_reduce(ufunc, x: np.ndarray, axes: tuple, init: np.ndarray) -> np.ndarray:
    """Float fold in index order (Note [float reduction order])."""
    kept = [d for d in range(x.ndim) if d not in axes]
    lanes = tuple(x.shape[d] for d in kept)
    count = int(np.prod([x.shape[d] for d in axes], dtype=np.int64))
    flat = np.transpose(x, kept + sorted(axes)).reshape(lanes + (count,))
    with np.errstate(all="ignore"):
        if count <= SEQUENTIAL_LIMIT:
            acc = np.broadcast_to(init, lanes).astype(x.dtype)
            for i in range(count):
                acc = ufunc(acc, flat[..., i])
            return acc
        while flat.shape[-1] > 1:
            pairs = flat.shape[-1] // 2
            merged = ufunc(flat[..., 0:2 * pairs:2], flat[..., 1:2 * pairs:2])
            if flat.shape[-1] % 2:
                merged = np.concatenate([merged, flat[..., -1:]], axis=-1)
            flat = merged
        return ufunc(init, flat[..., 0])


class Body:
    """A reducer region bound to an evaluation context, applied to arrays of lanes."""

    def __init__(self, ctx, region):
        self.ctx = ctx
        self.region = region
        self.lanes = LaneBody(ctx, region)
        self.dtypes = [numpy_dtype(a.type.element_type) for a in region.blocks[0].arguments]

    def __call__(self, *args: np.ndarray) -> list[np.ndarray]:
        """Apply the body lane-wise; all ``args`` broadcast to one lane shape."""
        args = [np.asarray(a).astype(d, copy=False) for a, d in zip(args, self.dtypes)]
        shape = np.broadcast_shapes(*(a.shape for a in args))
        if shape == ():
            return [np.asarray(r) for r in self.ctx.run_region(self.region, args)]
        if self.lanes.accepts:
            try:
                results = self.lanes.run(args)
                return [np.broadcast_to(r, shape) for r in results]
            except NotLaneWise:
                self.lanes.accepts = False
        return self._per_lane(args, shape)

    def _per_lane(self, args, shape) -> list[np.ndarray]:
        full = [np.broadcast_to(a, shape) for a in args]
        outs = None
        for index in np.ndindex(*shape):
            results = self.ctx.run_region(self.region, [np.asarray(a[index]) for a in full])
            if outs is None:
                outs = [np.empty(shape, dtype=np.asarray(r).dtype) for r in results]
            for out, r in zip(outs, results):
                out[index] = r
        if outs is None:  # no lanes: result dtypes from the body's return types
            term = self.region.blocks[0].operations[-1]
            outs = [np.empty(shape, dtype=numpy_dtype(v.type.element_type))
                    for v in term.operands]
        return outs


def fold_reduce(body: Body, xs: list[np.ndarray], inits: list[np.ndarray]) -> list[np.ndarray]:
    """Reduce the last axis of every ``xs[i]`` with ``body``, starting from ``inits``.

    ``xs`` share one shape ``(..., K)``; the results have shape ``(...)``.
    """
    lanes = xs[0].shape[:-1]
    count = xs[0].shape[-1]
    if count == 0 or 0 in lanes:
        return [np.broadcast_to(np.asarray(i), lanes).copy() for i in inits]
    if count <= SEQUENTIAL_LIMIT:
        accs = [np.asarray(i) for i in inits]
        for k in range(count):
            accs = body(*accs, *[x[..., k] for x in xs])
        return accs
    accs = list(xs)
    while accs[0].shape[-1] > 1:
        size = accs[0].shape[-1]
        pairs = size // 2
        left = [a[..., 0:2 * pairs:2] for a in accs]
        right = [a[..., 1:2 * pairs:2] for a in accs]
        merged = body(*left, *right)
        if size % 2:
            merged = [np.concatenate([m, a[..., -1:]], axis=-1) for m, a in zip(merged, accs)]
        accs = merged
    heads = [a[..., 0] for a in accs]
    return body(*[np.asarray(i) for i in inits], *heads)
