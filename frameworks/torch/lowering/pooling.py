"""Pooling and resampling: max_pool2d_with_indices (+ backward), avg_pool2d (+ backward),
adaptive average pooling (+ backward), nearest and (bi/tri)linear upsampling,
grid_sampler_2d/3d (bilinear, nearest, 2-D bicubic; zeros, border and reflection padding).

Windows are ``reduce_window`` over the trailing spatial dims. The padding on the high side
comes from the output size torch computed (so ceil_mode needs no separate formula).
"""
from __future__ import annotations

import itertools

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
        # the larger value wins, NaN wins, the first (smaller index) wins ties; the init
        # pair's index is above every real one, so a window of -inf (or the integer type's
        # minimum) names its first element, as eager PyTorch does, not the init pair
        a_nan = b.compare(av, av, "NE")
        pick_a = b.or_(b.or_(b.compare(av, bv, "GT"), a_nan),
                       b.and_(b.compare(av, bv, "EQ"), b.compare(ai, bi, "LT")))
        return [b.select(pick_a, av, bv), b.select(pick_a, ai, bi)]

    values, indices = b.reduce_window(
        [x, index], [ctx.scalar(-np.inf if dtype.is_floating_point else
                                torch.iinfo(dtype).min, dtype),
         ctx.scalar(torch.iinfo(torch.int64).max, torch.int64)],
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
@lowers(aten.grid_sampler_3d.default)
def _grid_sampler(ctx, x, grid, interpolation_mode, padding_mode, align_corners):
    """x [N, C, *spatial] sampled at grid [N, *out, r] (coordinates in [-1, 1], x first: the
    last spatial dim), for r = 2 or 3 spatial dims."""
    r = len(x.type.shape) - 2
    if interpolation_mode not in ((0, 1, 2) if r == 2 else (0, 1)) or \
            padding_mode not in (0, 1, 2):
        raise Unsupported(f"grid_sampler_{r}d interpolation_mode={interpolation_mode} "
                          f"padding_mode={padding_mode} (bilinear/nearest, and bicubic in 2-D, "
                          f"with zeros/border/reflection padding are lowered)")
    b = ctx.b
    dtype = ctx.out_dtype()
    n, c, *sizes = x.type.shape
    out = tuple(grid.type.shape[:-1])  # (N, *output spatial)
    grid = ctx.cast(grid, dtype)
    one, two = ctx.full(1, dtype, out), ctx.full(2, dtype, out)

    def padded(pos, size):
        """A pixel coordinate after the padding mode (zeros: as is, zero outside later)."""
        if padding_mode == 2:  # reflection: mirrored at the image edges, then clamped
            pos = _reflect(ctx, pos, size, align_corners)
        if padding_mode in (1, 2):  # border: clamp into the image
            pos = b.clamp(ctx.full(0, dtype, out), pos, ctx.full(size - 1, dtype, out))
        return pos

    coords = []  # per spatial dim of x, in x's order
    for d, size in enumerate(sizes):
        k = r - 1 - d  # grid's last axis lists the coordinates minor dim first
        g = b.reshape(b.slice(grid, [0] * (r + 1) + [k], list(out) + [k + 1]), out)
        full = ctx.full(size, dtype, out)
        if align_corners:  # -1 and 1 are the centers of the corner pixels
            pos = b.multiply(b.divide(b.add(g, one), two), b.subtract(full, one))
        else:  # -1 and 1 are the outer edges of the corner pixels
            pos = b.divide(b.subtract(b.multiply(b.add(g, one), full), one), two)
        coords.append(pos)
    if interpolation_mode == 2:  # bicubic: 4x4 taps, each padded on its own as torch does
        return _bicubic(ctx, x, coords, padded)
    coords = [padded(p, size) for p, size in zip(coords, sizes)]
    if interpolation_mode == 1:  # nearest, ties to even as torch's nearbyint
        return _sample(ctx, x, [b.round_nearest_even(p) for p in coords])
    taps = []
    for p in coords:  # (floor, weight), (floor + 1, weight) per dim
        low = b.floor(p)
        frac = b.subtract(p, low)
        taps.append([(low, b.subtract(one, frac)), (b.add(low, one), frac)])
    return _weighted_taps(ctx, x, taps)


def _bicubic(ctx, x, coords, padded):
    """Cubic convolution (A = -0.75, torch's) over the 4x4 pixels around each point."""
    b = ctx.b
    dtype, shape = ctx.dtype(coords[0]), coords[0].type.shape

    def const(v):
        return ctx.full(v, dtype, shape)
    a = -0.75

    def near(t):  # |t| <= 1: ((A + 2) t - (A + 3)) t^2 + 1
        return b.add(b.multiply(b.subtract(b.multiply(const(a + 2), t), const(a + 3)),
                                b.multiply(t, t)), const(1))

    def far(t):  # 1 < |t| < 2: ((A t - 5A) t + 8A) t - 4A
        inner = b.add(b.multiply(b.subtract(b.multiply(const(a), t), const(5 * a)), t),
                      const(8 * a))
        return b.subtract(b.multiply(inner, t), const(4 * a))

    taps = []
    for pos, size in zip(coords, x.type.shape[2:]):
        start = b.floor(pos)
        t = b.subtract(pos, start)
        weights = [far(b.add(t, const(1))), near(t), near(b.subtract(const(1), t)),
                   far(b.subtract(const(2), t))]
        taps.append([(padded(b.add(start, const(i - 1)), size), wt)
                     for i, wt in enumerate(weights)])
    return _weighted_taps(ctx, x, taps)


def _weighted_taps(ctx, x, taps):
    """The sum over every combination of one (coordinate, weight) tap per spatial dim of the
    sampled pixel times the product of the weights."""
    b = ctx.b
    shape = taps[0][0][0].type.shape
    full = tuple(x.type.shape[:2]) + tuple(shape[1:])
    spatial = list(range(2, len(full)))
    total = None
    for combo in itertools.product(*taps):
        weight = combo[0][1]
        for _, w in combo[1:]:
            weight = b.multiply(weight, w)
        weight = b.broadcast_in_dim(weight, full, [0] + spatial)
        term = b.multiply(_sample(ctx, x, [pos for pos, _ in combo]), weight)
        total = term if total is None else b.add(total, term)
    return total


def _reflect(ctx, pos, size: int, align_corners: bool):
    """``pos`` folded back into the image as a mirror would: about the corner pixels' centers
    (align_corners) or their outer edges, as torch's grid sampler reflects coordinates."""
    b = ctx.b
    dtype, shape = ctx.dtype(pos), pos.type.shape
    low, span = (0.0, size - 1.0) if align_corners else (-0.5, float(size))
    if span == 0:
        return ctx.full(0, dtype, shape)
    distance = b.abs(b.subtract(pos, ctx.full(low, dtype, shape)))
    spans = ctx.full(span, dtype, shape)
    extra = b.remainder(distance, spans)
    flips = b.floor(b.divide(distance, spans))
    even = b.compare(b.remainder(flips, ctx.full(2, dtype, shape)), ctx.full(0, dtype, shape),
                     "EQ")
    return b.add(b.select(even, extra, b.subtract(spans, extra)), ctx.full(low, dtype, shape))


def _sample(ctx, x, coords):
    """x[n, :, *coords] for float pixel coordinates [N, *out] per spatial dim of x (zero
    outside the image)."""
    b = ctx.b
    n, c, *sizes = x.type.shape
    shape = tuple(coords[0].type.shape)
    dtype = ctx.dtype(coords[0])
    r = len(sizes)
    inside = None
    for v, size in zip(coords, sizes):
        ok = b.and_(b.compare(v, ctx.full(0, dtype, shape), "GE"),
                    b.compare(v, ctx.full(size - 1, dtype, shape), "LE"))
        inside = ok if inside is None else b.and_(inside, ok)
    batch = b.iota(shape, I64, 0)
    index = [b.reshape(v, shape + (1,)) for v in
             [batch] + [ctx.cast(v, torch.int64) for v in coords]]
    point = (0,) + tuple(range(2, r + 2))  # the dims of x an index picks
    picked = b.gather(x, b.concatenate(index, r + 1), offset_dims=(r + 1,),
                      collapsed_slice_dims=point, start_index_map=point,
                      index_vector_dim=r + 1,
                      slice_sizes=(1, c) + (1,) * r)  # [N, *out, C]
    picked = b.transpose(picked, [0, r + 1] + list(range(1, r + 1)))
    mask = b.broadcast_in_dim(inside, (n, c) + shape[1:], [0] + list(range(2, r + 2)))
    return b.select(mask, picked, ctx.full(0, ctx.dtype(x), picked.type.shape))


