"""Matrix products, convolutions and distances: mm, bmm, addmm/addmv/addbmm, convolution
(regular and transposed), convolution_backward, cdist and pdist.

Convolutions use StableHLO's NCHW-style dimension numbers for 1, 2 or 3 spatial dims. The
backward follows the usual identities: the input gradient is a transposed convolution of
the output gradient with the same weight, and the weight gradient a convolution of the
input with the output gradient (batch and feature dims swapped, ``batch_group_count`` =
groups). ``mm``, ``addmm`` and ``convolution`` of two dequantized integer operands (PT2E's
quantize/dequantize pattern) become integer ops (quantized.py).
"""
from __future__ import annotations

import numpy as np
import torch

from stablehlo.ir.types import I32

from frameworks.torch.lowering import quantized
from frameworks.torch.lowering.indexing import take_flat
from frameworks.torch.lowering.registry import Unsupported, lowers
from frameworks.torch.lowering.shape import slice_dim

aten = torch.ops.aten


def _matmul(ctx, a, b, contracting, batching=((), ())):
    dtype = ctx.out_dtype(0) if isinstance(ctx.node.meta["val"], tuple) else ctx.out_dtype()
    return ctx.b.dot_general(ctx.cast(a, dtype), ctx.cast(b, dtype), contracting=contracting,
                             batching=batching)


@lowers(aten.mm.default)
def _mm(ctx, a, b):
    integer = quantized.integer_matmul(ctx, ctx.node.args[0], ctx.node.args[1])
    return integer if integer is not None else _matmul(ctx, a, b, ((1,), (0,)))


@lowers(aten.bmm.default)
def _bmm(ctx, a, b):
    return _matmul(ctx, a, b, ((2,), (1,)), ((0,), (0,)))


@lowers(aten.addmm.default)
def _addmm(ctx, bias, a, b, *, beta=1, alpha=1):
    product = quantized.integer_matmul(ctx, ctx.node.args[1], ctx.node.args[2])
    if product is None:
        product = _matmul(ctx, a, b, ((1,), (0,)))
    return _scaled_sum(ctx, bias, product, beta, alpha)


def _scaled_sum(ctx, bias, product, beta, alpha):
    """beta * bias + alpha * product, as addmm and friends define it."""
    dtype, shape = ctx.out_dtype(), ctx.out_shape()
    if alpha != 1:
        product = ctx.b.multiply(product, ctx.full(alpha, dtype, shape))
    if beta == 0:  # torch ignores bias (even NaN) when beta is 0
        return product
    bias = ctx.operand(bias, dtype, shape)
    if beta != 1:
        bias = ctx.b.multiply(bias, ctx.full(beta, dtype, shape))
    return ctx.b.add(bias, product)


def _dimension_numbers(spatial: int, lhs: str = "bf", rhs: str = "oi", out: str = "bf") -> str:
    """e.g. "[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]" for NCHW / OIHW / NCHW."""
    digits = [str(i) for i in range(spatial)]

    def part(lead):
        return "[" + ", ".join(list(lead) + digits) + "]"
    return f"{part(lhs)}x{part(rhs)}->{part(out)}"


def _expand_param(value, spatial: int) -> list:
    value = list(value) if isinstance(value, (list, tuple)) else [value]
    return value * spatial if len(value) == 1 else value


def _conv(ctx, x, weight, stride, padding, dilation, groups, dtype, result_element_type=None):
    """The convolution of ``x`` and ``weight`` cast to ``dtype`` (None: as they are, e.g. i8
    operands with an i32 ``result_element_type``)."""
    spatial = len(x.type.shape) - 2
    pad = _expand_param(padding, spatial)
    if dtype is not None:
        x, weight = ctx.cast(x, dtype), ctx.cast(weight, dtype)
    return ctx.b.convolution(
        x, weight, dimension_numbers=_dimension_numbers(spatial),
        window_strides=_expand_param(stride, spatial), padding=[(p, p) for p in pad],
        rhs_dilation=_expand_param(dilation, spatial), feature_group_count=groups,
        result_element_type=result_element_type)


def _conv_transpose(ctx, x, weight, stride, padding, dilation, output_padding, groups, dtype):
    """The gradient-of-convolution form: ``weight`` is [C_in, C_out / groups, *k]."""
    b = ctx.b
    spatial = len(x.type.shape) - 2
    stride, pad = _expand_param(stride, spatial), _expand_param(padding, spatial)
    dilation = _expand_param(dilation, spatial)
    output_padding = _expand_param(output_padding, spatial)
    cin, cout_g, *k = weight.type.shape
    # [C_in, C_out/g, k] -> [C_out, C_in/g, k] per group, then flip the window
    w = b.reshape(ctx.cast(weight, dtype), (groups, cin // groups, cout_g, *k))
    w = b.transpose(w, [0, 2, 1] + list(range(3, 3 + spatial)))
    w = b.reshape(w, (groups * cout_g, cin // groups, *k))
    w = b.reverse(w, list(range(2, 2 + spatial)))
    edges = [(d * (kk - 1) - p, d * (kk - 1) - p + op)
             for d, kk, p, op in zip(dilation, k, pad, output_padding)]
    return b.convolution(ctx.cast(x, dtype), w, dimension_numbers=_dimension_numbers(spatial),
                         window_strides=[1] * spatial, padding=edges, lhs_dilation=stride,
                         rhs_dilation=dilation, feature_group_count=groups)


@lowers(aten.convolution.default)
def _convolution(ctx, x, weight, bias, stride, padding, dilation, transposed, output_padding,
                 groups):
    dtype, shape = ctx.out_dtype(), ctx.out_shape()
    if transposed:
        y = _conv_transpose(ctx, x, weight, stride, padding, dilation, output_padding, groups,
                            dtype)
    else:
        y = quantized.integer_convolution(
            ctx, ctx.node.args[0], ctx.node.args[1], groups,
            lambda lhs, rhs: _conv(ctx, lhs, rhs, stride, padding, dilation, groups, None, I32))
        if y is None:
            y = _conv(ctx, x, weight, stride, padding, dilation, groups, dtype)
    if bias is not None:
        y = ctx.b.add(y, ctx.b.broadcast_in_dim(ctx.cast(bias, dtype), shape, [1]))
    return y


@lowers(aten.convolution_backward.default)
def _convolution_backward(ctx, grad, x, weight, bias_sizes, stride, padding, dilation,
                          transposed, output_padding, groups, output_mask):
    if transposed:
        raise Unsupported("the backward of a transposed convolution")
    spatial = len(x.type.shape) - 2
    dtype = ctx.dtype(grad)
    results = [None, None, None]
    if output_mask[0]:
        stride_ = _expand_param(stride, spatial)
        pad, dil = _expand_param(padding, spatial), _expand_param(dilation, spatial)
        k = weight.type.shape[2:]
        # the output padding that makes the transposed convolution reach the input size
        extra = [n - ((o - 1) * s - 2 * p + d * (kk - 1) + 1) for n, o, s, p, d, kk in
                 zip(x.type.shape[2:], grad.type.shape[2:], stride_, pad, dil, k)]
        results[0] = ctx.cast(_conv_transpose(ctx, grad, weight, stride, padding, dilation,
                                              extra, groups, dtype), ctx.out_dtype(0))
    if output_mask[1]:
        results[1] = ctx.cast(_weight_grad(ctx, grad, x, weight, stride, padding, dilation,
                                           groups, dtype), ctx.out_dtype(1))
    if output_mask[2]:
        dims = [d for d in range(len(grad.type.shape)) if d != 1]
        total = ctx.b.reduce(ctx.cast(grad, dtype), ctx.scalar(0, dtype), dims, "stablehlo.add")
        results[2] = ctx.cast(total, ctx.out_dtype(2))
    return tuple(results)


def _weight_grad(ctx, grad, x, weight, stride, padding, dilation, groups, dtype):
    spatial = len(x.type.shape) - 2
    stride, pad = _expand_param(stride, spatial), _expand_param(padding, spatial)
    dilation = _expand_param(dilation, spatial)
    k = weight.type.shape[2:]
    edges = []
    for axis in range(spatial):
        n, o = x.type.shape[2 + axis], grad.type.shape[2 + axis]
        high = (k[axis] - 1) * dilation[axis] + (o - 1) * stride[axis] + 1 - n - pad[axis]
        if high < 0:  # trailing input the forward never read (its floor division)
            x = slice_dim(ctx, x, 2 + axis, 0, n + high)
            high = 0
        edges.append((pad[axis], high))
    # input as [C_in(batch), N(feature), ...] against grad as [N(in), C_out(out), ...]:
    # out[C_out, C_in/g, k] = sum_N,x x[N, C_in, x*dil + k*stride...]
    return ctx.b.convolution(
        ctx.cast(x, dtype), ctx.cast(grad, dtype),
        dimension_numbers=_dimension_numbers(spatial, lhs="fb", rhs="io", out="fb"),
        window_strides=dilation, padding=edges, rhs_dilation=stride,
        batch_group_count=groups)


def _distances(ctx, a, b, p: float):
    """p-norm distances between the rows of ``a`` [..., P, M] and ``b`` [..., R, M]."""
    bld = ctx.b
    dtype = ctx.out_dtype()
    # batch dims broadcast against each other, aligned on the right as in numpy
    batch = tuple(np.broadcast_shapes(a.type.shape[:-2], b.type.shape[:-2]))
    k = len(batch)
    (rows_a, m), rows_b = a.type.shape[-2:], b.type.shape[-2]
    shape = batch + (rows_a, rows_b, m)

    def batch_dims(x):
        return list(range(k - (len(x.type.shape) - 2), k))
    a = bld.broadcast_in_dim(ctx.cast(a, dtype), shape, batch_dims(a) + [k, k + 2])
    b = bld.broadcast_in_dim(ctx.cast(b, dtype), shape, batch_dims(b) + [k + 1, k + 2])
    d = bld.abs(bld.subtract(a, b))
    zero = ctx.scalar(0, dtype)
    if p == 0:  # how many coordinates differ
        nonzero = ctx.cast(bld.compare(d, ctx.full(0, dtype, shape), "NE"), dtype)
        return bld.reduce(nonzero, zero, [k + 2], "stablehlo.add")
    if p == float("inf"):
        return bld.reduce(d, zero, [k + 2], "stablehlo.maximum")
    if p == 1:
        return bld.reduce(d, zero, [k + 2], "stablehlo.add")
    if p == 2:
        return bld.sqrt(bld.reduce(bld.multiply(d, d), zero, [k + 2], "stablehlo.add"))
    total = bld.reduce(bld.power(d, ctx.full(p, dtype, shape)), zero, [k + 2], "stablehlo.add")
    return bld.power(total, ctx.full(1.0 / p, dtype, total.type.shape))


@lowers(aten._cdist_forward.default)
def _cdist(ctx, x1, x2, p, compute_mode=None):
    return _distances(ctx, x1, x2, p)


@lowers(aten._pdist_forward.default)
def _pdist(ctx, x, p=2.0):
    n = x.type.shape[0]
    full = ctx.b.reshape(_distances(ctx, x, x, p), (n * n,))
    rows, cols = np.triu_indices(n, 1)  # pairs i < j, row-major, as torch orders them
    return take_flat(ctx, full, rows * n + cols)


@lowers(aten.addmv.default)
def _addmv(ctx, bias, mat, vec, *, beta=1, alpha=1):
    return _scaled_sum(ctx, bias, _matmul(ctx, mat, vec, ((1,), (0,))), beta, alpha)


@lowers(aten.addbmm.default)
def _addbmm(ctx, bias, a, b, *, beta=1, alpha=1):
    # the sum over the batch of a_i @ b_i: contract the batch dim too
    return _scaled_sum(ctx, bias, _matmul(ctx, a, b, ((0, 2), (0, 1))), beta, alpha)
