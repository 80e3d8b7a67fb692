"""``quant-lower``: quantized types to integer and float math that every backend runs.

After it no ``!quant.uniform`` type is left: values hold their storage integers (function
arguments and results too), and each op on quantized types becomes, per the spec's formulas
(the same order of f32 operations as the interpreter, stablehlo/interpreter/
uniform_quantization.py, so these steps round alike):

* quantized constant -> the storage constant;
* ``uniform_dequantize`` -> ``(convert(q) - zp) * scale`` (per-axis: broadcast along the axis);
* ``uniform_quantize`` of a float -> ``convert(round_nearest_even(clamp(min, x / scale + zp,
  max)))``; of a quantized value: dequantize, then that;
* ``bitcast_convert`` to the storage type -> the storage value;
* ``dot_general``/``convolution`` of two quantized operands with storage that fits in i8
  (per-tensor lhs; per-tensor rhs, or per-axis with zero points 0) -> one ``i8 x i8 -> i32``
  dot_general (a convolution: one per kernel tap, summed), with the zero points' terms taken out
  exactly (integer_contraction.py), then the requantization to the result type (none when
  the result is the i32 accumulator itself: zero point 0, scales ``s_lhs * s_rhs``). The
  interpreter computes these ops in f32, so it agrees with the exact integers up to the f32
  rounding of its sums. Other quantized contractions (``integer_contraction.refusal`` says
  why) go the generic way below: dequantize, the float op, quantize;
* hybrid ``dot_general``/``convolution`` (float lhs, quantized rhs) -> the float op on the
  dequantized rhs;
* data-movement ops whose quantized operands and results share their parameters -> the op on
  the storage; other region-free ops -> dequantize, the float op, quantize.

Ops with regions over quantized types are refused (``PassError`` naming the op), or with
``strict`` off leave the module as it is.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stablehlo.builder import Builder
from stablehlo.interpreter.quantization import (DATA_MOVEMENT_OPS, expressed_type,
                                                quantized_element)
from stablehlo.ir.attr_readers import struct_ints
from stablehlo.ir.attributes import dense
from stablehlo.ir.core import Module, Operation, Value
from stablehlo.ir.types import F32, I32, QuantizedType, Type, numpy_dtype
from xla_core.passes.base import Pass, PassContext, PassError
from xla_core.quantization.integer_contraction import integer_accumulator, refusal
from xla_core.quantization.rebuild import rebuild


def storage_type(type: Type) -> Type:
    """``type`` with a quantized element type replaced by its storage type."""
    qtype = quantized_element(type)
    return type if qtype is None else type.with_element_type(qtype.storage_type)


def _has_quantized(op: Operation) -> bool:
    return any(quantized_element(v.type) is not None for v in [*op.operands, *op.results])


@dataclass(frozen=True)
class QuantLowerPass(Pass):
    """``strict`` off (as the cpu pipeline runs it), a module holding an op this pass does
    not lower is left as it is, quantized types and all, for the backend's interpreter
    fallbacks (lowering only its other functions would break the calls between them)."""
    name = "quant-lower"
    strict: bool = True

    def run(self, module: Module, ctx: PassContext) -> bool:
        funcs = [f for f in module.functions()
                 if f.body is not None and _mentions_quantized(f)]
        refused = next((op for f in funcs for op in f.body.operations
                        if _has_quantized(op) and any(r.blocks for r in op.regions)), None)
        if refused is not None:
            if not self.strict:
                return False
            raise PassError(f"{refused.where()}: quant-lower: '{refused.name}' has regions "
                            f"over quantized types, which it does not lower")
        lowering = _Lowering()
        for func in funcs:
            rebuild(module, func, lowering.rewrite,
                    arg_types=[storage_type(t) for t in func.type.inputs])
        return bool(funcs)


def _mentions_quantized(func) -> bool:
    types = [*func.type.inputs, *func.type.results]
    return (any(quantized_element(t) is not None for t in types)
            or any(_has_quantized(op) for op in func.walk()))


class _Lowering:
    def rewrite(self, op: Operation, b: Builder, operands: list):
        if not _has_quantized(op):
            return None
        handler = _HANDLERS.get(op.name)
        if handler is not None:
            result = handler(op, b, operands)
            if result is not None:
                return result
        return _generic(op, b, operands)


# -- the spec's formulas ---------------------------------------------------------------

def _along(b: Builder, values, qtype: QuantizedType, shape, dtype) -> Value:
    """A per-tensor or per-axis parameter broadcast to ``shape``."""
    array = np.asarray(values, dtype=dtype)
    if qtype.axis is None:
        return b.broadcast_in_dim(b.constant(array[0]), shape, dims=[])
    return b.broadcast_in_dim(b.constant(array), shape, dims=[qtype.axis])


def dequantize(b: Builder, storage: Value, qtype: QuantizedType) -> Value:
    """``(convert(q) - zp) * scale`` in the expressed type."""
    expressed = qtype.expressed_type
    dtype = numpy_dtype(expressed)
    shape = storage.type.shape
    value = b.convert(storage, expressed)
    if any(qtype.zero_points):
        value = b.subtract(value, _along(b, qtype.zero_points, qtype, shape, dtype))
    return b.multiply(value, _along(b, qtype.scales, qtype, shape, dtype))


def quantize(b: Builder, value: Value, qtype: QuantizedType) -> Value:
    """``convert(round_nearest_even(clamp(min, x / scale + zp, max)))``."""
    dtype = numpy_dtype(qtype.expressed_type)
    shape = value.type.shape
    scaled = b.divide(value, _along(b, qtype.scales, qtype, shape, dtype))
    if any(qtype.zero_points):
        scaled = b.add(scaled, _along(b, qtype.zero_points, qtype, shape, dtype))
    clamped = b.clamp(b.constant(dtype.type(qtype.min_value)), scaled,
                      b.constant(dtype.type(qtype.max_value)))
    return b.convert(b.round_nearest_even(clamped), qtype.storage_type)


def _as_float(b: Builder, value: Value, original: Value) -> Value:
    """The expressed-type value of an operand (dequantized when it was quantized)."""
    qtype = quantized_element(original.type)
    return value if qtype is None else dequantize(b, value, qtype)


# -- per-op lowerings ------------------------------------------------------------------

def _constant(op: Operation, b: Builder, operands: list):
    attr = op.attr("value")
    result_type = storage_type(op.result.type)
    value = dense(np.asarray(attr.array), result_type)
    return [b.op("stablehlo.constant", [], [result_type], {"value": value}).result]


def _uniform_quantize(op: Operation, b: Builder, operands: list):
    value = _as_float(b, operands[0], op.operands[0])
    return [quantize(b, value, quantized_element(op.result.type))]


def _uniform_dequantize(op: Operation, b: Builder, operands: list):
    return [dequantize(b, operands[0], quantized_element(op.operands[0].type))]


def _bitcast_convert(op: Operation, b: Builder, operands: list):
    if operands[0].type == op.result.type:   # quantized -> its storage type
        return [operands[0]]
    return [b.bitcast_convert(operands[0], storage_type(op.result.type))]


def _contraction(op: Operation, b: Builder, operands: list):
    lhs_q, rhs_q = (quantized_element(v.type) for v in op.operands)
    if lhs_q is None and rhs_q is not None:   # hybrid: float op on the dequantized weight
        rhs = dequantize(b, operands[1], rhs_q)
        return [b.op(op.name, [operands[0], rhs], [op.result.type], dict(op.attributes)).result]
    if refusal(op) is not None:
        return None   # dequantize, the float op, quantize
    accumulator = integer_accumulator(b, op, operands[0], operands[1])
    return [_requantize(b, accumulator, lhs_q, rhs_q, op)]


def _requantize(b: Builder, accumulator: Value, lhs_q, rhs_q, op: Operation) -> Value:
    """The i32 sum (real value ``s_lhs * s_rhs * acc``) in the op's result type."""
    result_q = quantized_element(op.result.type)
    scales = tuple(lhs_q.scales[0] * s for s in rhs_q.scales)
    axis = _result_axis(op) if rhs_q.axis is not None else None
    if (result_q is not None and result_q.storage_type == I32 and not any(result_q.zero_points)
            and result_q.scales == scales and result_q.axis == axis):
        return accumulator
    acc_q = QuantizedType(I32, F32, scales, (0,) * len(scales), axis)
    real = dequantize(b, accumulator, acc_q)
    if result_q is None:
        return b.convert(real, op.result.type.element_type)
    return quantize(b, real, result_q)


def _result_axis(op: Operation) -> int:
    """The result dimension the rhs's quantization axis becomes."""
    rhs_axis = quantized_element(op.operands[1].type).axis
    if op.name == "stablehlo.convolution":
        return op.attr("dimension_numbers").output_feature_dimension
    dnums = op.attr("dot_dimension_numbers")
    lhs_rank, rhs_rank = op.operands[0].type.rank, op.operands[1].type.rank
    lhs_used = struct_ints(dnums, "lhs_batching_dimensions") + \
        struct_ints(dnums, "lhs_contracting_dimensions")
    rhs_batch = struct_ints(dnums, "rhs_batching_dimensions")
    rhs_free = [d for d in range(rhs_rank)
                if d not in rhs_batch + struct_ints(dnums, "rhs_contracting_dimensions")]
    return len(rhs_batch) + lhs_rank - len(lhs_used) + rhs_free.index(rhs_axis)


def _generic(op: Operation, b: Builder, operands: list):
    """Data movement on storage when parameters agree; else dequantize, op, quantize."""
    kinds = {quantized_element(v.type) for v in [*op.operands, *op.results]} - {None}
    attributes = dict(op.attributes)
    if op.name in DATA_MOVEMENT_OPS and len(kinds) == 1:
        new = b.op(op.name, operands, [storage_type(t) for t in op.result_types], attributes)
        return list(new.results)
    floats = [_as_float(b, v, old) for v, old in zip(operands, op.operands)]
    new = b.op(op.name, floats, [expressed_type(t) for t in op.result_types], attributes)
    results = []
    for value, old in zip(new.results, op.results):
        qtype = quantized_element(old.type)
        results.append(value if qtype is None else quantize(b, value, qtype))
    return results


_HANDLERS = {
    "stablehlo.constant": _constant,
    "stablehlo.uniform_quantize": _uniform_quantize,
    "stablehlo.uniform_dequantize": _uniform_dequantize,
    "stablehlo.bitcast_convert": _bitcast_convert,
    "stablehlo.dot_general": _contraction,
    "stablehlo.convolution": _contraction,
}
