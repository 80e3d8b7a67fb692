"""Data movement: views and reshapes, permutes, slicing, concatenation, padding, copies and
dtype conversion, tensor factories (full, arange, empty), and symbolic-size queries.

Values are immutable and always laid out row-major, so every view op is a reshape,
transpose or slice of its input; strides in FakeTensors are ignored except by
``as_strided`` and ``as_strided_scatter``, which are defined over the storage.
"""
from __future__ import annotations

import numpy as np
import torch

from frameworks.torch.lowering.context import normalize_dim
from frameworks.torch.lowering.dtypes import element_type
from frameworks.torch.lowering.indexing import take, take_flat
from frameworks.torch.lowering.registry import Unsupported, lowers

aten = torch.ops.aten


@lowers(aten.view.default, aten._unsafe_view.default, aten.reshape.default,
        aten.unsqueeze.default, aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims,
        aten.expand.default, aten.alias.default, aten.clone.default, aten.lift_fresh_copy.default)
def _reshape_like(ctx, x, *args, **kwargs):
    # All of these keep the element order; only the result shape differs, and torch's
    # FakeTensor already knows it (an expand also needs broadcasting: see below).
    shape = ctx.out_shape()
    if ctx.node.target == aten.expand.default and x.type.shape != shape:
        return _expand(ctx, x, shape)
    return x if x.type.shape == shape else ctx.b.reshape(x, shape)


def _expand(ctx, x, shape):
    rank = len(x.type.shape)
    return ctx.b.broadcast_in_dim(x, shape, range(len(shape) - rank, len(shape)))


@lowers(aten._to_copy.default, aten.copy.default)
def _to_copy(ctx, x, src=None, *args, **kwargs):
    # _to_copy(x, dtype=...) converts; copy(self, src) is src broadcast into self's shape.
    value = x if ctx.node.target == aten._to_copy.default else src
    return ctx.operand(value, ctx.out_dtype(), ctx.out_shape())


@lowers(aten.permute.default)
def _permute(ctx, x, dims):
    rank = len(x.type.shape)
    return ctx.b.transpose(x, [normalize_dim(d, rank) for d in dims])


@lowers(aten.transpose.int)
def _transpose(ctx, x, dim0, dim1):
    rank = len(x.type.shape)
    if rank < 2:  # torch allows dims 0 / -1 on 0-d and 1-d tensors: nothing moves
        return x
    perm = list(range(rank))
    a, b = normalize_dim(dim0, rank), normalize_dim(dim1, rank)
    perm[a], perm[b] = perm[b], perm[a]
    return ctx.b.transpose(x, perm)


def _slice_bounds(size: int, start, end, step: int):
    """Python slice semantics for one dim (clamped), as (start, limit, step)."""
    start, end, _ = slice(start, end, step).indices(size)
    return start, max(start, end), step


def slice_dim(ctx, x, dim: int, start: int, limit: int, step: int = 1):
    shape = x.type.shape
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[dim], limits[dim], strides[dim] = start, limit, step
    return ctx.b.slice(x, starts, limits, strides)


@lowers(aten.slice.Tensor)
def _slice(ctx, x, dim=0, start=None, end=None, step=1):
    dim = normalize_dim(dim, len(x.type.shape))
    return slice_dim(ctx, x, dim, *_slice_bounds(x.type.shape[dim], start, end, step))


@lowers(aten.select.int)
def _select(ctx, x, dim, index):
    dim = normalize_dim(dim, len(x.type.shape))
    index = index % x.type.shape[dim]
    return ctx.b.reshape(slice_dim(ctx, x, dim, index, index + 1), ctx.out_shape())


@lowers(aten.split_with_sizes.default, aten.split.Tensor)
def _split(ctx, x, sizes, dim=0):
    dim = normalize_dim(dim, len(x.type.shape))
    if isinstance(sizes, int):  # split.Tensor: chunks of `sizes`, the last one shorter
        total = x.type.shape[dim]
        sizes = [min(sizes, total - s) for s in range(0, total, sizes)]
    parts, start = [], 0
    for size in sizes:
        parts.append(slice_dim(ctx, x, dim, start, start + size))
        start += size
    return tuple(parts)


@lowers(aten.cat.default)
def _cat(ctx, tensors, dim=0):
    shape = ctx.out_shape()
    dim = normalize_dim(dim, len(shape))
    # torch skips legacy empty 1-D inputs of shape (0,) whatever the other ranks are
    parts = [ctx.cast(t, ctx.out_dtype()) for t in tensors
             if t.type.shape != (0,) or len(shape) == 1]
    return parts[0] if len(parts) == 1 else ctx.b.concatenate(parts, dim)


@lowers(aten.flip.default)
def _flip(ctx, x, dims):
    rank = len(x.type.shape)
    return ctx.b.reverse(x, sorted({normalize_dim(d, rank) for d in dims}))


@lowers(aten.constant_pad_nd.default)
def _constant_pad(ctx, x, pad, value=0):
    rank = len(x.type.shape)
    low, high = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):  # pairs run from the last dim backwards
        low[rank - 1 - i], high[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    return ctx.b.pad(x, ctx.scalar(value, ctx.out_dtype()), low, high)  # negative pads crop


@lowers(aten.repeat.default)
def _repeat(ctx, x, repeats):
    shape = (1,) * (len(repeats) - len(x.type.shape)) + tuple(x.type.shape)
    # broadcast to [r0, s0, r1, s1, ...] then merge each pair
    spread = []
    for r, s in zip(repeats, shape):
        spread += [r, s]
    x = ctx.b.reshape(x, shape)
    x = ctx.b.broadcast_in_dim(x, spread, range(1, 2 * len(shape), 2))
    return ctx.b.reshape(x, ctx.out_shape())


@lowers(aten.slice_scatter.default)
def _slice_scatter(ctx, x, src, dim=0, start=None, end=None, step=1):
    dim = normalize_dim(dim, len(x.type.shape))
    size = x.type.shape[dim]
    start, _, step = _slice_bounds(size, start, end, step)
    # Place src at start, start + step, ... by interior padding, and a mask the same way.
    count = src.type.shape[dim]
    low = [0] * len(x.type.shape)
    high, interior = list(low), list(low)
    low[dim], interior[dim] = start, step - 1
    high[dim] = size - start - ((count - 1) * step + 1) if count else size - start
    dtype = ctx.out_dtype()
    placed = ctx.b.pad(ctx.cast(src, dtype), ctx.scalar(0, dtype), low, high, interior)
    mask = ctx.b.pad(ctx.full(True, torch.bool, src.type.shape), ctx.scalar(False, torch.bool),
                     low, high, interior)
    return ctx.b.select(mask, placed, ctx.cast(x, dtype))


def _storage_index(ctx, size, stride, storage_offset) -> np.ndarray:
    """The storage positions ``as_strided(size, stride, storage_offset)`` addresses, of a
    node whose first argument must be its whole storage in row-major order (values have no
    other storage here)."""
    source = ctx.node.args[0].meta["val"]
    whole = source.untyped_storage().nbytes() == source.numel() * source.element_size()
    if not (source.is_contiguous() and source.storage_offset() == 0 and whole):
        raise Unsupported(f"{ctx.node.target} of a view that is not its whole storage in "
                          "order (the strides address elements the value does not hold)")
    offset = storage_offset if storage_offset is not None else 0
    index = np.full(tuple(size), offset, dtype=np.int64)
    for d, (n, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[d] = n
        index = index + (np.arange(n, dtype=np.int64) * s).reshape(shape)
    return index


@lowers(aten.as_strided.default)
def _as_strided(ctx, x, size, stride, storage_offset=None):
    index = _storage_index(ctx, size, stride, storage_offset)
    flat = ctx.b.reshape(x, (int(np.prod(x.type.shape)),))
    return take_flat(ctx, flat, index)


@lowers(aten.as_strided_scatter.default)
def _as_strided_scatter(ctx, x, src, size, stride, storage_offset=None):
    # x with src written where as_strided(x, ...) looks. The positions are constants, so
    # this is a gather of src into x's layout and a select, not a scatter: each position
    # takes the element of src written there or keeps x's (where views overlap, torch
    # leaves which write wins undefined; so does this).
    index = _storage_index(ctx, size, stride, storage_offset).reshape(-1)
    count = int(np.prod(x.type.shape))
    dtype = ctx.out_dtype()
    src = ctx.b.reshape(ctx.cast(src, dtype), (index.size,))
    if np.array_equal(index, np.arange(count)):  # src covers x in order: it is the result
        return ctx.b.reshape(src, x.type.shape)
    writer = np.zeros(count, dtype=np.int64)
    writer[index] = np.arange(index.size)
    written = np.zeros(count, dtype=bool)
    written[index] = True
    placed = take_flat(ctx, src, writer)
    kept = ctx.b.reshape(ctx.cast(x, dtype), (count,))
    return ctx.b.reshape(ctx.b.select(ctx.b.constant(written), placed, kept), x.type.shape)


# -- factories -----------------------------------------------------------------------------

@lowers(aten.full.default, aten.full_like.default, aten.scalar_tensor.default,
        aten.empty.memory_format, aten.empty_strided.default, aten.zeros.default,
        aten.ones.default, aten.zeros_like.default, aten.ones_like.default,
        aten.empty_like.default, aten.fill.Scalar, aten.new_full.default,
        aten.new_zeros.default, aten.new_ones.default, aten.new_empty.default,
        aten.new_empty_strided.default)
def _full(ctx, *args, **kwargs):
    target = ctx.node.target
    if target in (aten.full.default, aten.full_like.default, aten.fill.Scalar):
        value = args[1]
    elif target == aten.new_full.default:  # new_full(self, size, fill_value)
        value = args[2]
    elif target == aten.scalar_tensor.default:
        value = args[0]
    elif target in (aten.ones.default, aten.ones_like.default, aten.new_ones.default):
        value = 1
    else:  # zeros, and empty: any contents will do, zeros are deterministic
        value = 0
    return ctx.full(value, ctx.out_dtype(), ctx.out_shape())


@lowers(aten.arange.start_step, aten.arange.default, aten.arange.start)
def _arange(ctx, *args, **kwargs):
    positional = [a for a in args if not isinstance(a, torch.dtype)]
    start, step = (positional[0], positional[2] if len(positional) > 2 else 1) \
        if len(positional) > 1 else (0, 1)
    dtype, shape = ctx.out_dtype(), ctx.out_shape()
    # torch computes start + i * step in double (in int64 for integers), then converts
    compute = torch.float64 if dtype.is_floating_point else torch.int64
    i = ctx.b.iota(shape, element_type(compute))
    value = ctx.b.add(ctx.b.multiply(i, ctx.full(step, compute, shape)),
                      ctx.full(start, compute, shape))
    return ctx.cast(value, dtype)


# -- no-ops and size queries ---------------------------------------------------------------

@lowers(aten._assert_tensor_metadata.default, aten._assert_scalar.default,
        aten.sym_constrain_range_for_size.default)
def _assert(ctx, *args, **kwargs):
    # Metadata assertions that tracing already checked: nothing to compute.
    return None


@lowers(aten.sym_size.int, aten.sym_stride.int, aten.sym_numel.default,
        aten.sym_storage_offset.default, aten.sym_is_contiguous.default)
def _size_query(ctx, *args, **kwargs):
    # Sizes are specialized per input signature (runner.py), so a query is its value.
    return ctx.concrete(ctx.node.meta["val"])


@lowers(aten.diagonal.default)
def _diagonal(ctx, x, offset=0, dim1=0, dim2=1):
    rank = len(x.type.shape)
    d1, d2 = normalize_dim(dim1, rank), normalize_dim(dim2, rank)
    rest = [d for d in range(rank) if d not in (d1, d2)]
    x = ctx.b.transpose(x, rest + [d1, d2])
    n1, n2 = x.type.shape[-2:]
    # element i of the diagonal is (i + row0, i + col0) of the trailing [n1, n2] block
    row0, col0 = max(-offset, 0), max(offset, 0)
    length = max(min(n1 - row0, n2 - col0), 0)
    flat = ctx.b.reshape(x, x.type.shape[:-2] + (n1 * n2,))
    index = (np.arange(length) + row0) * n2 + np.arange(length) + col0
    return take(ctx, flat, len(rest), index)


@lowers(aten.unfold.default)
def _unfold(ctx, x, dim, size, step):
    # windows [i * step, i * step + size) along dim become a new dim, the window last
    rank = len(x.type.shape)
    if rank == 0:
        return ctx.b.reshape(x, ctx.out_shape())
    dim = normalize_dim(dim, rank)
    count = (x.type.shape[dim] - size) // step + 1
    index = np.arange(count)[:, None] * step + np.arange(size)[None, :]
    windows = take(ctx, x, dim, index)  # [..., count, size, ...] with count at dim
    perm = [d for d in range(rank + 1) if d != dim + 1] + [dim + 1]
    return ctx.b.transpose(windows, perm)
