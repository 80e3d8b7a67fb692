"""Quantized types in the evaluator: the dequantize-compute-quantize wrapper.

Runtime values of ``tensor<...x!quant.uniform<...>>`` hold the storage
integers (values.py). Ops on quantized types follow the spec's
``dequantize_op_quantize``: the quantized operands are dequantized to the
expressed type, the float kernel runs on a *view* of the op whose quantized
types are replaced by their expressed types, and the quantized results are
quantized back (divide by scale, add zero point, clamp to the storage range,
round half to even; per-axis parameters broadcast along ``axis``).
``plan(kernel, op)`` makes that decision once per op, at block-compile time.

Ops that run directly on the storage integers:

* ops that only carry values around or read the quantized types themselves
  (``STORAGE_OPS``: constant, bitcast_convert, uniform_quantize/dequantize,
  control flow, calls, tuples, tokens, checks, collectives that move data);
* data-movement ops (reshape, transpose, slice, gather, ...) whose quantized
  operands and results all have identical quantization parameters: moving
  storage integers is then exact and cheaper than a round trip.

Region-carrying ops with quantized types (reduce, sort, ...) get a float
clone of their regions, so the body computes in the expressed type as the
spec's ``dequantize_op_quantize`` of the whole op prescribes.

The arithmetic (``quantize``/``dequantize``) is in uniform_quantization.py,
shared with the uniform_quantize/uniform_dequantize kernels.
"""
from __future__ import annotations

import numpy as np

from stablehlo.interpreter.opattrs import fail
from stablehlo.interpreter.uniform_quantization import dequantize, quantize
from stablehlo.interpreter.values import TOKEN
from stablehlo.ir.attributes import DenseElementsAttr
from stablehlo.ir.core import Block, Operation, Region, Value
from stablehlo.ir.types import (QuantizedType, TensorType, TokenType, TupleType, Type,
                                numpy_dtype)
from stablehlo.limits import constant_over_limit

# Ops whose kernels take and produce storage integers as they are.
STORAGE_OPS = frozenset({
    "stablehlo.constant", "stablehlo.bitcast_convert", "stablehlo.uniform_quantize",
    "stablehlo.uniform_dequantize", "stablehlo.tuple", "stablehlo.get_tuple_element",
    "stablehlo.optimization_barrier", "stablehlo.while", "stablehlo.if", "stablehlo.case",
    "func.call", "stablehlo.composite", "stablehlo.custom_call", "stablehlo.after_all",
    "stablehlo.create_token", "stablehlo.infeed", "stablehlo.outfeed", "stablehlo.send",
    "stablehlo.recv", "stablehlo.all_gather", "stablehlo.all_to_all",
    "stablehlo.collective_permute", "stablehlo.collective_broadcast",
    "stablehlo.get_dimension_size", "stablehlo.replica_id", "stablehlo.partition_id",
    "interpreter.run_parallel", "interpreter.probe", "interpreter.print",
})

# Ops that only move elements: exact on storage when all quant params agree.
DATA_MOVEMENT_OPS = frozenset({
    "stablehlo.reshape", "stablehlo.transpose", "stablehlo.slice", "stablehlo.broadcast_in_dim",
    "stablehlo.concatenate", "stablehlo.gather", "stablehlo.dynamic_slice",
    "stablehlo.dynamic_update_slice", "stablehlo.pad", "stablehlo.reverse", "stablehlo.select",
    "stablehlo.real_dynamic_slice", "stablehlo.dynamic_reshape",
    "stablehlo.dynamic_broadcast_in_dim", "stablehlo.dynamic_pad", "stablehlo.dynamic_gather",
    "stablehlo.broadcast", "stablehlo.torch_index_select",
})


def quantized_element(type: Type):
    """The QuantizedType of a quantized tensor type, else None."""
    if isinstance(type, TensorType) and isinstance(type.element_type, QuantizedType):
        return type.element_type
    return None


def expressed_type(type: Type) -> Type:
    """``type`` with quantized element types replaced by their expressed types."""
    if isinstance(type, TensorType) and isinstance(type.element_type, QuantizedType):
        return type.with_element_type(type.element_type.expressed_type)
    if isinstance(type, TupleType):
        return TupleType(tuple(expressed_type(t) for t in type.types))
    return type


def zero_storage(type: Type):
    """The runtime value of zero of ``type``: ``quantize(0)`` for quantized types."""
    if isinstance(type, TupleType):
        return tuple(zero_storage(t) for t in type.types)
    if isinstance(type, TokenType):
        return TOKEN
    element = type.element_type
    shape = tuple(type.shape)
    if isinstance(element, QuantizedType):
        zeros = np.zeros(shape, dtype=numpy_dtype(element.expressed_type))
        return quantize(zeros, element)
    return np.zeros(shape, dtype=numpy_dtype(element))


# ---------------------------------------------------------------------------
# Planning

def _has_quantized(op: Operation) -> bool:
    for value in op.operands + op.results:
        type = value.type
        if isinstance(type, TensorType) and isinstance(type.element_type, QuantizedType):
            return True
    return False


def _same_params(op: Operation) -> bool:
    seen = {quantized_element(v.type) for v in list(op.operands) + list(op.results)}
    seen.discard(None)
    return len(seen) <= 1


def plan(kernel, op: Operation):
    """(function to call, op to pass it) for running ``op`` with ``kernel``."""
    if op.name in STORAGE_OPS or op.dialect == "check" or not _has_quantized(op):
        return kernel, op
    if op.name in DATA_MOVEMENT_OPS and _same_params(op):
        return kernel, op
    return _wrap(kernel, op), expressed_view(op)


def _wrap(kernel, op: Operation):
    in_q = [quantized_element(v.type) for v in op.operands]
    out_q = [quantized_element(v.type) for v in op.results]

    def run(ctx, view, *args):
        floats = [a if q is None else dequantize(a, q) for a, q in zip(args, in_q)]
        outs = kernel(ctx, view, *floats)
        return [o if q is None else quantize(np.asarray(o), q) for o, q in zip(outs, out_q)]
    run.__name__ = f"dequantize_compute_quantize[{op.name}]"
    return run


def expressed_view(op: Operation) -> Operation:
    """A detached copy of ``op`` whose types are the expressed types.

    Attributes are shared with ``op``; regions are cloned with expressed types
    when they mention quantized types (values from outside are shared).
    """
    view = Operation.__new__(Operation)
    view.name = op.name
    view.operands = [Value(expressed_type(v.type), v.owner, v.index) for v in op.operands]
    view.results = [Value(expressed_type(v.type), view, v.index) for v in op.results]
    view.attributes = op.attributes
    view.location = op.location
    view.parent = op.parent
    view.regions = [_float_region(r, {}) if _region_has_quantized(r) else r for r in op.regions]
    return view


def _region_has_quantized(region: Region) -> bool:
    for block in region.blocks:
        if any(quantized_element(a.type) is not None for a in block.arguments):
            return True
        for op in block.operations:
            if any(_has_quantized(inner) for inner in op.walk()):
                return True
    return False


def _float_region(region: Region, vmap: dict) -> Region:
    new = Region()
    for block in region.blocks:
        new_block = Block([expressed_type(a.type) for a in block.arguments])
        for old, fresh in zip(block.arguments, new_block.arguments):
            vmap[old] = fresh
        for op in block.operations:
            new_block.append(_float_op(op, vmap))
        new.add_block(new_block)
    return new


def _float_op(op: Operation, vmap: dict) -> Operation:
    attributes = dict(op.attributes)
    value = attributes.get("value")
    if op.name == "stablehlo.constant" and isinstance(value, DenseElementsAttr):
        qtype = quantized_element(value.type)
        if qtype is not None:   # a quantized constant becomes its float value
            too_big = constant_over_limit(f"quantized constant {value.type}",
                                          value.array.size * 8)
            if too_big:
                raise fail(op, too_big)
            attributes["value"] = DenseElementsAttr(expressed_type(value.type),
                                                    dequantize(value.array, qtype))
    clone = Operation(op.name, [vmap.get(v, v) for v in op.operands],
                      [expressed_type(t) for t in op.result_types], attributes,
                      [_float_region(r, vmap) for r in op.regions], op.location)
    for old, fresh in zip(op.results, clone.results):
        vmap[old] = fresh
    return clone
