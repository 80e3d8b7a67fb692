"""The quantized replacement of one unit, per mode (see config.py for the modes' meaning).

Each ``emit_*`` builds, at the unit's place, the ops that replace its result and returns
``(value, record)``: the new f32 result (same type as the op's) and what was chosen, for the
report. The weight always becomes a ``!quant.uniform`` constant whose attribute holds the
storage integers (upstream MLIR's spelling of a quantized constant).
"""
from __future__ import annotations

import numpy as np

from stablehlo.builder import Builder
from stablehlo.ir.attr_readers import struct_ints
from stablehlo.ir.attributes import dense
from stablehlo.ir.core import Operation, Value
from stablehlo.ir.types import F32, I8, I32, QuantizedType, TensorType
from xla_core.quantization.config import QuantizationConfig
from xla_core.quantization.params import (accumulator_type, activation_type, quantize_array,
                                          symmetric_max, weight_type)
from xla_core.quantization.units import Unit


def quantized_constant(b: Builder, storage: np.ndarray, qtype: QuantizedType) -> Value:
    """``stablehlo.constant`` of quantized type holding ``storage``."""
    value = dense(storage, TensorType(storage.shape, qtype.storage_type))
    return b.op("stablehlo.constant", [], [TensorType(storage.shape, qtype)],
                {"value": value}).result


def _same_op(b: Builder, op: Operation, operands: list, result_type) -> Value:
    """``op`` again on new operands with ``result_type`` (attributes kept)."""
    return b.op(op.name, operands, [result_type], dict(op.attributes)).result


def _weight(unit: Unit, config: QuantizationConfig, bits: int) -> QuantizedType:
    axis = unit.weight_axis if config.granularity == "per-channel" else None
    return weight_type(unit.weight, bits, axis)


def _weight_record(qtype: QuantizedType, bits: int, group_size=None) -> dict:
    scales = np.asarray(qtype.scales)
    record = {"bits": bits, "granularity": "per-tensor" if qtype.axis is None else "per-channel",
              "axis": qtype.axis, "scales": len(scales), "scale_min": float(scales.min()),
              "scale_max": float(scales.max())}
    if group_size is not None:
        record.update(granularity="group-wise", group_size=group_size)
    return record


# -- weight-only ------------------------------------------------------------------------

def _groupable(unit: Unit, config: QuantizationConfig) -> bool:
    """int4 groups along the one contracting dim of a rank-2 dot weight."""
    if config.mode != "weight-int4" or unit.kind != "dot_general" or unit.weight.ndim != 2:
        return False
    if len(unit.contracting) != 1 or unit.weight_axis is None:
        return False
    depth = unit.weight.shape[unit.contracting[0]]
    return depth % config.group_size == 0 and depth > config.group_size


def emit_weight_only(unit: Unit, b: Builder, operands: list, config: QuantizationConfig):
    """The hybrid op (float lhs, quantized weight), or for group-wise int4 the float op on
    the dequantized grouped weight (the spec has no sub-channel types)."""
    bits = config.weight_bits
    op = unit.op
    if _groupable(unit, config):
        return _grouped_dot(unit, b, operands[0], config.group_size)
    qtype = _weight(unit, config, bits)
    weight = quantized_constant(b, quantize_array(unit.weight, qtype), qtype)
    record = {"weight": _weight_record(qtype, bits)}
    return _same_op(b, op, [operands[0], weight], op.result.type), record


def _grouped_dot(unit: Unit, b: Builder, x: Value, group: int):
    """``dot_general(x, reshape(uniform_dequantize(q), [N, K]))`` contracting the weight's
    dim 1, where ``q`` is an int4 constant ``[N*K/G, G]`` quantized per axis 0: row ``n *
    K/G + g`` holds group ``g`` of output ``n``. After ``quant-lower`` this is the form
    ``weight-only-dot`` recognises (the one frameworks/torch's ``quantize_`` emits too)."""
    weight = unit.weight
    matrix = weight if unit.contracting[0] == 1 else weight.T      # [N, K]
    outputs, depth = matrix.shape
    flat = matrix.reshape(outputs * (depth // group), group)
    qtype = weight_type(flat, 4, 0)
    storage = quantize_array(flat, qtype)
    value = b.uniform_dequantize(quantized_constant(b, storage, qtype))
    value = b.reshape(value, (outputs, depth))
    dnums = unit.op.attr("dot_dimension_numbers")
    lhs_contracting = struct_ints(dnums, "lhs_contracting_dimensions")
    result = b.dot_general(x, value, contracting=(lhs_contracting, (1,)))
    return result, {"weight": _weight_record(qtype, 4, group)}


# -- dynamic-range ----------------------------------------------------------------------

def quantize_activation(b: Builder, x: Value) -> tuple[Value, Value]:
    """``x`` (f32) quantized at run time, symmetric per-tensor int8: ``(storage, scale)``,
    the i8 tensor and the 0-d f32 ``scale = max|x| / 127``; ``x ~ storage * scale``. Also
    what the frameworks' dynamic-int8 lowerings build."""
    shape = x.type.shape
    magnitude = b.reduce(b.abs(x), b.constant(np.float32(0)), dims=range(len(shape)),
                         body="stablehlo.maximum")
    # an all-zero x gets scale 1 (any positive scale quantizes zeros exactly)
    tiny = b.constant(np.float32(np.finfo(np.float32).tiny))
    positive = b.compare(magnitude, tiny, "GT")
    scale = b.select(positive, b.divide(magnitude, b.constant(np.float32(127))),
                     b.constant(np.float32(1)))
    limit = symmetric_max(8)
    scaled = b.divide(x, b.broadcast_in_dim(scale, shape, dims=[]))
    clamped = b.clamp(b.constant(np.float32(-limit)), b.round_nearest_even(scaled),
                      b.constant(np.float32(limit)))
    return b.convert(clamped, I8), scale


def emit_dynamic(unit: Unit, b: Builder, operands: list, config: QuantizationConfig):
    """``x`` quantized at run time (``quantize_activation``), the int8 x int8 -> i32 op on
    the storage of the quantized weight, then ``acc * s_x * s_w``."""
    op, x = unit.op, operands[0]
    qtype = _weight(unit, config, 8)
    weight = quantized_constant(b, quantize_array(unit.weight, qtype), qtype)
    weight_storage = b.bitcast_convert(weight, TensorType(unit.weight.shape, I8))
    x_storage, scale = quantize_activation(b, x)
    out_type = op.result.type
    accumulator = _same_op(b, op, [x_storage, weight_storage], out_type.with_element_type(I32))
    result = b.multiply(b.convert(accumulator, F32),
                        b.broadcast_in_dim(scale, out_type.shape, dims=[]))
    result = b.multiply(result, _channel_scales(b, qtype, unit.result_axis, out_type))
    return result, {"weight": _weight_record(qtype, 8),
                    "activation": "per-tensor, scale max|x|/127 at run time"}


def _channel_scales(b: Builder, qtype: QuantizedType, result_axis, out_type) -> Value:
    scales = np.asarray(qtype.scales, dtype=np.float32)
    if qtype.axis is None:
        return b.broadcast_in_dim(b.constant(scales[0]), out_type.shape, dims=[])
    return b.broadcast_in_dim(b.constant(scales), out_type.shape, dims=[result_axis])


# -- static-range -----------------------------------------------------------------------

def emit_static(unit: Unit, b: Builder, operands: list, config: QuantizationConfig,
                activation_range: tuple):
    """``uniform_quantize`` of ``x`` with the calibrated type, the quantized op with the i32
    accumulator (scale ``s_x * s_w``), ``uniform_dequantize`` back to f32."""
    op = unit.op
    x_type = activation_type(*activation_range)
    w_type = _weight(unit, config, 8)
    x = b.uniform_quantize(operands[0], x_type)
    weight = quantized_constant(b, quantize_array(unit.weight, w_type), w_type)
    acc_type = accumulator_type(x_type, w_type, unit.result_axis)
    accumulator = _same_op(b, op, [x, weight], op.result.type.with_element_type(acc_type))
    record = {"weight": _weight_record(w_type, 8),
              "activation": {"range": [float(v) for v in activation_range],
                             "scale": x_type.scales[0], "zero_point": x_type.zero_points[0],
                             "method": config.method}}
    return b.uniform_dequantize(accumulator), record
