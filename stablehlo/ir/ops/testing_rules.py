"""Verifiers of the ``check.*`` assertions and ``interpreter.*`` helpers.

A check compares an operand with another operand or with a constant of the
same type (quantized operands compare with constants of their storage type).
``interpreter.run_parallel``'s program symbols are resolved by verify.py.
"""
from __future__ import annotations

from stablehlo.ir.attributes import DenseElementsAttr
from stablehlo.ir.ops.base import op_error
from stablehlo.ir.ops.shape_inference import (
    Rule, expect_num_operands, expect_num_results, is_quant, shapes_compatible, tensor_operand,
)


def _check_pair(op):
    expect_num_operands(op, 2)
    expect_num_results(op, 0)
    a, b = tensor_operand(op, 0), tensor_operand(op, 1)
    if not shapes_compatible(a.shape, b.shape) or a.element_type != b.element_type:
        raise op_error(op, f"operand #1 has type {b}, expected {a} (the checked value's type)")


def _check_const(op):
    expect_num_operands(op, 1)
    expect_num_results(op, 0)
    t = tensor_operand(op, 0)
    value = op.attributes.get("value")
    if not isinstance(value, DenseElementsAttr):
        raise op_error(op, f"attribute 'value' must be a dense elements attribute, got {value}")
    elem = t.element_type
    expected = {elem, elem.storage_type} if is_quant(elem) else {elem}
    if not shapes_compatible(value.type.shape, t.shape) or value.type.element_type not in expected:
        raise op_error(op, f"attribute 'value' has type {value.type}, expected {t} (the "
                           f"checked value's type)")


def _check_one_operand(op):
    expect_num_operands(op, 1)
    expect_num_results(op, 0)


def _infer_probe(op):
    expect_num_operands(op, 1)
    return [op.operands[0].type]


RULES = {
    "check.expect_eq": Rule(check=_check_pair),
    "check.expect_almost_eq": Rule(check=_check_pair),
    "check.expect_close": Rule(check=_check_pair),
    "check.expect_eq_const": Rule(check=_check_const),
    "check.expect_almost_eq_const": Rule(check=_check_const),
    "check.expect_serialized_eq": Rule(check=_check_one_operand),
    "interpreter.probe": Rule(_infer_probe),
    "interpreter.print": Rule(check=_check_one_operand),
}


def rule_for(name: str):
    """The Rule declared for ``name`` in this file, or None."""
    return RULES.get(name)
