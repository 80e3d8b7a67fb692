"""Interpreter kernels of ``stablehlo.convolution`` and ``stablehlo.dynamic_conv``.

The spec defines convolution as a dot product between every (padded,
lhs-dilated) window of ``lhs`` and the kernel. We compute exactly that,
vectorized: the input is brought to ``[batch, feature, spatial...]``,
padded and dilated (windows.pad_dilate), and a strided view
``[batch, feature, out_spatial..., kernel_spatial...]`` of its windows
(rhs_dilation = the stride between taps) is contracted with the kernel in
one ``einsum`` ("im2col" without the copy). ``window_reversal`` reverses the
window, which is the same as reversing the kernel along those axes.

Groups follow the spec's split/concatenate definition: with
``feature_group_count = G`` input features and output features are split
into G groups; with ``batch_group_count = B`` the batch is split into B
groups, each convolved with its slice of output features. Both are one
einsum over a ``(B, G)`` group axis pair (at most one of them exceeds 1).
Accumulation follows accumulate.py (i8 inputs with an i32 result sum in
int64 and wrap once; bf16 sums in f32).
"""
from __future__ import annotations

import numpy as np

from stablehlo.interpreter.accumulate import accumulation_dtype, to_result, widen
from stablehlo.interpreter.kernels import kernel
from stablehlo.interpreter.linalg import sequential_ok
from stablehlo.interpreter.opattrs import bool_list, fail, int_list, int_matrix, int_value
from stablehlo.interpreter.windows import pad_dilate
from stablehlo.ir.attributes import ConvDimensionNumbersAttr
from stablehlo.ir.types import numpy_dtype

_LETTERS = "pqrstuvwxyz"   # output spatial axes in einsum specs
_KERNEL_LETTERS = "hijklm"  # kernel spatial axes


def _dimension_numbers(op) -> ConvDimensionNumbersAttr:
    dn = op.attributes.get("dimension_numbers")
    if not isinstance(dn, ConvDimensionNumbersAttr):
        raise fail(op, f"attribute 'dimension_numbers' must be #stablehlo.conv<...>, got {dn}")
    return dn


def _spatial_windows(x: np.ndarray, kernel_shape, strides, dilations) -> np.ndarray:
    """View ``[N, C, out..., k...]`` of the windows of ``x`` (``[N, C, spatial...]``)."""
    n, c = x.shape[:2]
    out = []
    for size, k, s, d in zip(x.shape[2:], kernel_shape, strides, dilations):
        span = 0 if k == 0 else (k - 1) * d + 1
        out.append(0 if size == 0 or span > size else (size - span) // s + 1)
    shape = (n, c) + tuple(out) + tuple(kernel_shape)
    if 0 in shape:
        return np.zeros(shape, dtype=x.dtype)
    sn, sc, *sp = x.strides
    steps = tuple(st * s for st, s in zip(sp, strides))
    taps = tuple(st * d for st, d in zip(sp, dilations))
    return np.lib.stride_tricks.as_strided(x, shape, (sn, sc) + steps + taps, writeable=False)


def convolve(op, lhs: np.ndarray, rhs: np.ndarray, padding: np.ndarray) -> np.ndarray:
    """The convolution of the spec, with ``padding`` given as an [S, 2] array."""
    dn = _dimension_numbers(op)
    rank = lhs.ndim
    spatial = rank - 2
    if rhs.ndim != rank or spatial > len(_LETTERS) or spatial > len(_KERNEL_LETTERS):
        raise fail(op, f"lhs and rhs must have the same rank (got {lhs.ndim}, {rhs.ndim})")
    strides = int_list(op, "window_strides", [1] * spatial)
    lhs_dilation = int_list(op, "lhs_dilation", [1] * spatial)
    rhs_dilation = int_list(op, "rhs_dilation", [1] * spatial)
    reversal = bool_list(op, "window_reversal", [False] * spatial)
    groups_f = int_value(op, "feature_group_count", 1)
    groups_b = int_value(op, "batch_group_count", 1)
    for name, values in (("window_strides", strides), ("lhs_dilation", lhs_dilation),
                         ("rhs_dilation", rhs_dilation), ("window_reversal", reversal)):
        if len(values) != spatial:
            raise fail(op, f"{name} has {len(values)} entries, expected {spatial}")
    out_dtype = numpy_dtype(op.result_types[0].element_type)
    acc = accumulation_dtype(lhs.dtype, rhs.dtype, out_dtype)

    x = widen(lhs, acc).transpose([dn.input_batch_dimension, dn.input_feature_dimension]
                                  + list(dn.input_spatial_dimensions))
    w = widen(rhs, acc).transpose([dn.kernel_output_feature_dimension,
                                   dn.kernel_input_feature_dimension]
                                  + list(dn.kernel_spatial_dimensions))
    flips = tuple(2 + i for i, r in enumerate(reversal) if r)
    if flips:
        w = np.flip(w, axis=flips)
    pads = np.concatenate([np.zeros((2, 2), dtype=np.int64), padding.astype(np.int64)])
    x = pad_dilate(x, 0, pads, [1, 1] + lhs_dilation)
    windows = _spatial_windows(x, w.shape[2:], strides, rhs_dilation)
    _check_groups(op, x.shape, w.shape, groups_f, groups_b)
    value = _grouped_einsum(windows, w, groups_f, groups_b, spatial)
    order = ([dn.output_batch_dimension, dn.output_feature_dimension]
             + list(dn.output_spatial_dimensions))
    return to_result(value.transpose(np.argsort(order)), out_dtype)


def _check_groups(op, x_shape, w_shape, groups_f, groups_b) -> None:
    n, c = x_shape[:2]
    o, i = w_shape[:2]
    if groups_f < 1 or groups_b < 1 or (groups_f > 1 and groups_b > 1):
        raise fail(op, f"invalid group counts: feature_group_count={groups_f}, "
                       f"batch_group_count={groups_b}")
    if c % groups_f or c // groups_f != i:
        raise fail(op, f"input features ({c}) / feature_group_count ({groups_f}) must equal "
                       f"the kernel input features ({i})")
    if o % (groups_f * groups_b) or n % groups_b:
        raise fail(op, f"output features ({o}) and batch ({n}) must divide into the groups")


def _grouped_einsum(windows, w, groups_f, groups_b, spatial) -> np.ndarray:
    """Contract windows ``[N, C, out..., k...]`` with kernel ``[O, I, k...]``.

    Returns ``[N / B, O, out...]``; output feature index ``(b * G + g) * Og + o``.
    Small float convolutions sum their products one at a time, kernel taps
    outer and input features inner, as XLA's CPU convolution loop does (Note
    [summation order] in linalg.py); the rest is one einsum.
    """
    n, c = windows.shape[:2]
    out_shape = windows.shape[2:2 + spatial]
    k_shape = windows.shape[2 + spatial:]
    o_total = w.shape[0]
    og = o_total // (groups_f * groups_b)
    cg = c // groups_f
    x = windows.reshape((groups_b, n // groups_b, groups_f, cg) + out_shape + k_shape)
    k = w.reshape((groups_b, groups_f, og, cg) + k_shape)
    taps = int(np.prod(k_shape, dtype=np.int64))
    work = (n // groups_b) * o_total * int(np.prod(out_shape, dtype=np.int64)) * cg * taps
    with np.errstate(all="ignore"):
        if sequential_ok(x.dtype, cg * taps, work):
            value = _sequential_sum(x, k, spatial)
        else:
            outs = _LETTERS[:spatial]
            kern = _KERNEL_LETTERS[:spatial]
            value = np.einsum(f"bngc{outs}{kern},bgoc{kern}->nbgo{outs}", x, k, optimize=True)
    return value.reshape((n // groups_b, o_total) + out_shape)


def _sequential_sum(x: np.ndarray, k: np.ndarray, spatial: int) -> np.ndarray:
    """``sum over taps, features of x[b, n, g, c, out.., t..] * k[b, g, o, c, t..]``.

    Returns ``[n, b, g, o, out...]``, summed in XLA's loop order.
    """
    k_shape = x.shape[4 + spatial:]
    pad = (None,) * spatial
    total = None
    for tap in np.ndindex(*k_shape):
        for c in range(x.shape[3]):
            xs = x[(slice(None),) * 3 + (c,) + (Ellipsis,) + tap]  # [b, n, g, out...]
            ks = k[(slice(None),) * 3 + (c,) + tap]                  # [b, g, o]
            term = xs[:, :, :, None] * ks[:, None, :, :][(Ellipsis,) + pad]
            total = term if total is None else total + term
    return np.moveaxis(total, 1, 0)


def _padding_attr(op, spatial: int) -> np.ndarray:
    return int_matrix(op, "padding", spatial)


@kernel("stablehlo.convolution")
def convolution(ctx, op, lhs, rhs):
    return convolve(op, lhs, rhs, _padding_attr(op, lhs.ndim - 2))


@kernel("stablehlo.dynamic_conv")
def dynamic_conv(ctx, op, lhs, rhs, padding):
    padding = np.asarray(padding)
    spatial = lhs.ndim - 2
    if padding.shape != (spatial, 2):
        raise fail(op, f"padding operand must have shape [{spatial}, 2], got {padding.shape}")
    return convolve(op, lhs, rhs, padding.astype(np.int64))
