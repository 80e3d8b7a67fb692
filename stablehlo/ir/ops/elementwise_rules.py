"""Verifiers and type inference of the elementwise ops (see shape_inference.py).

Elementwise ops need identical operand and result shapes (no implicit
broadcasting) and, except where the spec says otherwise, identical element
types. Quantized operands may differ in their scales and zero points only
(the spec's ``baseline_type``). Each op also restricts which element types
it accepts (the "Inputs" tables of the spec).
"""
from __future__ import annotations

from typing import Callable

from stablehlo.ir.ops.base import op_error
from stablehlo.ir.ops.shape_inference import (
    Rule, baseline, bit_width, check_element_kind, dims_compatible, enum_attr,
    expect_num_operands, int_attr, is_complex, is_float, is_int, is_pred, is_quant,
    is_signed_int, is_unsigned_int, merge_shapes, shapes_compatible, tensor_operand, tensor_result,
)
from stablehlo.ir.types import ComplexType, FloatType, I1, TensorType


# ---------------------------------------------------------------------------
# Element-type kinds, as (description, predicate)

def _kind(description: str, *preds: Callable) -> tuple:
    return description, lambda e: any(p(e) for p in preds)


ANY = _kind("any element type", lambda e: True)
FLOAT_COMPLEX_QUANT = _kind("a float, complex or quantized type", is_float, is_complex, is_quant)
FLOAT_QUANT = _kind("a float or quantized type", is_float, is_quant)
FLOAT_COMPLEX = _kind("a float or complex type", is_float, is_complex)
FLOAT = _kind("a float type", is_float)
INT = _kind("an integer type", is_int)
PRED_INT = _kind("a boolean or integer type", is_pred, is_int)
NUMERIC = _kind("an integer, float, complex or quantized type",
                is_int, is_float, is_complex, is_quant)
SIGNED_NUMERIC = _kind("a signed integer, float, complex or quantized type",
                       is_signed_int, is_float, is_complex, is_quant)
NON_QUANT = _kind("a non-quantized type", lambda e: not is_quant(e))


def same_shape_operands(op, count: int) -> list:
    """``count`` tensor operands whose shapes are compatible with operand #0's."""
    expect_num_operands(op, count)
    types = [tensor_operand(op, i) for i in range(count)]
    for i, t in enumerate(types[1:], start=1):
        if not shapes_compatible(t.shape, types[0].shape):
            raise op_error(op, f"operand #{i} has type {t}, expected "
                               f"{t.with_shape(types[0].shape)} (all operands and results "
                               f"must have the same shape)")
    return types


def _check_same_element(op, types: list) -> None:
    for i, t in enumerate(types[1:], start=1):
        if baseline(t.element_type) != baseline(types[0].element_type):
            raise op_error(op, f"operand #{i} has type {t}, expected element type "
                               f"{types[0].element_type} (all operands and results must have "
                               f"the same element type)")


def _refined(types: list) -> tuple:
    shape = types[0].shape
    for t in types[1:]:
        shape = merge_shapes(shape, t.shape)
    return shape


def same_type_rule(arity: int, kind: tuple) -> Rule:
    """Operands and result of one type (up to quantization parameters)."""
    description, pred = kind

    def infer(op):
        types = same_shape_operands(op, arity)
        _check_same_element(op, types)
        check_element_kind(op, "operand #0", types[0], description, pred)
        return [types[0].with_shape(_refined(types))]

    return Rule(infer, compare="baseline")


def _check_quant_agreement(op) -> None:
    """A quantized elementwise op is quantized throughout (spec: add C2)."""
    types = [v.type for v in op.operands] + [r.type for r in op.results]
    quant = [isinstance(t, TensorType) and is_quant(t.element_type) for t in types]
    if any(quant) and not all(quant):
        raise op_error(op, "quantized and non-quantized tensors cannot be mixed: "
                           + ", ".join(str(t) for t in types))


def _quant_same_type_rule(arity: int, kind: tuple) -> Rule:
    rule = same_type_rule(arity, kind)
    rule.check = _check_quant_agreement
    return rule


# ---------------------------------------------------------------------------
# Ops whose result element type differs from the operand's

def _part_of_complex_rule(kind: tuple) -> Rule:
    """abs, real, imag: complex<E> operands give E results."""
    description, pred = kind

    def infer(op):
        (t,) = same_shape_operands(op, 1)
        check_element_kind(op, "operand #0", t, description, pred)
        e = t.element_type
        return [t.with_element_type(e.element_type if is_complex(e) else e)]

    return Rule(infer, compare="baseline")


def _predicate_rule(kind: tuple) -> Rule:
    """is_finite and chlo.is_inf & co: boolean results."""
    description, pred = kind

    def infer(op):
        (t,) = same_shape_operands(op, 1)
        check_element_kind(op, "operand #0", t, description, pred)
        return [t.with_element_type(I1)]

    return Rule(infer)


def _infer_complex(op):
    types = same_shape_operands(op, 2)
    _check_same_element(op, types)
    e = types[0].element_type
    if not (isinstance(e, FloatType) and e.name in ("f32", "f64")):
        raise op_error(op, f"operand #0 has element type {e}, expected f32 or f64")
    return [types[0].with_shape(_refined(types)).with_element_type(ComplexType(e))]


def _check_convert(op):
    t = tensor_operand(op, 0)
    r = tensor_result(op)
    if not shapes_compatible(t.shape, r.shape):
        raise op_error(op, f"result #0 has type {r}, expected the shape of operand {t} "
                           f"(convert keeps the shape)")
    for what, x in (("operand #0", t), ("result #0", r)):
        if is_quant(x.element_type):
            raise op_error(op, f"{what} has quantized type {x}; use uniform_quantize or "
                               f"uniform_dequantize instead")


def _check_bitcast_convert(op):
    t = tensor_operand(op, 0)
    r = tensor_result(op)
    e_in, e_out = (_storage(t.element_type), _storage(r.element_type))
    if is_complex(e_in) != is_complex(e_out):
        raise op_error(op, f"cannot bitcast between complex and non-complex types "
                           f"({t} -> {r})")
    try:
        b_in, b_out = bit_width(e_in), bit_width(e_out)
    except ValueError as exc:  # an element type we keep opaque has no known width
        raise op_error(op, f"cannot bitcast {t} -> {r}: {exc}") from None
    if b_in == b_out:
        expected_rank, ok = t.rank, shapes_compatible(t.shape, r.shape)
    elif b_out < b_in:
        expected_rank = t.rank + 1
        ok = (r.rank == expected_rank and shapes_compatible(t.shape, r.shape[:-1])
              and dims_compatible(r.shape[-1], b_in // b_out) and b_in % b_out == 0)
    else:
        expected_rank = t.rank - 1
        ok = (t.rank >= 1 and r.rank == expected_rank
              and shapes_compatible(t.shape[:-1], r.shape)
              and dims_compatible(t.shape[-1], b_out // b_in) and b_out % b_in == 0)
    if not ok:
        raise op_error(op, f"cannot bitcast {t} ({b_in}-bit elements) to {r} "
                           f"({b_out}-bit elements): the shapes do not correspond")


def _storage(e):
    return e.storage_type if is_quant(e) else e


def _infer_select(op):
    expect_num_operands(op, 3)
    pred = tensor_operand(op, 0)
    on_true, on_false = tensor_operand(op, 1), tensor_operand(op, 2)
    if pred.element_type != I1:
        raise op_error(op, f"operand #0 (pred) has type {pred}, expected element type i1")
    if not shapes_compatible(on_true.shape, on_false.shape):
        raise op_error(op, f"operand #2 has type {on_false}, expected shape of {on_true} "
                           f"(on_true and on_false must have the same shape)")
    if baseline(on_true.element_type) != baseline(on_false.element_type):
        raise op_error(op, f"operand #2 has type {on_false}, expected element type "
                           f"{on_true.element_type} (on_true and on_false must agree)")
    if pred.rank != 0 and not shapes_compatible(pred.shape, on_true.shape):
        raise op_error(op, f"operand #0 (pred) has type {pred}, expected a 0-d tensor or "
                           f"the shape of {on_true}")
    shape = merge_shapes(on_true.shape, on_false.shape)
    if pred.rank != 0:
        shape = merge_shapes(shape, pred.shape)
    return [on_true.with_shape(shape)]


def _infer_clamp(op):
    expect_num_operands(op, 3)
    lo, x, hi = (tensor_operand(op, i) for i in range(3))
    for i, bound in ((0, lo), (2, hi)):
        if bound.rank != 0 and not shapes_compatible(bound.shape, x.shape):
            raise op_error(op, f"operand #{i} has type {bound}, expected a 0-d tensor or "
                               f"the shape of operand #1 {x}")
        if baseline(bound.element_type) != baseline(x.element_type):
            raise op_error(op, f"operand #{i} has type {bound}, expected element type "
                               f"{x.element_type} (the operand's)")
    return [x]


_COMPARE_DIRECTIONS = ("EQ", "NE", "GE", "GT", "LE", "LT")
_COMPARE_TYPES = ("NOTYPE", "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED")


def _infer_compare(op):
    types = same_shape_operands(op, 2)
    _check_same_element(op, types)
    enum_attr(op, "comparison_direction", "comparison_direction", _COMPARE_DIRECTIONS)
    kind = enum_attr(op, "compare_type", "comparison_type", _COMPARE_TYPES, default="NOTYPE")
    e = types[0].element_type
    e = e.storage_type if is_quant(e) and kind in ("SIGNED", "UNSIGNED") else e
    allowed = _allowed_compare_types(e)
    if kind != "NOTYPE" and kind not in allowed:
        raise op_error(op, f"compare_type {kind} does not fit element type {e}, "
                           f"expected {' or '.join(allowed)}")
    return [types[0].with_shape(_refined(types)).with_element_type(I1)]


def _allowed_compare_types(e) -> tuple:
    if is_signed_int(e):
        return ("SIGNED",)
    if is_unsigned_int(e) or is_pred(e):
        return ("UNSIGNED",)
    if is_float(e) or is_quant(e):
        return ("FLOAT", "TOTALORDER")
    if is_complex(e):
        return ("FLOAT",)
    return ("NOTYPE",)


def _infer_reduce_precision(op):
    (t,) = same_shape_operands(op, 1)
    check_element_kind(op, "operand #0", t, *FLOAT_QUANT)
    if int_attr(op, "exponent_bits") < 1:
        raise op_error(op, f"exponent_bits is {int_attr(op, 'exponent_bits')}, expected >= 1")
    if int_attr(op, "mantissa_bits") < 0:
        raise op_error(op, f"mantissa_bits is {int_attr(op, 'mantissa_bits')}, expected >= 0")
    return [t]


def _check_uniform_quantize(op):
    t = tensor_operand(op, 0)
    r = tensor_result(op)
    if not shapes_compatible(t.shape, r.shape):
        raise op_error(op, f"result #0 has type {r}, expected the shape of operand {t}")
    if not is_quant(r.element_type):
        raise op_error(op, f"result #0 has type {r}, expected a quantized element type")
    e = t.element_type
    expressed = e.expressed_type if is_quant(e) else e
    if not (is_float(e) or is_quant(e)):
        raise op_error(op, f"operand #0 has type {t}, expected a float or quantized element "
                           f"type")
    if r.element_type.expressed_type != expressed:
        raise op_error(op, f"result #0 has expressed type {r.element_type.expressed_type}, "
                           f"expected {expressed} (the operand's)")


def _infer_uniform_dequantize(op):
    (t,) = same_shape_operands(op, 1)
    if not is_quant(t.element_type):
        raise op_error(op, f"operand #0 has type {t}, expected a quantized element type")
    return [t.with_element_type(t.element_type.expressed_type)]


# ---------------------------------------------------------------------------
# The table the op declarations use

UNARY_RULES = {
    "cbrt": FLOAT_COMPLEX_QUANT, "cosine": FLOAT_COMPLEX_QUANT,
    "exponential": FLOAT_COMPLEX_QUANT, "exponential_minus_one": FLOAT_COMPLEX_QUANT,
    "log": FLOAT_COMPLEX_QUANT, "log_plus_one": FLOAT_COMPLEX_QUANT,
    "logistic": FLOAT_COMPLEX_QUANT, "rsqrt": FLOAT_COMPLEX_QUANT, "sine": FLOAT_COMPLEX_QUANT,
    "sqrt": FLOAT_COMPLEX_QUANT, "tan": FLOAT_COMPLEX_QUANT, "tanh": FLOAT_COMPLEX_QUANT,
    "ceil": FLOAT_QUANT, "floor": FLOAT_QUANT, "round_nearest_afz": FLOAT_QUANT,
    "round_nearest_even": FLOAT_QUANT, "count_leading_zeros": INT, "popcnt": INT,
    "negate": NUMERIC, "not": PRED_INT, "sign": SIGNED_NUMERIC,
}
BINARY_RULES = {
    "add": ANY, "atan2": FLOAT_COMPLEX_QUANT, "divide": NUMERIC, "maximum": ANY,
    "minimum": ANY, "multiply": ANY, "power": NUMERIC, "remainder": NUMERIC,
    "subtract": NUMERIC, "shift_left": INT, "shift_right_arithmetic": INT,
    "shift_right_logical": INT, "and": PRED_INT, "or": PRED_INT, "xor": PRED_INT,
}


def rule_for(mnemonic: str) -> Rule:
    """The Rule of a stablehlo elementwise op by mnemonic."""
    if mnemonic in UNARY_RULES:
        return _quant_same_type_rule(1, UNARY_RULES[mnemonic])
    if mnemonic in BINARY_RULES:
        return _quant_same_type_rule(2, BINARY_RULES[mnemonic])
    return SPECIAL_RULES[mnemonic]


SPECIAL_RULES = {
    "abs": _part_of_complex_rule(SIGNED_NUMERIC),
    "real": _part_of_complex_rule(FLOAT_COMPLEX),
    "imag": _part_of_complex_rule(FLOAT_COMPLEX),
    "is_finite": _predicate_rule(FLOAT_QUANT),
    "complex": Rule(_infer_complex),
    "convert": Rule(check=_check_convert),
    "bitcast_convert": Rule(check=_check_bitcast_convert),
    "select": Rule(_infer_select, compare="baseline"),
    "clamp": Rule(_infer_clamp, compare="baseline"),
    "compare": Rule(_infer_compare),
    "reduce_precision": Rule(_infer_reduce_precision, compare="baseline"),
    "uniform_quantize": Rule(check=_check_uniform_quantize),
    "uniform_dequantize": Rule(_infer_uniform_dequantize),
}

# CHLO's non-broadcasting elementwise ops (see chlo.py)
CHLO_RULES = {
    "is_inf": _predicate_rule(FLOAT), "is_neg_inf": _predicate_rule(FLOAT),
    "is_pos_inf": _predicate_rule(FLOAT),
    "next_after": same_type_rule(2, FLOAT), "polygamma": same_type_rule(2, FLOAT),
    "zeta": same_type_rule(2, FLOAT), "mulhi": same_type_rule(2, INT),
    "bessel_i1e": same_type_rule(1, FLOAT), "digamma": same_type_rule(1, FLOAT),
    "erf_inv": same_type_rule(1, FLOAT), "lgamma": same_type_rule(1, FLOAT),
    "erf": same_type_rule(1, FLOAT), "erfc": same_type_rule(1, FLOAT),
}


def chlo_rule_for(mnemonic: str) -> Rule:
    """CHLO unary math defaults to float-or-complex operands of one type."""
    return CHLO_RULES.get(mnemonic) or same_type_rule(1, FLOAT_COMPLEX)
