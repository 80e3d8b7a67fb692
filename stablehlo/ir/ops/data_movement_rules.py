"""Verifiers and type inference of the data-movement ops (see shape_inference.py).

Covers constants, iota, broadcasts, reshapes, transposes, slicing, padding,
concatenation, tuples and the dynamic-shape variants. Gather and scatter live
in indexing_rules.py.
"""
from __future__ import annotations

from stablehlo.ir.attributes import DenseElementsAttr
from stablehlo.ir.ops.base import op_error
from stablehlo.ir.ops.indexing_rules import RULES as INDEXING_RULES
from stablehlo.ir.ops.shape_inference import (
    Rule, check_dims, check_in_range, check_positive, check_size, constant_ints,
    dims_compatible, expect_num_operands, fmt_shape, int_attr, int_list, is_complex, is_float,
    is_index_like, is_int, is_quant, shapes_compatible, tensor_operand, tensor_result,
)
from stablehlo.ir.types import I32, TensorType, TupleType


def _same_element(a, b) -> bool:
    """Equal element types, allowing per-axis quantization parameters to differ."""
    if is_quant(a) and is_quant(b) and a.axis is not None:
        return (a.storage_type, a.expressed_type) == (b.storage_type, b.expressed_type)
    return a == b


def _check_same_element(op, what: str, t: TensorType, expected) -> None:
    if not _same_element(t.element_type, expected):
        raise op_error(op, f"{what} has type {t}, expected element type {expected}")


# ---------------------------------------------------------------------------
# constant, iota

def _infer_constant(op):
    expect_num_operands(op, 0)
    value = op.attributes.get("value")
    if not isinstance(value, DenseElementsAttr):
        raise op_error(op, f"attribute 'value' must be a dense elements attribute, got {value}")
    if op.results and _is_quantized_view(value.type, op.results[0].type):
        return [op.results[0].type]
    return [value.type]


def _is_quantized_view(value_type, result_type) -> bool:
    """A quantized constant may spell its value with the storage type."""
    return (isinstance(result_type, TensorType) and is_quant(result_type.element_type)
            and result_type.element_type.storage_type == value_type.element_type
            and tuple(result_type.shape) == tuple(value_type.shape))


def _check_iota(op):
    expect_num_operands(op, 0)
    r = tensor_result(op)
    if r.rank == 0:
        raise op_error(op, f"result #0 has type {r}, expected a tensor of rank >= 1")
    check_in_range(op, "attribute 'iota_dimension'", [int_attr(op, "iota_dimension")], 0,
                   r.rank)
    e = r.element_type
    if not (is_int(e) or is_float(e) or is_complex(e) or is_quant(e)):
        raise op_error(op, f"result #0 has element type {e}, expected an integer, float, "
                           f"complex or quantized type")


def _check_dynamic_iota(op):
    expect_num_operands(op, 1)
    shape = _shape_operand(op, 0, "output_shape")
    r = tensor_result(op)
    if shape.shape[0] is not None and shape.shape[0] != r.rank:
        raise op_error(op, f"result #0 has rank {r.rank}, expected {shape.shape[0]} "
                           f"(the size of output_shape)")
    check_in_range(op, "attribute 'iota_dimension'", [int_attr(op, "iota_dimension")], 0,
                   max(r.rank, 1))
    _check_constant_shape(op, 0, "output_shape", r)


def _shape_operand(op, index: int, what: str) -> TensorType:
    """Operand ``index``: a 1-D integer/index tensor of a shape or per-dimension values."""
    t = tensor_operand(op, index, f"operand #{index} ({what})")
    if t.rank != 1 or not is_index_like(t.element_type):
        raise op_error(op, f"operand #{index} ({what}) has type {t}, expected a 1-D "
                           f"integer or index tensor")
    return t


def _check_constant_shape(op, index: int, what: str, result: TensorType) -> None:
    """When operand ``index`` is a constant shape, the result must have that shape."""
    dims = constant_ints(op.operands[index])
    if dims is not None and not shapes_compatible(result.shape, dims):
        raise op_error(op, f"result #0 has type {result}, expected shape {dims} (the value "
                           f"of operand #{index} ({what}))")


# ---------------------------------------------------------------------------
# broadcasts

def _check_broadcast_dims(op, operand: TensorType, result: TensorType, dims: list) -> None:
    what = "attribute 'broadcast_dimensions'"
    check_size(op, what, dims, operand.rank, f"the rank of operand {operand}")
    check_dims(op, what, dims, result.rank)
    for i, d in enumerate(dims):
        size = operand.shape[i]
        if size != 1 and not dims_compatible(size, result.shape[d]):
            raise op_error(op, f"operand dimension {i} has size {size}, expected 1 or "
                               f"{result.shape[d]} (result dimension {d}, via "
                               f"broadcast_dimensions)")
    _check_same_element(op, "result #0", result, operand.element_type)


def _check_broadcast_in_dim(op):
    expect_num_operands(op, 1)
    operand, result = tensor_operand(op, 0), tensor_result(op)
    _check_broadcast_dims(op, operand, result, int_list(op, "broadcast_dimensions"))


def _check_dynamic_broadcast_in_dim(op):
    expect_num_operands(op, 2)
    operand, result = tensor_operand(op, 0), tensor_result(op)
    shape = _shape_operand(op, 1, "output_dimensions")
    if shape.shape[0] is not None and shape.shape[0] != result.rank:
        raise op_error(op, f"result #0 has rank {result.rank}, expected {shape.shape[0]} "
                           f"(the size of output_dimensions)")
    _check_broadcast_dims(op, operand, result, int_list(op, "broadcast_dimensions"))
    _check_constant_shape(op, 1, "output_dimensions", result)
    expanding = int_list(op, "known_expanding_dimensions", [])
    nonexpanding = int_list(op, "known_nonexpanding_dimensions", [])
    check_dims(op, "known_expanding_dimensions + known_nonexpanding_dimensions",
               expanding + nonexpanding, operand.rank)


def _infer_broadcast(op):
    expect_num_operands(op, 1)
    operand = tensor_operand(op, 0)
    sizes = int_list(op, "broadcast_sizes")
    check_in_range(op, "attribute 'broadcast_sizes'", sizes, 0, 1 << 62)
    return [operand.with_shape(tuple(sizes) + tuple(operand.shape))]


# ---------------------------------------------------------------------------
# reshape, transpose, reverse

def _check_reshape(op):
    expect_num_operands(op, 1)
    operand, result = tensor_operand(op, 0), tensor_result(op)
    _check_same_element(op, "result #0", result, operand.element_type)
    if operand.is_static and result.is_static and operand.num_elements != result.num_elements:
        raise op_error(op, f"result #0 has type {result} with {result.num_elements} elements, "
                           f"expected {operand.num_elements} (the operand {operand} has "
                           f"that many)")


def _check_dynamic_reshape(op):
    expect_num_operands(op, 2)
    operand, result = tensor_operand(op, 0), tensor_result(op)
    shape = _shape_operand(op, 1, "output_shape")
    _check_same_element(op, "result #0", result, operand.element_type)
    if shape.shape[0] is not None and shape.shape[0] != result.rank:
        raise op_error(op, f"result #0 has rank {result.rank}, expected {shape.shape[0]} "
                           f"(the size of output_shape)")
    if operand.is_static and result.is_static and operand.num_elements != result.num_elements:
        raise op_error(op, f"result #0 has type {result}, expected {operand.num_elements} "
                           f"elements like the operand {operand}")
    _check_constant_shape(op, 1, "output_shape", result)


def _infer_transpose(op):
    expect_num_operands(op, 1)
    operand = tensor_operand(op, 0)
    perm = int_list(op, "permutation")
    what = "attribute 'permutation'"
    check_size(op, what, perm, operand.rank, f"the rank of operand {operand}")
    check_dims(op, what, perm, operand.rank)
    return [operand.with_shape(tuple(operand.shape[p] for p in perm))]


def _infer_reverse(op):
    expect_num_operands(op, 1)
    operand = tensor_operand(op, 0)
    check_dims(op, "attribute 'dimensions'", int_list(op, "dimensions"), operand.rank)
    return [operand]


# ---------------------------------------------------------------------------
# concatenate, pad, slices

def _infer_concatenate(op):
    if not op.operands:
        raise op_error(op, "expected at least 1 operand, got 0")
    types = [tensor_operand(op, i) for i in range(len(op.operands))]
    first = types[0]
    dim = int_attr(op, "dimension")
    check_in_range(op, "attribute 'dimension'", [dim], 0, max(first.rank, 0))
    shape = list(first.shape)
    for i, t in enumerate(types[1:], start=1):
        if t.rank != first.rank:
            raise op_error(op, f"operand #{i} has type {t}, expected rank {first.rank} "
                               f"(the rank of operand #0 {first})")
        if t.element_type != first.element_type:
            raise op_error(op, f"operand #{i} has type {t}, expected element type "
                               f"{first.element_type} (operand #0's)")
        for d in range(first.rank):
            if d != dim and not dims_compatible(t.shape[d], shape[d]):
                raise op_error(op, f"operand #{i} has type {t}, expected size {shape[d]} in "
                                   f"dimension {d} (all but dimension {dim} must match)")
            if d != dim and shape[d] is None:
                shape[d] = t.shape[d]
        shape[dim] = None if shape[dim] is None or t.shape[dim] is None else \
            shape[dim] + t.shape[dim]
    return [first.with_shape(shape)]


def _infer_pad(op):
    expect_num_operands(op, 2)
    operand, value = tensor_operand(op, 0), tensor_operand(op, 1)
    if value.rank != 0 or value.element_type != operand.element_type:
        raise op_error(op, f"operand #1 (padding_value) has type {value}, expected "
                           f"tensor<{operand.element_type}>")
    lows, highs, interiors = (int_list(op, name) for name in
                              ("edge_padding_low", "edge_padding_high", "interior_padding"))
    for name, values in (("edge_padding_low", lows), ("edge_padding_high", highs),
                         ("interior_padding", interiors)):
        check_size(op, f"attribute '{name}'", values, operand.rank,
                   f"the rank of operand {operand}")
    return [operand.with_shape(_padded_shape(op, operand, lows, highs, interiors))]


def _padded_shape(op, operand, lows, highs, interiors) -> list:
    check_in_range(op, "attribute 'interior_padding'", interiors, 0, 1 << 62)
    shape = []
    for d, size in enumerate(operand.shape):
        if size is None:
            shape.append(None)
            continue
        padded = size + lows[d] + highs[d] + max(size - 1, 0) * interiors[d]
        if padded < 0:
            raise op_error(op, f"dimension {d} padded to negative size {padded} "
                               f"(size {size}, low {lows[d]}, high {highs[d]})")
        shape.append(padded)
    return shape


def _infer_slice(op):
    expect_num_operands(op, 1)
    operand = tensor_operand(op, 0)
    starts, limits = int_list(op, "start_indices"), int_list(op, "limit_indices")
    strides = int_list(op, "strides", [1] * operand.rank)
    for name, values in (("start_indices", starts), ("limit_indices", limits),
                         ("strides", strides)):
        check_size(op, f"attribute '{name}'", values, operand.rank,
                   f"the rank of operand {operand}")
    return [operand.with_shape(_sliced_shape(op, operand, starts, limits, strides))]


def _sliced_shape(op, operand, starts, limits, strides) -> list:
    check_positive(op, "attribute 'strides'", strides)
    shape = []
    for d, size in enumerate(operand.shape):
        start, limit = starts[d], limits[d]
        upper = size if size is not None else limit
        if not 0 <= start <= limit <= upper:
            raise op_error(op, f"slice of dimension {d} is [{start}:{limit}], expected "
                               f"0 <= start <= limit <= {size} (operand {operand})")
        shape.append(-(-(limit - start) // strides[d]))
    return shape


def _start_index_operands(op, first: int, rank: int) -> None:
    """Operands ``first..first+rank-1`` are 0-d integer tensors of one type."""
    count = len(op.operands) - first
    if count != rank:
        raise op_error(op, f"expected {rank} start index operand(s) (the operand's rank), "
                           f"got {count}")
    types = [tensor_operand(op, first + i) for i in range(rank)]
    for i, t in enumerate(types):
        if t.rank != 0 or not is_int(t.element_type):
            raise op_error(op, f"operand #{first + i} (start index) has type {t}, expected a "
                               f"0-d integer tensor")
        if t != types[0]:
            raise op_error(op, f"operand #{first + i} (start index) has type {t}, expected "
                               f"{types[0]} (all start indices must have the same type)")


def _infer_dynamic_slice(op):
    operand = tensor_operand(op, 0)
    _start_index_operands(op, 1, operand.rank)
    sizes = int_list(op, "slice_sizes")
    check_size(op, "attribute 'slice_sizes'", sizes, operand.rank,
               f"the rank of operand {operand}")
    for d, (want, size) in enumerate(zip(sizes, operand.shape)):
        if want < 0 or (size is not None and want > size):
            raise op_error(op, f"attribute 'slice_sizes' is {sizes}, expected "
                               f"0 <= slice_sizes <= {fmt_shape(operand.shape)} "
                               f"(dimension {d})")
    return [operand.with_shape(sizes)]


def _infer_dynamic_update_slice(op):
    operand = tensor_operand(op, 0)
    update = tensor_operand(op, 1, "operand #1 (update)")
    if update.element_type != operand.element_type:
        raise op_error(op, f"operand #1 (update) has type {update}, expected element type "
                           f"{operand.element_type} (the operand's)")
    if update.rank != operand.rank:
        raise op_error(op, f"operand #1 (update) has type {update}, expected rank "
                           f"{operand.rank} (the operand's)")
    for d, (u, s) in enumerate(zip(update.shape, operand.shape)):
        if u is not None and s is not None and u > s:
            raise op_error(op, f"operand #1 (update) has type {update}, larger than operand "
                               f"{operand} in dimension {d}")
    _start_index_operands(op, 2, operand.rank)
    return [operand]


def _check_dynamic_pad(op):
    expect_num_operands(op, 5)
    operand, value = tensor_operand(op, 0), tensor_operand(op, 1)
    result = tensor_result(op)
    if value.rank != 0 or value.element_type != operand.element_type:
        raise op_error(op, f"operand #1 (padding_value) has type {value}, expected "
                           f"tensor<{operand.element_type}>")
    _check_per_dimension_operands(
        op, operand, result,
        ((2, "edge_padding_low"), (3, "edge_padding_high"), (4, "interior_padding")),
        _padded_shape, "the constant paddings")


def _check_real_dynamic_slice(op):
    expect_num_operands(op, 4)
    operand, result = tensor_operand(op, 0), tensor_result(op)
    _check_per_dimension_operands(
        op, operand, result, ((1, "start_indices"), (2, "limit_indices"), (3, "strides")),
        _sliced_shape, "the constant slice bounds")


def _check_per_dimension_operands(op, operand, result, operands, shape_of, source: str):
    """dynamic_pad / real_dynamic_slice: each operand in ``operands`` holds one value
    per dimension; when all are constants, they fix the result shape."""
    for index, name in operands:
        t = _shape_operand(op, index, name)
        if t.shape[0] is not None and t.shape[0] != operand.rank:
            raise op_error(op, f"operand #{index} ({name}) has type {t}, expected "
                               f"{operand.rank} elements (the operand's rank)")
    if result.rank != operand.rank or result.element_type != operand.element_type:
        raise op_error(op, f"result #0 has type {result}, expected rank {operand.rank} and "
                           f"element type {operand.element_type}")
    values = [constant_ints(op.operands[index]) for index, _ in operands]
    if all(v is not None for v in values):
        shape = shape_of(op, operand, *values)
        if not shapes_compatible(result.shape, shape):
            raise op_error(op, f"result #0 has type {result}, expected shape {shape} (from "
                               f"{source})")


# ---------------------------------------------------------------------------
# tuples and dimension sizes

def _infer_tuple(op):
    return [TupleType(tuple(v.type for v in op.operands))]


def _infer_get_tuple_element(op):
    expect_num_operands(op, 1)
    t = op.operands[0].type
    if not isinstance(t, TupleType):
        raise op_error(op, f"operand #0 has type {t}, expected a tuple")
    index = int_attr(op, "index")
    check_in_range(op, "attribute 'index'", [index], 0, len(t.types))
    return [t.types[index]]


def _infer_get_dimension_size(op):
    expect_num_operands(op, 1)
    operand = tensor_operand(op, 0)
    check_in_range(op, "attribute 'dimension'", [int_attr(op, "dimension")], 0, operand.rank)
    return [TensorType((), I32)]


def _check_set_dimension_size(op):
    expect_num_operands(op, 2)
    operand, size = tensor_operand(op, 0), tensor_operand(op, 1)
    result = tensor_result(op)
    dim = int_attr(op, "dimension")
    check_in_range(op, "attribute 'dimension'", [dim], 0, operand.rank)
    if size.rank != 0 or size.element_type != I32:
        raise op_error(op, f"operand #1 (size) has type {size}, expected tensor<i32>")
    if result.rank != operand.rank or result.element_type != operand.element_type:
        raise op_error(op, f"result #0 has type {result}, expected rank {operand.rank} and "
                           f"element type {operand.element_type}")


def _check_torch_index_select(op):
    expect_num_operands(op, 2)
    operand, index = tensor_operand(op, 0), tensor_operand(op, 1)
    dim, batch_dims = int_attr(op, "dim"), int_attr(op, "batch_dims")
    check_in_range(op, "attribute 'dim'", [dim], 0, operand.rank)
    check_in_range(op, "attribute 'batch_dims'", [batch_dims], 0, index.rank + 1)
    _check_same_element(op, "result #0", tensor_result(op), operand.element_type)


RULES = {
    "constant": Rule(_infer_constant),
    "iota": Rule(check=_check_iota),
    "dynamic_iota": Rule(check=_check_dynamic_iota),
    "broadcast_in_dim": Rule(check=_check_broadcast_in_dim),
    "dynamic_broadcast_in_dim": Rule(check=_check_dynamic_broadcast_in_dim),
    "broadcast": Rule(_infer_broadcast),
    "reshape": Rule(check=_check_reshape),
    "dynamic_reshape": Rule(check=_check_dynamic_reshape),
    "transpose": Rule(_infer_transpose, compare="storage"),
    "reverse": Rule(_infer_reverse),
    "concatenate": Rule(_infer_concatenate),
    "pad": Rule(_infer_pad),
    "dynamic_pad": Rule(check=_check_dynamic_pad),
    "slice": Rule(_infer_slice),
    "real_dynamic_slice": Rule(check=_check_real_dynamic_slice),
    "dynamic_slice": Rule(_infer_dynamic_slice),
    "dynamic_update_slice": Rule(_infer_dynamic_update_slice),
    "tuple": Rule(_infer_tuple),
    "get_tuple_element": Rule(_infer_get_tuple_element),
    "get_dimension_size": Rule(_infer_get_dimension_size),
    "set_dimension_size": Rule(check=_check_set_dimension_size),
    "torch_index_select": Rule(check=_check_torch_index_select),
}


def rule_for(mnemonic: str):
    """The Rule of a data-movement op (gather/scatter come from indexing_rules)."""
    return RULES.get(mnemonic) or INDEXING_RULES.get(mnemonic)

