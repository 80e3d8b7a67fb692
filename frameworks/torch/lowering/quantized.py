"""Quantized layers to integer StableHLO: ``openhlo.quantized_linear`` (``quantize_``) and
PT2E's quantize/dequantize ops (``quantized_decomposed``), with the integer matmul and
convolution that ``linalg.py`` builds when both operands are dequantized integers.

``openhlo.quantized_linear`` (layouts in frameworks/torch/quantized_ops.py), for ``x`` of
``[M, K]`` (leading dims flattened) and a weight of ``N`` outputs:

* weight-only int8: ``dot_general(x, convert(w: i8[N, K]) * scales[N])``, contracting K;
* weight-only int4: ``bitcast_convert(w: ui8[N, K/2]) -> i4[N, K/2, 2]``, reshaped to
  ``i4[N*K/G, G]`` (a row per output and group), ``convert`` to f32 times the scales
  reshaped to ``[N*K/G]``, reshaped to ``[N, K]``, then the same dot: the program's weight
  stays i4 (packed) until that convert. Both weight-only forms are the ones the quantizer
  emits too, which the ``weight-only-dot`` pass (xla_core/quantization/weight_only_dot.py)
  turns into one op the cpu backend runs on its weight-only kernels;
* dynamic-int8: ``x`` quantized at run time (``xla_core.quantization.quantize_activation``),
  ``dot_general(q_x: i8, w: i8) -> i32``, then ``convert * s_x * scales``.

PT2E (Note [Integer contractions]): each ``quantize_per_*`` / ``dequantize_per_*`` lowers to
torch's own f32 steps, so any pattern runs as torch's reference does; a dequantize also
records which integers it dequantized (``ctx.facts``). ``mm``/``addmm``/``convolution``
whose operands both come from such records (through a view of the activation, a transpose
of the weight) become the integer op instead: i8 x i8 -> i32 with the zero points taken out
exactly, times ``s_x * s_w``; the float dequantizations are then dead and the compiler drops
them. Where only one operand is dequantized the op runs in float, and a warning says why.

Note [Integer contractions]
    With ``x = s_x (q_x - z_x)`` and ``w = s_w (q_w - z_w)`` (per output channel),
    ``sum x w = s_x s_w [sum q_x q_w - z_x sum q_w - z_w sum (q_x - z_x)]``: one i8 x i8 ->
    i32 op plus two small corrections, the weight's sum per output (per window position
    for a convolution, so padding counts as real zeros, as in the float op) and the
    activation's sum per row (per window and group). uint8 activations (x86's PT2E
    quantizer) are shifted to int8 first (``q - 128``, ``z - 128``). The weight zero points
    are run-time values under torch.compile (buffers), so their correction is built unless
    they are constant zeros (export's folded weights).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (defines quantized_decomposed ops)

from stablehlo.ir.core import Value
from stablehlo.ir.types import F32, I8, I32, IntegerType, TensorType
from pjrt.plugins.compiler_services import quantize_activation

from frameworks.torch import quantized_ops  # noqa: F401  (defines torch.ops.openhlo.*)
from frameworks.torch.lowering.dtypes import element_type
from frameworks.torch.lowering.registry import lowers

logger = logging.getLogger("openhlo.torch")
aten = torch.ops.aten
_qd = torch.ops.quantized_decomposed


# -- quantize_ layers ----------------------------------------------------------------------

@lowers(torch.ops.openhlo.quantized_linear.default)
def _quantized_linear(ctx, x, weight, scales, bias, bits, dynamic):
    b = ctx.b
    *lead, depth = x.type.shape
    rows, outputs = int(np.prod(lead, dtype=np.int64)), scales.type.shape[0]
    flat = b.reshape(x, (rows, depth))
    if dynamic:
        q, scale = quantize_activation(b, flat)
        acc = b.dot_general(q, weight, contracting=((1,), (1,)), result_element_type=I32)
        y = b.multiply(b.convert(acc, F32), b.broadcast_in_dim(scale, (rows, outputs), []))
        y = b.multiply(y, b.broadcast_in_dim(scales, (rows, outputs), [1]))
    else:
        w = _dequantized_weight(b, weight, scales, bits, outputs, depth)
        y = b.dot_general(flat, w, contracting=((1,), (1,)))
    if bias is not None:
        y = b.add(y, b.broadcast_in_dim(bias, (rows, outputs), [1]))
    return b.reshape(y, ctx.out_shape())


def _dequantized_weight(b, weight: Value, scales: Value, bits: int, outputs: int,
                        depth: int) -> Value:
    """f32 ``[N, K]`` from the i8 weight and per-channel scales, or from the packed int4
    weight (as i4) and group scales."""
    if bits == 8:
        return b.multiply(b.convert(weight, F32), b.broadcast_in_dim(scales, (outputs, depth),
                                                                     [0]))
    rows = outputs * scales.type.shape[1]   # one per (output, group)
    nibbles = b.bitcast_convert(weight, TensorType((outputs, depth // 2, 2), IntegerType(4)))
    grouped = b.reshape(nibbles, (rows, depth * outputs // rows))
    shape = grouped.type.shape
    values = b.multiply(b.convert(grouped, F32),
                        b.broadcast_in_dim(b.reshape(scales, (rows,)), shape, [0]))
    return b.reshape(values, (outputs, depth))


# -- PT2E quantize / dequantize ------------------------------------------------------------

@dataclass(frozen=True)
class Dequantized:
    """A dequantize's result is ``(storage - zero_point) * scale``; ``axis`` None: per
    tensor (``scale``/``zero_point`` Python numbers or 0-d Values), else per channel along
    ``axis`` (1-d Values)."""
    storage: Value
    scale: object
    zero_point: object
    axis: Optional[int]


def _parameter(ctx, value, dtype: torch.dtype, shape, axis: Optional[int]) -> Value:
    """A scalar or per-channel parameter (Python number or Value) broadcast to ``shape``."""
    if not isinstance(value, Value):
        return ctx.full(value, dtype, shape)
    value = ctx.cast(value, dtype)
    if value.type.rank == 0 or axis is None:
        return ctx.b.broadcast_in_dim(ctx.b.reshape(value, ()), shape, [])
    return ctx.b.broadcast_in_dim(value, shape, [axis])


def _quantize(ctx, x, scale, zero_point, quant_min, quant_max, dtype, axis=None):
    """torch's ``clamp(round(x * (1 / scale)) + zero_point, min, max).to(dtype)`` in f32."""
    shape = x.type.shape
    x = ctx.cast(x, torch.float32)
    inverse = 1.0 / scale if not isinstance(scale, Value) else ctx.b.divide(
        ctx.full(1.0, torch.float32, scale.type.shape), ctx.cast(scale, torch.float32))
    scaled = ctx.b.multiply(x, _parameter(ctx, inverse, torch.float32, shape, axis))
    shifted = ctx.b.add(ctx.b.round_nearest_even(scaled),
                        _parameter(ctx, zero_point, torch.float32, shape, axis))
    clamped = ctx.b.clamp(ctx.scalar(quant_min, torch.float32), shifted,
                          ctx.scalar(quant_max, torch.float32))
    return ctx.b.convert(clamped, element_type(dtype))


def _dequantize(ctx, q, scale, zero_point, axis=None, compute=torch.float32):
    """torch's ``(q.to(compute) - zero_point) * scale`` as the node's dtype; recorded."""
    ctx.facts[ctx.node] = Dequantized(q, scale, 0 if zero_point is None else zero_point, axis)
    shape = q.type.shape
    value = ctx.cast(q, compute)
    if zero_point is not None:
        value = ctx.b.subtract(value, _parameter(ctx, zero_point, compute, shape, axis))
    value = ctx.b.multiply(value, _parameter(ctx, scale, compute, shape, axis))
    return ctx.cast(value, ctx.out_dtype())


@lowers(_qd.quantize_per_tensor.default, _qd.quantize_per_tensor.tensor)
def _quantize_per_tensor(ctx, x, scale, zero_point, quant_min, quant_max, dtype):
    return _quantize(ctx, x, scale, zero_point, quant_min, quant_max, dtype)


@lowers(_qd.dequantize_per_tensor.default, _qd.dequantize_per_tensor.tensor)
def _dequantize_per_tensor(ctx, q, scale, zero_point, quant_min, quant_max, dtype, *,
                           out_dtype=None):
    return _dequantize(ctx, q, scale, zero_point)


@lowers(_qd.quantize_per_channel.default)
def _quantize_per_channel(ctx, x, scales, zero_points, axis, quant_min, quant_max, dtype):
    return _quantize(ctx, x, scales, zero_points, quant_min, quant_max, dtype,
                     axis % x.type.rank)


@lowers(_qd.dequantize_per_channel.default)
def _dequantize_per_channel(ctx, q, scales, zero_points, axis, quant_min, quant_max, dtype, *,
                            out_dtype=None):
    # torch subtracts in integers, multiplies in the scales' dtype, then casts
    compute = ctx.dtype(scales) if ctx.dtype(scales).is_floating_point else torch.float32
    return _dequantize(ctx, q, scales, zero_points, axis % q.type.rank, compute)


# -- integer contractions (Note [Integer contractions]) ------------------------------------

_VIEWS = (aten.view.default, aten.reshape.default, aten._unsafe_view.default)
_TRANSPOSES = (aten.t.default, aten.permute.default, aten.transpose.int)


def _source(ctx, arg) -> Optional[Dequantized]:
    """The record of the dequantize ``arg`` (an FX node) is, or is a view (per-tensor) or a
    2-d transpose of; its storage reshaped or transposed to match."""
    if not isinstance(arg, torch.fx.Node):
        return None
    fact = ctx.facts.get(arg)
    if fact is not None or arg.target not in _VIEWS + _TRANSPOSES:
        return fact
    inner = ctx.facts.get(arg.args[0]) if isinstance(arg.args[0], torch.fx.Node) else None
    if inner is None:
        return None
    shape = tuple(int(ctx.concrete(d)) for d in arg.meta["val"].shape)
    if arg.target in _VIEWS:
        if inner.axis is not None:
            return None
        return Dequantized(ctx.b.reshape(inner.storage, shape), inner.scale, inner.zero_point,
                           None)
    if inner.storage.type.rank != 2:
        return None
    axis = None if inner.axis is None else 1 - inner.axis
    return Dequantized(ctx.b.transpose(inner.storage, (1, 0)), inner.scale, inner.zero_point,
                       axis)


def _operands(ctx, lhs_arg, rhs_arg, weight_axis: int):
    """(activation, weight) records when both operands are dequantized integers the integer
    path takes, else None (with a warning when just one is)."""
    lhs, rhs = _source(ctx, lhs_arg), _source(ctx, rhs_arg)
    if lhs is None and rhs is None:
        return None
    reason = None
    if lhs is None or rhs is None:
        reason = "only one operand is dequantized"
    elif lhs.axis is not None or isinstance(lhs.scale, Value) or isinstance(lhs.zero_point,
                                                                            Value):
        reason = "the activation is not quantized per tensor with constant parameters"
    elif str(lhs.storage.type.element_type) not in ("i8", "ui8") \
            or str(rhs.storage.type.element_type) != "i8":
        reason = "the operands are not int8/uint8 activations and int8 weights"
    elif rhs.axis not in (None, weight_axis):
        reason = "the weight is not quantized per output channel"
    if reason is not None:
        logger.warning("openhlo: %s (node %s) runs in float on dequantized values: %s",
                       ctx.node.target, ctx.node.name, reason)
        return None
    return lhs, rhs


def _signed(ctx, storage: Value, zero_point: int) -> tuple[Value, int]:
    """uint8 storage as int8 (``q - 128``) with its zero point moved alike."""
    if str(storage.type.element_type) == "i8":
        return storage, int(zero_point)
    shifted = ctx.b.subtract(ctx.b.convert(storage, I32),
                             ctx.full(128, torch.int32, storage.type.shape))
    return ctx.b.convert(shifted, I8), int(zero_point) - 128


def _rescale(ctx, acc: Value, lhs: Dequantized, rhs: Dequantized, out_axis: int) -> Value:
    """The i32 sum times ``s_x * s_w`` (``s_w`` per channel along ``out_axis``), as f32."""
    shape = acc.type.shape
    y = ctx.b.multiply(ctx.b.convert(acc, F32), ctx.full(float(lhs.scale), torch.float32,
                                                         shape))
    return ctx.b.multiply(y, _parameter(ctx, rhs.scale, torch.float32, shape,
                                        None if rhs.axis is None else out_axis))


def _known_zero(value) -> bool:
    """A Python 0, or a constant of zeros (export folds the buffers in)."""
    if not isinstance(value, Value):
        return value == 0
    owner = value.owner
    return (not value.is_block_argument and owner.name == "stablehlo.constant"
            and not np.any(np.asarray(owner.attr("value").array)))


def _weight_zero_point(ctx, rhs: Dequantized, shape, out_axis: int) -> Optional[Value]:
    """The weight zero points broadcast (i32) to the result, None when known to be 0."""
    if _known_zero(rhs.zero_point):
        return None
    axis = None if rhs.axis is None else out_axis
    return _parameter(ctx, rhs.zero_point, torch.int32, shape, axis)


def integer_matmul(ctx, lhs_arg, rhs_arg) -> Optional[Value]:
    """``mm`` of dequantized ``[M, K]`` and ``[K, N]`` as the integer op (f32 result), or
    None when the operands are not both dequantized integers."""
    found = _operands(ctx, lhs_arg, rhs_arg, weight_axis=1)
    if found is None:
        return None
    lhs, rhs = found
    b = ctx.b
    q_x, z_x = _signed(ctx, lhs.storage, lhs.zero_point)
    acc = b.dot_general(q_x, rhs.storage, contracting=((1,), (0,)), result_element_type=I32)
    shape = acc.type.shape
    if z_x:   # - z_x * sum_k q_w[k, n]
        column = _sum(ctx, b.convert(rhs.storage, I32), [0])
        acc = b.subtract(acc, b.multiply(ctx.full(z_x, torch.int32, shape),
                                         b.broadcast_in_dim(column, shape, [1])))
    z_w = _weight_zero_point(ctx, rhs, shape, 1)
    if z_w is not None:   # - z_w[n] * sum_k (q_x[m, k] - z_x)
        centered = b.subtract(b.convert(q_x, I32), ctx.full(z_x, torch.int32,
                                                            q_x.type.shape))
        row = b.broadcast_in_dim(_sum(ctx, centered, [1]), shape, [0])
        acc = b.subtract(acc, b.multiply(z_w, row))
    return _rescale(ctx, acc, lhs, rhs, 1)


def integer_convolution(ctx, x_arg, w_arg, groups: int,
                        conv: Callable[[Value, Value], Value]) -> Optional[Value]:
    """A (non-transposed, NCHW) convolution of dequantized integers as the integer op (f32
    result); ``conv(lhs, rhs)`` builds the node's convolution on any operands with an i32
    result. None when the operands are not both dequantized integers."""
    found = _operands(ctx, x_arg, w_arg, weight_axis=0)
    if found is None:
        return None
    lhs, rhs = found
    b = ctx.b
    q_x, z_x = _signed(ctx, lhs.storage, lhs.zero_point)
    acc = conv(q_x, rhs.storage)
    shape = acc.type.shape
    batch, channels, *spatial = q_x.type.shape
    outputs, per_group, *window = rhs.storage.type.shape
    if z_x:   # - z_x * (the weight's sum over its input channels, at in-bounds taps)
        weight_sum = _sum(ctx, b.convert(rhs.storage, I32), [1])
        ones = ctx.full(z_x, torch.int32, (1, groups, *spatial))
        offset = conv(ones, b.reshape(weight_sum, (outputs, 1, *window)))
        acc = b.subtract(acc, b.broadcast_in_dim(b.reshape(offset, shape[1:]), shape,
                                                 range(1, len(shape))))
    z_w = _weight_zero_point(ctx, rhs, shape, 1)
    if z_w is not None:   # - z_w[o] * (sum of (q_x - z_x) over the window and group)
        centered = b.subtract(b.convert(q_x, I32), ctx.full(z_x, torch.int32,
                                                            q_x.type.shape))
        per_group_sum = _sum(ctx, b.reshape(centered, (batch, groups, channels // groups,
                                                       *spatial)), [2])
        window_sum = conv(per_group_sum, ctx.full(1, torch.int32, (outputs, 1, *window)))
        acc = b.subtract(acc, b.multiply(z_w, window_sum))
    return _rescale(ctx, acc, lhs, rhs, 1)


def _sum(ctx, x: Value, dims) -> Value:
    return ctx.b.reduce(x, ctx.scalar(0, torch.int32), dims=dims, body="stablehlo.add")

