"""Pooling and resampling: max_pool2d_with_indices (+ backward), avg_pool2d (+ backward),
adaptive average pooling (+ backward), nearest and (bi/tri)linear upsampling, grid_sampler_2d.

Windows are ``reduce_window`` over the trailing spatial dims. The padding on the high side
comes from the output size torch computed (so ceil_mode needs no separate formula).
"""
from __future__ import annotations

import numpy as np
import torch

from stablehlo.ir.types import I64

from frameworks.torch.lowering.indexing import take
from frameworks.torch.lowering.linalg import _expand_param
from frameworks.torch.lowering.registry import Unsupported, lowers
from frameworks.torch.lowering.shape import slice_dim

aten = torch.ops.aten


def _window(in_shape, out_shape, kernel, stride, padding, dilation=1):
    """Window dims/strides/dilations/padding over all dims of an input of ``in_shape``
    (leading dims get windows of size 1)."""
    spatial = len(kernel)
    lead = len(in_shape) - spatial
    kernel = list(kernel)
    stride = _expand_param(stride, spatial) if stride else kernel
    pad = _expand_param(padding, spatial)
    dil = _expand_param(dilation, spatial)
    edges = []
    for axis in range(spatial):
        n, o = in_shape[lead + axis], out_shape[lead + axis]
        needed = (o - 1) * stride[axis] + dil[axis] * (kernel[axis] - 1) + 1
        edges.append((pad[axis], max(needed - n - pad[axis], 0)))
    return ([1] * lead + kernel, [1] * lead + stride, [1] * lead + dil,
            [(0, 0)] * lead + edges)


@lowers(aten.max_pool2d_with_indices.default, aten.max_pool3d_with_indices.default)
def _max_pool(ctx, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    b = ctx.b
    shape = x.type.shape
    spatial = len(_expand_param(kernel_size, 2 if "2d" in str(ctx.node.target) else 3))
    kernel = _expand_param(kernel_size, spatial)
    window, strides, dils, pads = _window(shape, ctx.out_shape(0), kernel, stride, padding,
                                          dilation)
    # the flat index of each element within its (H, W) plane rides along with the value
    plane = shape[-spatial:]
    flat = np.arange(int(np.prod(plane)), dtype=np.int64).reshape(plane)
    index = b.broadcast_in_dim(b.constant(flat), shape, range(len(shape) - spatial, len(shape)))
    dtype = ctx.dtype(x)

    def body(av, ai, bv, bi):
        # the larger value wins, NaN wins, the first (smaller index) wins ties
        a_nan = b.compare(av, av, "NE")
        pick_a = b.or_(b.or_(b.compare(av, bv, "GT"), a_nan),
                       b.and_(b.compare(av, bv, "EQ"), b.compare(ai, bi, "LT")))
        return [b.select(pick_a, av, bv), b.select(pick_a, ai, bi)]

    values, indices = b.reduce_window(
        [x, index], [ctx.scalar(-np.inf if dtype.is_floating_point else
                                torch.iinfo(dtype).min, dtype), ctx.scalar(-1, torch.int64)],
        window, body, window_strides=strides, window_dilations=dils, padding=pads)
    return values, indices


@lowers(aten.max_pool2d_with_indices_backward.default,
        aten.max_pool3d_with_indices_backward.default)
def _max_pool_backward(ctx, grad, x, kernel_size, stride, padding, dilation, ceil_mode,
                       indices):
    # scatter-add each output gradient to the input element its index names
    b = ctx.b
    shape = x.type.shape
    spatial = len(kernel_size) if len(kernel_size) > 1 else (
        2 if "2d" in str(ctx.node.target) else 3)
    lead = int(np.prod(shape[:-spatial]))
    plane = int(np.prod(shape[-spatial:]))
    out = int(np.prod(grad.type.shape[-spatial:]))
    dtype = ctx.out_dtype()
    g = b.reshape(ctx.cast(grad, dtype), (lead, out))
    idx = b.reshape(ctx.cast(indices, torch.int64), (lead, out, 1))
    rows = b.iota((lead, out, 1), I64, 0)
    coords = b.concatenate([rows, idx], 2)
    zeros = ctx.full(0, dtype, (lead, plane))
    result = b.scatter(zeros, coords, g, update_window_dims=(), inserted_window_dims=(0, 1),
                       scatter_dims_to_operand_dims=(0, 1), index_vector_dim=2,
                       body="stablehlo.add")
    return b.reshape(result, shape)


def _avg_divisor(ctx, x, out_shape, kernel, stride, padding, count_include_pad):
    """How many elements each window averages, as a tensor of the output's spatial shape."""
    spatial = len(kernel)
    lead = len(x.type.shape) - spatial
    ones_shape = tuple(x.type.shape[lead:])
    dtype = ctx.out_dtype()
    ones = ctx.full(1, dtype, ones_shape)
    pad = _expand_param(padding, spatial)
    if count_include_pad:  # padding counts, the ceil_mode overhang beyond it does not
        ones = ctx.b.pad(ones, ctx.scalar(1, dtype), pad, pad)
        padding = 0
    window, strides, _, pads = _window(ones.type.shape, out_shape[lead:], kernel, stride,
                                       padding)
    return ctx.b.reduce_window(ones, ctx.scalar(0, dtype), window, "stablehlo.add",
                               window_strides=strides, padding=pads)


@lowers(aten.avg_pool2d.default, aten.avg_pool3d.default, aten.avg_pool1d.default)
def _avg_pool(ctx, x, kernel_size, stride=(), padding=0, ceil_mode=False,
              count_include_pad=True, divisor_override=None):
    spatial = {"1d": 1, "2d": 2, "3d": 3}[str(ctx.node.target).split("avg_pool")[1][:2]]
    kernel = _expand_param(kernel_size, spatial)
    dtype, out_shape = ctx.out_dtype(), ctx.out_shape()
    window, strides, _, pads = _window(x.type.shape, out_shape, kernel, stride, padding)
    total = ctx.b.reduce_window(ctx.cast(x, dtype), ctx.scalar(0, dtype), window,
                                "stablehlo.add", window_strides=strides, padding=pads)
    if divisor_override:
        return ctx.b.divide(total, ctx.full(divisor_override, dtype, out_shape))
    divisor = _avg_divisor(ctx, x, out_shape, kernel, stride or kernel, padding,
                           count_include_pad)
    return ctx.b.divide(total, ctx.broadcast(divisor, out_shape))


@lowers(aten.avg_pool2d_backward.default, aten.avg_pool3d_backward.default)
def _avg_pool_backward(ctx, grad, x, kernel_size, stride, padding, ceil_mode,
                       count_include_pad, divisor_override):
    b = ctx.b
    spatial = len(_expand_param(kernel_size, 2 if "2d" in str(ctx.node.target) else 3))
    kernel = _expand_param(kernel_size, spatial)
    stride = _expand_param(stride, spatial) if stride else kernel
    pad = _expand_param(padding, spatial)
    dtype, shape = ctx.out_dtype(), x.type.shape
    g = ctx.cast(grad, dtype)
    if divisor_override:
        g = b.divide(g, ctx.full(divisor_override, dtype, g.type.shape))
    else:
        divisor = _avg_divisor(ctx, x, g.type.shape, kernel, stride, padding,
                               count_include_pad)
        g = b.divide(g, ctx.broadcast(divisor, g.type.shape))
    # input element i receives every window covering it: spread the gradient with
    # stride - 1 holes and sum a kernel-sized window over it (a transposed pooling)
    lead = len(shape) - spatial
    low, high, interior = [0] * lead, [0] * lead, [0] * lead
    for axis in range(spatial):
        n, o = shape[lead + axis], g.type.shape[lead + axis]
        lo = kernel[axis] - 1 - pad[axis]
        spread = (o - 1) * stride[axis] + 1
        low.append(lo)
        high.append(n + kernel[axis] - 1 - lo - spread)
        interior.append(stride[axis] - 1)
    spread = b.pad(g, ctx.scalar(0, dtype), low, high, interior)
    window = [1] * lead + kernel
    return b.reduce_window(spread, ctx.scalar(0, dtype), window, "stablehlo.add")


def _adaptive_mean(ctx, x, axis: int, out: int):
    """Mean over torch's adaptive windows [floor(i*n/out), ceil((i+1)*n/out)) of one dim."""
    n = x.type.shape[axis]
    if n % out == 0:  # equal windows: one reshape and a mean
        k = n // out
        shape = list(x.type.shape)
        split = shape[:axis] + [out, k] + shape[axis + 1:]
        total = ctx.b.reduce(ctx.b.reshape(x, split), ctx.scalar(0, ctx.dtype(x)), [axis + 1],
                             "stablehlo.add")
        return ctx.b.divide(total, ctx.full(k, ctx.dtype(x), total.type.shape))
    parts = []
    for i in range(out):
        start, end = (i * n) // out, -((-(i + 1) * n) // out)
        window = slice_dim(ctx, x, axis, start, end)
        total = ctx.b.reduce(window, ctx.scalar(0, ctx.dtype(x)), [axis], "stablehlo.add")
        mean = ctx.b.divide(total, ctx.full(end - start, ctx.dtype(x), total.type.shape))
        keep = list(x.type.shape)
        keep[axis] = 1
        parts.append(ctx.b.reshape(mean, keep))
    return ctx.b.concatenate(parts, axis)


@lowers(aten._adaptive_avg_pool2d.default, aten._adaptive_avg_pool3d.default,
        aten.adaptive_avg_pool1d.default)
def _adaptive_avg_pool(ctx, x, output_size):
    # averaging is separable: one dim at a time gives the same windows as torch's
    x = ctx.cast(x, ctx.out_dtype())
    spatial = len(output_size)
    rank = len(x.type.shape)
    for i, out in enumerate(output_size):
        x = _adaptive_mean(ctx, x, rank - spatial + i, out)
    return x


# -- upsampling ------------------------------------------------------------------------------

def _scales(ctx, x, scales, spatial):
    """torch's source/destination ratio per spatial dim: 1 / scale where a scale is given
    (``.vec`` passes a list, ``.default`` one optional scale per dim), else in / out."""
    shape, out = x.type.shape, ctx.out_shape()
    lead = len(shape) - spatial
    scales = list(scales) if scales else [None] * spatial
    if len(scales) == 1 and isinstance(scales[0], (list, tuple)):
        scales = list(scales[0])
    return [1.0 / s if s else shape[lead + i] / out[lead + i]
            for i, s in enumerate(scales + [None] * (spatial - len(scales)))]


@lowers(aten.upsample_nearest2d.vec, aten.upsample_nearest1d.vec,
        aten.upsample_nearest3d.vec, aten.upsample_nearest2d.default)
def _upsample_nearest(ctx, x, output_size, *scales):
    rank, out = len(x.type.shape), ctx.out_shape()
    spatial = rank - 2
    for i, scale in enumerate(_scales(ctx, x, [s for s in scales if s is not None], spatial)):
        axis = 2 + i
        n = x.type.shape[axis]
        src = np.minimum(np.floor(np.arange(out[axis]) * np.float32(scale)).astype(np.int64),
                         n - 1)
        x = take(ctx, x, axis, src)
    return x


@lowers(aten.upsample_bilinear2d.vec, aten.upsample_linear1d.vec,
        aten.upsample_bilinear2d.default, aten.upsample_trilinear3d.vec,
        aten.upsample_trilinear3d.default)
def _upsample_linear(ctx, x, output_size, align_corners, *scales):
    b = ctx.b
    dtype = ctx.out_dtype()
    x = ctx.cast(x, dtype)
    rank, out = len(x.type.shape), ctx.out_shape()
    spatial = rank - 2
    ratios = _scales(ctx, x, [s for s in scales if s is not None], spatial)
    for i, scale in enumerate(ratios):
        axis = 2 + i
        n, o = x.type.shape[axis], out[axis]
        dst = np.arange(o, dtype=np.float64)
        if align_corners:
            src = dst * ((n - 1) / (o - 1) if o > 1 else 0.0)
        else:
            src = np.maximum((dst + 0.5) * scale - 0.5, 0.0)
        lo = np.minimum(np.floor(src).astype(np.int64), n - 1)
        hi = np.minimum(lo + 1, n - 1)
        frac = (src - lo).astype(np.float32)
        shape = list(x.type.shape)
        shape[axis] = o
        w = b.broadcast_in_dim(ctx.cast(b.constant(frac), dtype), shape, [axis])
        a, c = take(ctx, x, axis, lo), take(ctx, x, axis, hi)
        x = b.add(a, b.multiply(b.subtract(c, a), w))
    return x


def _adaptive_matrix(n: int, out: int) -> np.ndarray:
    """[out, n]: row o averages torch's adaptive window o of a length-n dim."""
    matrix = np.zeros((out, n), dtype=np.float64)
    for o in range(out):
        start, end = (o * n) // out, -((-(o + 1) * n) // out)
        matrix[o, start:end] = 1.0 / (end - start)
    return matrix


@lowers(aten._adaptive_avg_pool2d_backward.default)
def _adaptive_avg_pool_backward(ctx, grad, x):
    # each spatial dim of the forward is a linear map A [out, n]; the gradient applies A^T
    b = ctx.b
    dtype = ctx.out_dtype()
    g = ctx.cast(grad, dtype)
    rank = len(x.type.shape)
    for axis in (rank - 2, rank - 1):
        matrix = _adaptive_matrix(x.type.shape[axis], g.type.shape[axis])
        m = ctx.cast(b.constant(matrix.astype(np.float32)), dtype)
        g = b.dot_general(g, m, contracting=((axis,), (0,)))  # the new dim comes last
        perm = list(range(axis)) + [rank - 1] + list(range(axis, rank - 1))
        g = b.transpose(g, perm)
    return g


@lowers(aten.grid_sampler_2d.default)
def _grid_sampler_2d(ctx, x, grid, interpolation_mode, padding_mode, align_corners):
    if interpolation_mode not in (0, 1) or padding_mode not in (0, 1):
        raise Unsupported(f"grid_sampler_2d interpolation_mode={interpolation_mode} "
                          f"padding_mode={padding_mode} (bilinear/nearest with zeros/border "
                          f"padding are lowered)")
    b = ctx.b
    dtype = ctx.out_dtype()
    n, c, h, w = x.type.shape
    _, ho, wo, _ = grid.type.shape
    grid = ctx.cast(grid, dtype)
    coords = []
    for k, size in ((0, w), (1, h)):  # grid[..., 0] is x (width), grid[..., 1] is y
        g = b.reshape(b.slice(grid, [0, 0, 0, k], [n, ho, wo, k + 1]), (n, ho, wo))
        one, full = ctx.full(1, dtype, (n, ho, wo)), ctx.full(size, dtype, (n, ho, wo))
        if align_corners:  # -1 and 1 are the centers of the corner pixels
            pos = b.multiply(b.divide(b.add(g, one), ctx.full(2, dtype, (n, ho, wo))),
                             b.subtract(full, one))
        else:  # -1 and 1 are the outer edges of the corner pixels
            pos = b.divide(b.subtract(b.multiply(b.add(g, one), full), one),
                           ctx.full(2, dtype, (n, ho, wo)))
        if padding_mode == 1:  # border: clamp into the image
            pos = b.clamp(ctx.full(0, dtype, (n, ho, wo)), pos, b.subtract(full, one))
        coords.append(pos)
    px, py = coords
    if interpolation_mode == 1:  # nearest, ties to even as torch's nearbyint
        return _sample(ctx, x, b.round_nearest_even(py), b.round_nearest_even(px))
    x0, y0 = b.floor(px), b.floor(py)
    one = ctx.full(1, dtype, (n, ho, wo))
    x1, y1 = b.add(x0, one), b.add(y0, one)
    wx1, wy1 = b.subtract(px, x0), b.subtract(py, y0)
    wx0, wy0 = b.subtract(one, wx1), b.subtract(one, wy1)
    total = None
    for yy, wy in ((y0, wy0), (y1, wy1)):
        for xx, wx in ((x0, wx0), (x1, wx1)):
            weight = b.broadcast_in_dim(b.multiply(wy, wx), (n, c, ho, wo), [0, 2, 3])
            term = b.multiply(_sample(ctx, x, yy, xx), weight)
            total = term if total is None else b.add(total, term)
    return total


def _sample(ctx, x, y, xcoord):
    """x[n, :, y, x] for float pixel coordinates [N, Ho, Wo] (zero outside the image)."""
    b = ctx.b
    n, c, h, w = x.type.shape
    shape = y.type.shape
    dtype = ctx.dtype(y)
    inside = None
    for v, size in ((y, h), (xcoord, w)):
        ok = b.and_(b.compare(v, ctx.full(0, dtype, shape), "GE"),
                    b.compare(v, ctx.full(size - 1, dtype, shape), "LE"))
        inside = ok if inside is None else b.and_(inside, ok)
    batch = b.iota(shape, I64, 0)
    index = [b.reshape(v, shape + (1,)) for v in
             (batch, ctx.cast(y, torch.int64), ctx.cast(xcoord, torch.int64))]
    picked = b.gather(x, b.concatenate(index, 3), offset_dims=(3,),
                      collapsed_slice_dims=(0, 2, 3), start_index_map=(0, 2, 3),
                      index_vector_dim=3, slice_sizes=(1, c, 1, 1))  # [N, Ho, Wo, C]
    picked = b.transpose(picked, [0, 3, 1, 2])
    mask = b.broadcast_in_dim(inside, (n, c) + tuple(shape[1:]), [0, 2, 3])
    return b.select(mask, picked, ctx.full(0, ctx.dtype(x), picked.type.shape))
