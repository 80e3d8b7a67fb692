"""Gathers and scatters: embedding, _embedding_bag, index_select, index.Tensor, gather,
scatter(_add, _reduce), index_put, masked_scatter, and the helpers other families use to
pick elements by index.

torch's indexing ops address one dim (or a few) with an index tensor; StableHLO's gather and
scatter take full coordinates. ``_coordinates`` builds them: the index along the addressed
dim and iotas along every other, so one gather/scatter form serves all of these ops.
"""
from __future__ import annotations

import numpy as np
import torch

from stablehlo.ir.types import I64

from frameworks.torch.lowering.context import normalize_dim
from frameworks.torch.lowering import data_dependent  # a module: the two import each other
from frameworks.torch.lowering.reductions import identity as reduction_identity, p_norm
from frameworks.torch.lowering.registry import Unsupported, lowers

aten = torch.ops.aten


def _i64(ctx, x):
    return ctx.cast(x, torch.int64)


def _wrap_negative(ctx, index, size: int):
    """torch counts negative indices from the end."""
    shape = index.type.shape
    negative = ctx.b.compare(index, ctx.full(0, torch.int64, shape), "LT")
    return ctx.b.select(negative, ctx.b.add(index, ctx.full(size, torch.int64, shape)), index)


def take_flat(ctx, flat, index: np.ndarray):
    """``flat[index]`` for a 1-D value and a constant index array."""
    indices = ctx.b.constant(index.reshape(index.shape + (1,)).astype(np.int64))
    return ctx.b.gather(flat, indices, offset_dims=(), collapsed_slice_dims=(0,),
                        start_index_map=(0,), index_vector_dim=index.ndim, slice_sizes=(1,))


def take(ctx, x, dim: int, index):
    """Whole slices of ``x`` along ``dim`` picked by ``index`` (any shape; a Value or a
    constant array): the result has ``index``'s dims in place of ``dim``."""
    if isinstance(index, np.ndarray):
        index = ctx.b.constant(index.astype(np.int64))
    index = _i64(ctx, index)
    ishape = index.type.shape
    shape = x.type.shape
    offset_dims = [d for d in range(len(shape)) if d != dim]
    result_offset = [d if d < dim else d + len(ishape) - 1 for d in offset_dims]
    sizes = [1 if d == dim else n for d, n in enumerate(shape)]
    return ctx.b.gather(x, ctx.b.reshape(index, ishape + (1,)), offset_dims=result_offset,
                        collapsed_slice_dims=(dim,), start_index_map=(dim,),
                        index_vector_dim=len(ishape), slice_sizes=sizes)


def _coordinates(ctx, index, dim: int):
    """Full coordinates ``[*index.shape, rank]``: ``index`` along ``dim``, iotas elsewhere."""
    shape = index.type.shape
    parts = []
    for d in range(len(shape)):
        coord = index if d == dim else ctx.b.iota(shape, index.type.element_type, d)
        parts.append(ctx.b.reshape(coord, shape + (1,)))
    return ctx.b.concatenate(parts, len(shape))


@lowers(aten.embedding.default)
def _embedding(ctx, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return take(ctx, weight, 0, indices)


@lowers(aten.embedding_renorm.default)
def _embedding_renorm(ctx, weight, indices, max_norm, norm_type):
    """The rows ``indices`` name whose ``norm_type``-norm passes ``max_norm``, scaled down to
    it (by max_norm / (norm + 1e-7), as torch does); other rows unchanged."""
    b = ctx.b
    dtype = ctx.out_dtype()
    rows = weight.type.shape[0]
    norms = p_norm(ctx, weight, norm_type, [1], dtype, (rows,))
    flat = b.reshape(_i64(ctx, indices), (int(np.prod(indices.type.shape)),))
    named = scatter_along(ctx, ctx.full(0, dtype, (rows,)), 0, flat,
                          ctx.full(1, dtype, flat.type.shape), "stablehlo.add")
    limit = ctx.full(max_norm, dtype, (rows,))
    shrink = b.and_(b.compare(named, ctx.full(0, dtype, (rows,)), "GT"),
                    b.compare(norms, limit, "GT"))
    scale = b.select(shrink, b.divide(limit, b.add(norms, ctx.full(1e-7, dtype, (rows,)))),
                     ctx.full(1, dtype, (rows,)))
    return b.multiply(ctx.cast(weight, dtype), b.broadcast_in_dim(scale, weight.type.shape, [0]))


@lowers(aten.index_select.default)
def _index_select(ctx, x, dim, index):
    if x.type.shape == ():  # a 0-d tensor has one element: index 0 picks it
        return ctx.b.reshape(x, ctx.out_shape())
    dim = normalize_dim(dim, len(x.type.shape))
    if index.type.shape == ():  # a 0-d index still keeps the dim, with size 1
        index = ctx.b.reshape(index, (1,))
    return take(ctx, x, dim, index)


@lowers(aten.gather.default)
def _gather(ctx, x, dim, index, sparse_grad=False):
    rank = len(x.type.shape)
    if rank == 0:  # one element, index 0 (once or in a 1-element index)
        return ctx.b.reshape(x, ctx.out_shape())
    if 0 in ctx.out_shape():  # an empty index may have any rank: nothing to gather
        return ctx.full(0, ctx.out_dtype(), ctx.out_shape())
    dim = normalize_dim(dim, rank)
    index = _i64(ctx, index)
    if index.type.shape == ():  # torch lets a 0-d index address a dim of a 1-element tensor
        index = ctx.b.reshape(index, (1,) * rank)
    coords = _coordinates(ctx, index, dim)
    result = ctx.b.gather(x, coords, offset_dims=(), collapsed_slice_dims=tuple(range(rank)),
                          start_index_map=tuple(range(rank)), index_vector_dim=rank,
                          slice_sizes=(1,) * rank)
    return ctx.b.reshape(result, ctx.out_shape())


def _index_coordinates(ctx, x, indices):
    """For ``x[indices]`` (advanced indexing): the broadcast index tensors stacked as
    coordinates, the indexed dims, and where the index dims go in the result."""
    shape = x.type.shape
    indexed = [d for d, i in enumerate(indices) if i is not None]
    tensors = []
    for d in indexed:
        i = indices[d]
        if ctx.dtype(i) == torch.bool:
            raise Unsupported("boolean mask indexing (its result size depends on the data)")
        tensors.append(_wrap_negative(ctx, _i64(ctx, i), shape[d]))
    bshape = tuple(torch.broadcast_shapes(*[t.type.shape for t in tensors]))
    coords = ctx.b.concatenate(
        [ctx.b.reshape(ctx.broadcast(t, bshape), bshape + (1,)) for t in tensors], len(bshape))
    consecutive = indexed == list(range(indexed[0], indexed[-1] + 1))
    first = indexed[0] if consecutive else 0  # separated index dims go first, as in numpy
    return coords, indexed, bshape, first


@lowers(aten.index.Tensor)
def _index(ctx, x, indices):
    if any(i is not None and ctx.dtype(i) == torch.bool for i in indices):
        return data_dependent.mask_index(ctx, x, indices)  # a data-dependent size, bounded
    coords, indexed, bshape, first = _index_coordinates(ctx, x, indices)
    shape = x.type.shape
    rest = [d for d in range(len(shape)) if d not in indexed]
    # result dims: the kept dims before `first`, the index dims, then the other kept dims
    offset_dims = [i if i < first else i + len(bshape) for i in range(len(rest))]
    return ctx.b.gather(x, coords, offset_dims=offset_dims, collapsed_slice_dims=indexed,
                        start_index_map=indexed, index_vector_dim=len(bshape),
                        slice_sizes=[1 if d in indexed else n for d, n in enumerate(shape)])


@lowers(aten.index_put.default)
def _index_put(ctx, x, indices, values, accumulate=False):
    coords, indexed, bshape, first = _index_coordinates(ctx, x, list(indices) +
                                                        [None] * (len(x.type.shape) - len(indices)))
    shape = x.type.shape
    rest = [d for d in range(len(shape)) if d not in indexed]
    kept = [shape[d] for d in rest]
    ushape = tuple(kept[:first]) + bshape + tuple(kept[first:])
    updates = ctx.operand(values, ctx.out_dtype(), ushape)
    window = [i if i < first else i + len(bshape) for i in range(len(rest))]
    body = "stablehlo.add" if accumulate else (lambda old, new: new)
    return ctx.b.scatter(x, coords, updates, update_window_dims=window,
                         inserted_window_dims=indexed, scatter_dims_to_operand_dims=indexed,
                         index_vector_dim=len(bshape), body=body)


_SCATTER_BODIES = {"sum": "stablehlo.add", "add": "stablehlo.add",
                   "prod": "stablehlo.multiply", "multiply": "stablehlo.multiply",
                   "amax": "stablehlo.maximum", "amin": "stablehlo.minimum"}


def scatter_along(ctx, x, dim: int, index, src, body):
    """``x`` with ``src[i]`` combined into ``x[..., index[i], ...]`` (``dim`` addressed)."""
    rank = len(x.type.shape)
    if rank == 0:  # one element, index 0: combine directly
        src = ctx.b.reshape(src, ())
        return body(x, src) if callable(body) else ctx.b._build(body, [x, src])
    index = _i64(ctx, index)
    ishape = index.type.shape
    if src.type.shape != ishape:  # torch uses the leading index.shape block of src
        src = ctx.b.slice(src, [0] * rank, list(ishape))
    coords = _coordinates(ctx, index, dim)
    return ctx.b.scatter(x, coords, src, update_window_dims=(),
                         inserted_window_dims=tuple(range(rank)),
                         scatter_dims_to_operand_dims=tuple(range(rank)),
                         index_vector_dim=rank, body=body)


@lowers(aten.scatter.src, aten.scatter.value, aten.scatter_add.default,
        aten.scatter_reduce.two, aten.scatter.reduce, aten.scatter.value_reduce)
def _scatter(ctx, x, dim, index, src, reduce=None, include_self=True):
    dtype = ctx.out_dtype()
    x = ctx.cast(x, dtype)
    dim = normalize_dim(dim, len(x.type.shape))
    src = ctx.operand(src, dtype, index.type.shape) if not hasattr(src, "type") \
        else ctx.cast(src, dtype)
    if ctx.node.target == aten.scatter_add.default:
        reduce = "sum"
    if reduce is None:  # overwrite: which of several updates to one place wins is undefined
        return scatter_along(ctx, x, dim, index, src, lambda old, new: new)
    if reduce == "mean":
        return _scatter_mean(ctx, x, dim, index, src, include_self)
    if reduce not in _SCATTER_BODIES:
        raise Unsupported(f"scatter reduce={reduce!r}")
    body = _SCATTER_BODIES[reduce]
    if include_self:
        return scatter_along(ctx, x, dim, index, src, body)
    # without self: combine into the reduction's identity, keep x where nothing landed
    kind = body.split(".")[1]
    identity = reduction_identity(dtype, kind)
    combined = scatter_along(ctx, ctx.full(identity, dtype, x.type.shape), dim, index, src,
                             body)
    return ctx.b.select(_touched(ctx, x, dim, index), combined, x)


def _touched(ctx, x, dim: int, index):
    """Where at least one scattered element lands."""
    shape = x.type.shape
    marks = ctx.full(True, torch.bool, index.type.shape)
    return scatter_along(ctx, ctx.full(False, torch.bool, shape), dim, index, marks,
                         "stablehlo.or")


def _scatter_mean(ctx, x, dim, index, src, include_self):
    dtype = ctx.out_dtype()
    if not dtype.is_floating_point:
        raise Unsupported("scatter reduce='mean' on integers (torch floor-divides)")
    shape = x.type.shape
    base_total = x if include_self else ctx.full(0, dtype, shape)
    base_count = ctx.full(1 if include_self else 0, dtype, shape)
    total = scatter_along(ctx, base_total, dim, index, src, "stablehlo.add")
    count = scatter_along(ctx, base_count, dim, index, ctx.full(1, dtype, index.type.shape),
                          "stablehlo.add")
    mean = ctx.b.divide(total, ctx.b.maximum(count, ctx.full(1, dtype, shape)))
    return ctx.b.select(ctx.b.compare(count, ctx.full(0, dtype, shape), "GT"), mean, x)


@lowers(aten.masked_scatter.default)
def _masked_scatter(ctx, x, mask, source):
    # The k-th True position (row-major) takes source's k-th element: k is the running
    # count of Trues before it, an exclusive cumulative sum of the mask.
    b = ctx.b
    shape = ctx.out_shape()
    n = int(np.prod(shape))
    mask = ctx.operand(mask, torch.bool, shape)
    counts = b.reshape(ctx.cast(mask, torch.int64), (n,))
    inclusive = b.reduce_window(counts, ctx.scalar(0, torch.int64), [n], "stablehlo.add",
                                padding=[(n - 1, 0)])
    position = b.maximum(b.subtract(inclusive, ctx.full(1, torch.int64, (n,))),
                         ctx.full(0, torch.int64, (n,)))
    flat_source = b.reshape(ctx.cast(source, ctx.out_dtype()),
                            (int(np.prod(source.type.shape)),))
    picked = b.reshape(take(ctx, flat_source, 0, position), shape)
    return b.select(mask, picked, ctx.operand(x, ctx.out_dtype(), shape))


@lowers(aten._embedding_bag.default)
def _embedding_bag(ctx, weight, indices, offsets, scale_grad_by_freq=False, mode=0,
                   sparse=False, per_sample_weights=None, include_last_offset=False,
                   padding_idx=-1):
    """Bags of embedding rows reduced by sum (mode 0), mean (1) or max (2), plus torch's
    auxiliary results: offset2bag, bag_size and max_indices (see Note [embedding_bag aux])."""
    b = ctx.b
    dtype = ctx.out_dtype(0)
    bags = ctx.out_shape(0)[0]
    dim = weight.type.shape[1]
    indices = _i64(ctx, indices)
    n = indices.type.shape[0]
    # bag of position i: how many of the first `bags` offsets are <= i, minus one
    starts = b.broadcast_in_dim(b.slice(_i64(ctx, offsets), [0], [bags]), (n, bags), [1])
    at_or_after = b.compare(b.iota((n, bags), I64, 0), starts, "GE")
    bag = b.subtract(b.reduce(ctx.cast(at_or_after, torch.int64), ctx.scalar(0, torch.int64),
                              [1], "stablehlo.add"), ctx.full(1, torch.int64, (n,)))
    valid = ctx.full(True, torch.bool, (n,)) if padding_idx is None or padding_idx < 0 else \
        b.compare(indices, ctx.full(padding_idx, torch.int64, (n,)), "NE")
    rows = ctx.cast(take(ctx, weight, 0, indices), dtype)
    if per_sample_weights is not None:
        rows = b.multiply(rows, b.broadcast_in_dim(ctx.cast(per_sample_weights, dtype),
                                                   (n, dim), [0]))
    valid_rows = b.broadcast_in_dim(valid, (n, dim), [0])
    where = b.reshape(bag, (n, 1))

    def into_bags(values, init, body):
        shape = (bags,) + values.type.shape[1:]
        return b.scatter(ctx.full(init, ctx.dtype(values), shape), where, values,
                         update_window_dims=tuple(range(1, len(shape))),
                         inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,),
                         index_vector_dim=1, body=body)

    count = into_bags(ctx.cast(valid, torch.int64), 0, "stablehlo.add")
    empty = b.broadcast_in_dim(b.compare(count, ctx.full(0, torch.int64, (bags,)), "EQ"),
                               (bags, dim), [0])
    zeros = ctx.full(0, dtype, (bags, dim))
    if mode == 2:
        neg_inf = ctx.full(-np.inf, dtype, (n, dim))
        out = into_bags(b.select(valid_rows, rows, neg_inf), -np.inf, "stablehlo.maximum")
        out = b.select(empty, zeros, out)
        # the first row index reaching the max, per bag and feature
        is_max = b.and_(valid_rows, b.compare(rows, take(ctx, out, 0, bag), "EQ"))
        big = torch.iinfo(torch.int64).max
        row_index = b.broadcast_in_dim(indices, (n, dim), [0])
        candidates = b.select(is_max, row_index, ctx.full(big, torch.int64, (n, dim)))
        max_indices = b.select(empty, ctx.full(0, torch.int64, (bags, dim)),
                               into_bags(candidates, big, "stablehlo.minimum"))
    else:
        out = into_bags(b.select(valid_rows, rows, ctx.full(0, dtype, (n, dim))), 0,
                        "stablehlo.add")
        if mode == 1:
            divisor = b.maximum(ctx.cast(count, dtype), ctx.full(1, dtype, (bags,)))
            out = b.divide(out, b.broadcast_in_dim(divisor, (bags, dim), [0]))
        max_indices = count if mode == 1 else ctx.full(0, torch.int64, (bags,))
    # Note [embedding_bag aux]: torch's CPU kernel skips offset2bag for a plain sum (an empty
    # result, as its meta kernel says) and reports bag_size 0 then; mean reports bag_size
    # again as max_indices. Results follow eager exactly so its backward can use them.
    offset2bag = bag if ctx.out_shape(1) == (n,) else ctx.full(0, torch.int64, (0,))
    bag_size = ctx.full(0, torch.int64, (bags,)) if mode == 0 else count
    return out, offset2bag, bag_size, max_indices
