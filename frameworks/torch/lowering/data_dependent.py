"""Ops whose result size depends on the data, compiled at an upper bound: nonzero,
boolean-mask indexing (``x[mask]``, called from indexing.py's ``index.Tensor`` rule),
masked_select and _unique2; and the masking that keeps reductions over such a padded dim
exact.

Note [Bounded data-dependent sizes]
    Dynamo gives such a result an unbacked size ``u0`` (with
    ``capture_dynamic_output_shape_ops``) whose upper bound the ShapeEnv knows (the input's
    element count). The runner binds ``u0`` to that bound while lowering, so a rule here
    computes the result padded to the bound and records the real size, a ``tensor<i64>``,
    in ``ctx.runtime_sizes[u0]``; the segment returns that count beside its results and the
    runner slices every padded result to its valid prefix (bounded_shapes.py). The valid
    prefix holds what torch computes; the padding holds harmless values (indices of
    elements that were not kept, so a later gather stays in range).

    Ops after it in the same segment see the padded value. Elementwise ops and most others
    cannot mix padding into valid elements (bounded_shapes.padding_hazard decides); a
    reduction over the padded dim can, so ``mask_padding`` fills the padding with the
    reduction's identity first (and rescales a mean by bound / count). Dynamic dims padded
    to a bucket (bounded_shapes.py) are masked the same way, their real sizes being
    program inputs.

Compaction is a stable sort: keys ``i`` for kept elements and ``N + i`` for the others put
the kept positions first, in order, without a scatter.
"""
from __future__ import annotations

import numpy as np
import sympy
import torch

from stablehlo.ir.types import I64

from frameworks.torch.lowering.context import normalize_dim, normalize_dims
from frameworks.torch.lowering.reductions import identity
from frameworks.torch.lowering.registry import Unsupported, lowers
from frameworks.torch.lowering.sorting import _sort as sort_with_positions

aten = torch.ops.aten


def _record_size(ctx, size, count) -> None:
    """Record ``count`` as the run-time value of the unbacked size ``size`` of the result."""
    expr = sympy.sympify(size.node.expr) if isinstance(size, torch.SymInt) else None
    if expr is None or not expr.is_Symbol:
        raise Unsupported(f"its result size {size} is not one data-dependent size")
    if ctx.runtime_sizes is None:
        raise Unsupported("its result size depends on the data, and this caller cannot "
                          "take a size computed at run time")
    ctx.runtime_sizes[expr] = count


def _compact(ctx, keep, bound: int):
    """The positions of the true elements of the 1-D bool ``keep`` in order, padded to
    ``bound`` entries, and their count (``tensor<i64>``)."""
    b = ctx.b
    (n,) = keep.type.shape
    count_init = ctx.scalar(0, torch.int64)
    if n == 0:
        return ctx.full(0, torch.int64, (bound,)), count_init
    iota = b.iota((n,), I64)
    key = b.select(keep, iota, b.add(iota, ctx.full(n, torch.int64, (n,))))
    ordered = b.sort([key], "LT", dimension=0, is_stable=True)  # keys are distinct
    # key mod n: the position itself for kept elements, an unkept position after them
    positions = b.remainder(ordered, ctx.full(n, torch.int64, (n,)))
    if bound <= n:
        positions = b.slice(positions, [0], [bound])
    else:
        positions = b.pad(positions, ctx.scalar(0, torch.int64), [0], [bound - n], [0])
    count = b.reduce(ctx.cast(keep, torch.int64), count_init, [0], "stablehlo.add")
    return positions, count


def _take_rows(ctx, x, positions):
    """``x[positions]`` along dim 1 of a 3-D value: ``(pre, m, post) -> (pre, P, post)``."""
    pre, _, post = x.type.shape
    (p,) = positions.type.shape
    return ctx.b.gather(x, ctx.b.reshape(positions, (p, 1)), offset_dims=(0, 2),
                        collapsed_slice_dims=(1,), start_index_map=(1,), index_vector_dim=1,
                        slice_sizes=(pre, 1, post))


@lowers(aten.nonzero.default)
def _nonzero(ctx, x):
    shape = x.type.shape
    bound = ctx.out_shape()[0]
    flat = ctx.b.reshape(ctx.cast(x, torch.bool), (int(np.prod(shape)),))
    positions, count = _compact(ctx, flat, bound)
    _record_size(ctx, ctx.node.meta["val"].shape[0], count)
    if not shape:  # a 0-d tensor: one row of no coordinates if it is nonzero
        return ctx.full(0, torch.int64, (bound, 0))
    strides = np.cumprod((1,) + shape[:0:-1])[::-1]  # row-major strides of x
    coords = []
    for size, stride in zip(shape, strides):
        c = ctx.b.divide(positions, ctx.full(int(stride), torch.int64, (bound,)))
        c = ctx.b.remainder(c, ctx.full(size, torch.int64, (bound,)))
        coords.append(ctx.b.reshape(c, (bound, 1)))
    return ctx.b.concatenate(coords, 1) if len(coords) > 1 else coords[0]


def mask_index(ctx, x, indices):
    """``x[mask]`` for ``index.Tensor`` with one boolean index (leading ``None``s allowed):
    the elements (or slices) where ``mask`` is true, along one padded dim."""
    used = [d for d, i in enumerate(indices) if i is not None]
    if len(used) != 1:
        raise Unsupported("a boolean mask combined with other indices")
    first = used[0]
    mask = indices[first]
    shape = x.type.shape
    covered = shape[first:first + len(mask.type.shape)]
    if covered != mask.type.shape:
        raise Unsupported(f"mask of shape {mask.type.shape} for dims {covered}")
    pre = int(np.prod(shape[:first]))
    post = int(np.prod(shape[first + len(covered):]))
    m = int(np.prod(covered))
    out_val = ctx.node.meta["val"]
    bound = ctx.out_shape()[first]
    positions, count = _compact(ctx, ctx.b.reshape(mask, (m,)), bound)
    _record_size(ctx, out_val.shape[first], count)
    rows = _take_rows(ctx, ctx.b.reshape(x, (pre, m, post)), positions)
    return ctx.b.reshape(rows, ctx.out_shape())


@lowers(aten.masked_select.default)
def _masked_select(ctx, x, mask):
    shape = tuple(torch.broadcast_shapes(x.type.shape, mask.type.shape))
    n = int(np.prod(shape))
    bound = ctx.out_shape()[0]
    flat_mask = ctx.b.reshape(ctx.broadcast(mask, shape), (n,))
    positions, count = _compact(ctx, flat_mask, bound)
    _record_size(ctx, ctx.node.meta["val"].shape[0], count)
    rows = _take_rows(ctx, ctx.b.reshape(ctx.broadcast(x, shape), (1, n, 1)), positions)
    return ctx.b.reshape(rows, (bound,))


@lowers(aten._unique2.default)
def _unique2(ctx, x, sorted=True, return_inverse=False, return_counts=False):
    # torch sorts the unique values whatever `sorted` says (on CPU), so we always do
    b = ctx.b
    n = int(np.prod(x.type.shape))
    bound = ctx.out_shape(0)[0]
    flat = b.reshape(x, (n,))
    if n == 0:
        empty = ctx.full(0, ctx.out_dtype(0), (bound,))
        count = ctx.scalar(0, torch.int64)
        _record_size(ctx, ctx.node.meta["val"][0].shape[0], count)
        return (empty, ctx.full(0, torch.int64, ctx.out_shape(1)),
                ctx.full(0, torch.int64, ctx.out_shape(2)))
    values, order = sort_with_positions(ctx, flat, 0, False)  # NaNs last, as in torch
    # a run starts at 0 and wherever the sorted value differs from the one before it
    changed = b.compare(b.slice(values, [1], [n]), b.slice(values, [0], [n - 1]), "NE")
    starts_flag = b.concatenate([ctx.full(True, torch.bool, (1,)), changed], 0)
    if ctx.dtype(x).is_floating_point:
        # x != x only for NaN: every NaN starts its own run, as torch counts them
        starts_flag = b.or_(starts_flag, b.compare(values, values, "NE"))
    starts, count = _compact(ctx, starts_flag, bound)
    _record_size(ctx, ctx.node.meta["val"][0].shape[0], count)
    unique = _take_rows(ctx, b.reshape(values, (1, n, 1)), starts)
    unique = b.reshape(unique, (bound,))
    inverse = ctx.full(0, torch.int64, ctx.out_shape(1))
    if return_inverse:
        # run number of each sorted element, put back in the input's order by sorting on
        # the original positions
        run = b.reduce_window(ctx.cast(starts_flag, torch.int64), ctx.scalar(0, torch.int64),
                              [n], "stablehlo.add", padding=[(n - 1, 0)])
        run = b.subtract(run, ctx.full(1, torch.int64, (n,)))
        _, inverse = b.sort([order, run], "LT", dimension=0)
        inverse = b.reshape(inverse, ctx.out_shape(1))
    counts = ctx.full(0, torch.int64, ctx.out_shape(2))
    if return_counts:
        # run j covers [starts[j], starts[j + 1]), the last run ends at n
        after = b.concatenate([b.slice(starts, [1], [bound]),
                               ctx.full(n, torch.int64, (1,))], 0) if bound else starts
        next_ = b.select(b.compare(b.add(b.iota((bound,), I64), ctx.full(1, torch.int64,
                                                                         (bound,))),
                                   ctx.broadcast(count, (bound,)), "LT"),
                         after, ctx.full(n, torch.int64, (bound,)))
        counts = b.subtract(next_, starts)
    return unique, inverse, counts


# Reductions that mask_padding keeps exact: op -> (the reduction kind whose identity fills
# the padding, where the reduced dims are among the args)
_MASKED = {
    aten.sum.dim_IntList: ("add", 1), aten.sum.default: ("add", None),
    aten.mean.dim: ("add", 1), aten.mean.default: ("add", None),
    aten.amax.default: ("maximum", 1), aten.max.default: ("maximum", None),
    aten.amin.default: ("minimum", 1), aten.min.default: ("minimum", None),
    aten.any.dim: ("or", 1), aten.any.dims: ("or", 1), aten.any.default: ("or", None),
    aten.all.dim: ("and", 1), aten.all.dims: ("and", 1), aten.all.default: ("and", None),
    aten._softmax.default: ("maximum", 1), aten._log_softmax.default: ("maximum", 1),
}
MASKABLE = frozenset(_MASKED)


def reduced_dims(node: torch.fx.Node, rank: int) -> list:
    """The dims of its first argument that a reduction in ``MASKABLE`` reduces over."""
    _, where = _MASKED[node.target]
    dims = None
    if where is not None:
        dims = node.args[where] if len(node.args) > where else node.kwargs.get("dim")
    if node.target in (aten._softmax.default, aten._log_softmax.default):
        return [normalize_dim(dims, rank)]
    return normalize_dims(dims, rank)


def _padded_dims(ctx, val, reduced) -> list:
    """``(dim, count)`` for each reduced dim of ``val`` that is a data-dependent size whose
    count this segment computed."""
    found = []
    for d in reduced:
        size = val.shape[d]
        if not isinstance(size, torch.SymInt):
            continue
        expr = sympy.sympify(size.node.expr)
        if ctx.runtime_sizes is None or expr not in ctx.runtime_sizes:
            if expr.free_symbols:
                raise Unsupported(f"it reduces over the data-dependent size {size}, whose "
                                  f"value another segment computes")
            continue
        found.append((d, ctx.runtime_sizes[expr]))
    return found


def mask_padding(ctx, args: tuple):
    """``args`` with the padding of a reduction's input filled with the reduction's
    identity, and a function to apply to its result (the mean's rescaling); ``(args,
    None)`` for any other node or an input without padding (Note [Bounded data-dependent
    sizes])."""
    node = ctx.node
    if node.target not in _MASKED or not ctx.runtime_sizes:
        return args, None
    val = node.args[0].meta["val"]
    x = args[0]
    padded = _padded_dims(ctx, val, reduced_dims(node, len(x.type.shape)))
    if not padded:
        return args, None
    kind, _ = _MASKED[node.target]
    dtype = ctx.dtype(x)
    if kind in ("or", "and"):
        fill = ctx.full(kind == "and", torch.bool, x.type.shape)
        x = ctx.cast(x, torch.bool)
    else:
        fill = ctx.full(identity(dtype, kind), dtype, x.type.shape)
    shape = x.type.shape
    for d, count in padded:
        valid = ctx.b.compare(ctx.b.iota(shape, I64, d), ctx.broadcast(count, shape), "LT")
        x = ctx.b.select(valid, x, fill)
    post = None
    if node.target in (aten.mean.dim, aten.mean.default):
        post = _rescale_mean(ctx, shape, padded)
    return (x, *args[1:]), post


def _rescale_mean(ctx, shape, padded):
    """The mean of zero-filled padding divides by the bound: times bound / count fixes it."""
    def rescale(result):
        dtype = ctx.dtype(result)
        for d, count in padded:
            bound = ctx.full(shape[d], dtype, result.type.shape)
            factor = ctx.b.divide(bound, ctx.broadcast(ctx.cast(count, dtype),
                                                       result.type.shape))
            result = ctx.b.multiply(result, factor)
        return result
    return rescale
