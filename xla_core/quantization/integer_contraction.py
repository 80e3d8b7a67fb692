"""Quantized ``dot_general``/``convolution`` as one ``i8 x i8 -> i32`` dot_general.

What ``quant-lower`` emits for a contraction of two quantized operands whose storage fits
in i8: the backend's int8 GEMM (the cpu backend's ``kernels_lowp_dot.cc``) computes the
exact integer sum ``sum((a - za) * (w - zw))``, which the interpreter's f32 arithmetic
reproduces only up to the rounding of its sums (those round to the same i32 accumulator
while ``|sum| * K * 2^-24`` stays below one half, which is why the two agree bit for bit on
the programs the tests and the upstream suite hold).

The zero points never enter the GEMM (``a - za`` does not fit in i8): with ``K`` the
contracting size, ``sum((a - za)(w - zw)) = sum(a w) - za sum(w) - zw sum(a) + za zw K``,
the column sums of ``w`` and row sums of ``a`` being i32 reductions next to the product.

A convolution becomes one such dot_general per kernel tap, summed: the input, brought to
``[N, spatial..., C]``, is padded with the lhs zero point (edge padding and the holes of
``lhs_dilation``: those places hold real zeros, as the spec's padding does, so they add
nothing once ``za`` is taken out); each tap multiplies its strided slice of it,
``[N, out..., C]``, by its kernel matrix ``[C/G, O]`` (the kernel reversed first along
``window_reversal``), feature groups being the dots' batch dimension. Summing per-tap
products rather than multiplying one patch matrix (im2col) never materializes the patches:
their copy, a concatenation of T slices, cost several times the products on the cpu
backend (a 56x56x64 3x3 convolution: about 40 ms of copying against 12 ms of GEMM).

``refusal(op)`` says why an op cannot take this form (it then runs in float: dequantize,
the float op, quantize); the conformance report (tools/conformance/integer_path.py) uses it
to name the reason.
"""
from __future__ import annotations

import itertools

import numpy as np

from stablehlo.builder import Builder
from stablehlo.interpreter.opattrs import bool_list, int_list, int_matrix, int_value
from stablehlo.interpreter.quantization import quantized_element
from stablehlo.ir.attr_readers import struct_ints
from stablehlo.ir.core import Operation, Value
from stablehlo.ir.types import I8, I32, IntegerType

CONTRACTIONS = ("stablehlo.dot_general", "stablehlo.convolution")

# |(a - za)(w - zw)| <= 255 * 255 for 8-bit storage: longer sums could leave i32.
MAX_EXACT_CONTRACTING_SIZE = (2 ** 31 - 1) // (255 * 255)


def refusal(op: Operation) -> str | None:
    """Why the quantized contraction ``op`` does not become an i8 x i8 -> i32 dot_general
    (None when it does)."""
    lhs_q, rhs_q = (quantized_element(v.type) for v in op.operands)
    if lhs_q is None:
        return "hybrid: float lhs, quantized rhs (the float op on the dequantized rhs)"
    if rhs_q is None:
        return "quantized lhs with a float rhs"
    for side, qtype in (("lhs", lhs_q), ("rhs", rhs_q)):
        storage = qtype.storage_type
        if not (isinstance(storage, IntegerType) and storage.signed and storage.width <= 8):
            return f"{side} storage type {storage} does not fit in i8"
    if lhs_q.axis is not None:
        return "per-axis quantized lhs"
    if rhs_q.axis is not None and any(rhs_q.zero_points):
        return "per-axis rhs with nonzero zero points"
    if op.name == "stablehlo.convolution" and int_value(op, "batch_group_count", 1) != 1:
        return "convolution with batch_group_count > 1"
    if _contracting_size(op) > MAX_EXACT_CONTRACTING_SIZE:
        return (f"contracting size {_contracting_size(op)} could overflow the i32 "
                f"accumulator")
    return None


def integer_accumulator(b: Builder, op: Operation, lhs: Value, rhs: Value) -> Value:
    """The i32 tensor (``op``'s result shape) of ``sum((a - za)(w - zw))`` over ``op``'s
    contraction; ``lhs``/``rhs`` hold the storage integers. ``refusal(op)`` must be None."""
    lhs_q, rhs_q = (quantized_element(v.type) for v in op.operands)
    za, zw = lhs_q.zero_points[0], rhs_q.zero_points[0]
    a, w = _as_i8(b, lhs), _as_i8(b, rhs)
    if op.name == "stablehlo.dot_general":
        dnums = op.attr("dot_dimension_numbers")
        dims = tuple(struct_ints(dnums, f) for f in (
            "lhs_batching_dimensions", "rhs_batching_dimensions",
            "lhs_contracting_dimensions", "rhs_contracting_dimensions"))
        return _zero_point_free_dot(b, a, w, dims, za, zw)
    return _convolution(b, op, a, w, za, zw)


def _contracting_size(op: Operation) -> int:
    lhs_shape, rhs_shape = op.operands[0].type.shape, op.operands[1].type.shape
    if op.name == "stablehlo.dot_general":
        dims = struct_ints(op.attr("dot_dimension_numbers"), "lhs_contracting_dimensions")
        return int(np.prod([lhs_shape[d] for d in dims], dtype=np.int64))
    dn = op.attr("dimension_numbers")
    taps = int(np.prod([rhs_shape[d] for d in dn.kernel_spatial_dimensions], dtype=np.int64))
    return taps * rhs_shape[dn.kernel_input_feature_dimension]


def _as_i8(b: Builder, storage: Value) -> Value:
    return storage if storage.type.element_type == I8 else b.convert(storage, I8)


def _splat(b: Builder, value: int, shape, dtype=np.int32) -> Value:
    return b.broadcast_in_dim(b.constant(dtype(value)), shape, dims=[])


def _zero_point_free_dot(b: Builder, a: Value, w: Value, dims: tuple, za: int,
                         zw: int) -> Value:
    """``sum((a - za)(w - zw))`` over the contracting dims: the i8 dot_general, less the
    zero points' terms. ``dims``: (lhs batching, rhs batching, lhs contracting, rhs
    contracting). The result is laid out as dot_general's: batch, lhs free, rhs free."""
    lb, rb, lc, rc = dims
    acc = b.dot_general(a, w, contracting=(lc, rc), batching=(lb, rb),
                        result_element_type=I32)
    shape = acc.type.shape
    lf = [d for d in range(a.type.rank) if d not in lb + lc]
    rf = [d for d in range(w.type.rank) if d not in rb + rc]
    size = int(np.prod([a.type.shape[d] for d in lc], dtype=np.int64))
    if za:   # za * (column sums of w), per batch element and rhs free index
        places = {**{d: rb.index(d) for d in rb},
                  **{d: len(lb) + len(lf) + rf.index(d) for d in rf}}
        sums = _sum_into(b, w, rc, places, shape)
        acc = b.subtract(acc, b.multiply(sums, _splat(b, za, shape)))
    if zw:   # zw * (row sums of a) - za * zw * K
        places = {**{d: lb.index(d) for d in lb}, **{d: len(lb) + lf.index(d) for d in lf}}
        sums = _sum_into(b, a, lc, places, shape)
        acc = b.subtract(acc, b.multiply(sums, _splat(b, zw, shape)))
        if za:
            acc = b.add(acc, _splat(b, za * zw * size, shape))
    return acc


def _sum_into(b: Builder, x: Value, summed: list, places: dict, shape) -> Value:
    """The i32 sum of ``x`` over ``summed``, broadcast to ``shape``: each dim ``d`` left
    lands on ``places[d]``."""
    sums = b.reduce([b.convert(x, I32)], [b.constant(np.int32(0))], summed,
                    "stablehlo.add")
    kept = [d for d in range(x.type.rank) if d not in summed]
    order = sorted(range(len(kept)), key=lambda i: places[kept[i]])
    if order != list(range(len(kept))):
        sums = b.transpose(sums, order)
    return b.broadcast_in_dim(sums, shape, dims=sorted(places[d] for d in kept))


def _convolution(b: Builder, op: Operation, x: Value, w: Value, za: int, zw: int) -> Value:
    """The sum over kernel taps of ``x``'s strided slice (``x`` padded with ``za``) times
    the tap's kernel matrix, in ``op``'s layout."""
    dn = op.attr("dimension_numbers")
    spatial = len(dn.input_spatial_dimensions)
    out_type = op.result.type
    out = [out_type.shape[d] for d in dn.output_spatial_dimensions]
    strides = int_list(op, "window_strides", [1] * spatial)
    lhs_dilation = int_list(op, "lhs_dilation", [1] * spatial)
    rhs_dilation = int_list(op, "rhs_dilation", [1] * spatial)
    reversal = bool_list(op, "window_reversal", [False] * spatial)
    padding = int_matrix(op, "padding", spatial)
    groups = int_value(op, "feature_group_count", 1)

    # input [N, spatial..., C], padded with za (edges and lhs dilation's holes)
    x = b.transpose(x, [dn.input_batch_dimension, *dn.input_spatial_dimensions,
                        dn.input_feature_dimension])
    if padding.any() or any(d > 1 for d in lhs_dilation):
        x = b.pad(x, b.constant(np.int8(za)), [0, *padding[:, 0], 0],
                  [0, *padding[:, 1], 0], [0, *(d - 1 for d in lhs_dilation), 0])
    n, channels = x.type.shape[0], x.type.shape[-1]
    cg = channels // groups

    # kernel [T, C/G, O] (reversed along window_reversal first)
    flipped = [d for d, r in zip(dn.kernel_spatial_dimensions, reversal) if r]
    if flipped:
        w = b.reverse(w, flipped)
    w = b.transpose(w, [*dn.kernel_spatial_dimensions, dn.kernel_input_feature_dimension,
                        dn.kernel_output_feature_dimension])
    features = w.type.shape[-1]
    kernel_sizes = list(w.type.shape[:spatial])
    w = b.reshape(w, [int(np.prod(kernel_sizes, dtype=np.int64)), cg, features])

    # one dot per kernel tap, summed: [N, out..., O], or [G, N, out..., O/G] with groups
    acc = None
    for index, tap in enumerate(itertools.product(*(range(k) for k in kernel_sizes))):
        start = [t * r for t, r in zip(tap, rhs_dilation)]
        limit = [s + (o - 1) * st + 1 for s, o, st in zip(start, out, strides)]
        piece = b.slice(x, [0, *start, 0], [n, *limit, channels], [1, *strides, 1])
        weight = b.reshape(b.slice(w, [index, 0, 0], [index + 1, cg, features]),
                           [cg, features])
        if groups == 1:
            dims = ([], [], [1 + spatial], [0])
        else:
            piece = b.reshape(piece, [n, *out, groups, cg])
            weight = b.reshape(weight, [cg, groups, features // groups])
            dims = ([1 + spatial], [1], [2 + spatial], [0])
        part = _zero_point_free_dot(b, piece, weight, dims, za, zw)
        acc = part if acc is None else b.add(acc, part)
    if groups > 1:
        acc = b.transpose(acc, [*range(1, 2 + spatial), 0, 2 + spatial])
        acc = b.reshape(acc, [n, *out, features])
    # [N, out..., O] -> the op's layout
    places = [dn.output_batch_dimension, *dn.output_spatial_dimensions,
              dn.output_feature_dimension]
    order = [places.index(d) for d in range(out_type.rank)]
    return acc if order == list(range(out_type.rank)) else b.transpose(acc, order)


__all__ = ["CONTRACTIONS", "MAX_EXACT_CONTRACTING_SIZE", "integer_accumulator", "refusal"]
