"""Pretty syntaxes of elementwise-style ops: same_type, functional, select, compare,
reduce_precision, chlo_elementwise, nullary.

    %0 = stablehlo.add %a, %b : tensor<4xf32>                     (same_type)
    %0 = stablehlo.convert %a : (tensor<4xf32>) -> tensor<4xf64>   (same_type, mixed types)
    %0 = stablehlo.reshape %a : (tensor<4xf32>) -> tensor<2x2xf32> (functional)
    %0 = stablehlo.select %p, %a, %b : tensor<4xi1>, tensor<4xf32>
    %0 = stablehlo.compare LT, %a, %b, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
    %0 = stablehlo.reduce_precision %a, format = e5m10 : tensor<4xf32>
    %0 = chlo.next_after %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    %0 = stablehlo.replica_id : tensor<ui32>
"""
from __future__ import annotations

import re

from stablehlo.ir.attributes import EnumAttr, IntegerAttr
from stablehlo.ir.types import I32, ComplexType, FunctionType, TensorType
from stablehlo.text.formats import (
    elided_defaults,
    has_attrs,
    make_op,
    parse_trailing_functional,
    print_functional_tail,
    register,
    same_or_functional,
)

_EXP_MANT_RE = re.compile(r"e(\d+)m(\d+)$")


# -- same_type ---------------------------------------------------------------------------

def parse_same_type(p, name, loc, num_results):
    refs = p.parse_operands()
    attrs = p.parse_optional_attr_dict()
    operands, results = p.parse_functional_or_single(refs, name)
    return make_op(name, operands, results, attrs, loc)


def print_same_type(pr, op):
    pr.w(f"{op.name} {pr.vs(op.operands)}")
    pr.attr_dict(op, elided_defaults(op))
    pr.w(" : " + same_or_functional(pr, op))


# -- complex: ``: tensor<2xcomplex<f32>>`` stands for (tensor<2xf32>, tensor<2xf32>) -> it ----

def parse_complex(p, name, loc, num_results):
    refs = p.parse_operands()
    attrs = p.parse_optional_attr_dict()
    p.expect(":", f"after operands of '{name}'")
    token = p.i
    typ = p.parse_type(f"of '{name}'")
    if isinstance(typ, FunctionType):
        return make_op(name, p.resolve_all(refs, typ.inputs, token, name), typ.results,
                       attrs, loc)
    part = _real_part_type(typ)
    if part is None:
        raise p.error_at(token, f"expected a complex tensor type for '{name}', got {typ}")
    return make_op(name, p.resolve_all(refs, [part, part], token, name), [typ], attrs, loc)


def _real_part_type(typ):
    if isinstance(typ, TensorType) and isinstance(typ.element_type, ComplexType):
        return typ.with_element_type(typ.element_type.element_type)
    return None


def print_complex(pr, op):
    pr.w(f"{op.name} {pr.vs(op.operands)}")
    pr.attr_dict(op)
    types = op.operand_types
    result = op.result_types[0] if len(op.results) == 1 else None
    part = _real_part_type(result)
    if part is not None and len(types) == 2 and types[0] == types[1] == part:
        pr.w(" : " + pr.t(result))
    else:
        pr.w(" : " + pr.functional_type(op))


# -- functional --------------------------------------------------------------------------

def parse_functional(p, name, loc, num_results):
    refs = p.parse_operands()
    attrs, operands, results = parse_trailing_functional(p, refs, name)
    return make_op(name, operands, results, attrs, loc)


def print_functional(pr, op):
    pr.w(f"{op.name} {pr.vs(op.operands)}")
    print_functional_tail(pr, op)


# -- select ------------------------------------------------------------------------------

def parse_select(p, name, loc, num_results):
    refs = p.parse_operands()
    attrs = p.parse_optional_attr_dict()
    p.expect(":", f"after operands of '{name}'")
    token = p.i
    first = p.parse_type()
    if isinstance(first, FunctionType):
        operands = p.resolve_all(refs, first.inputs, token, name)
        return make_op(name, operands, first.results, attrs, loc)
    p.expect(",", "between predicate type and result type in 'stablehlo.select'")
    result = p.parse_type()
    operands = p.resolve_all(refs, [first, result, result], token, name)
    return make_op(name, operands, [result], attrs, loc)


def print_select(pr, op):
    pr.w(f"{op.name} {pr.vs(op.operands)}")
    pr.attr_dict(op)
    types = op.operand_types
    if len(types) == 3 and len(op.results) == 1 and types[1] == types[2] == op.result_types[0]:
        pr.w(f" : {pr.t(types[0])}, {pr.t(types[1])}")
    else:
        pr.w(" : " + pr.functional_type(op))


# -- compare -----------------------------------------------------------------------------

def parse_compare(p, name, loc, num_results):
    attrs = {"comparison_direction": EnumAttr("comparison_direction",
                                              p.ident("comparison direction"))}
    p.expect(",", f"after comparison direction of '{name}'")
    refs = p.parse_operands()
    if p.accept(","):
        attrs["compare_type"] = EnumAttr("comparison_type", p.ident("comparison type"))
    more, operands, results = parse_trailing_functional(p, refs, name)
    attrs.update(more)
    return make_op(name, operands, results, attrs, loc)


def print_compare(pr, op):
    if not has_attrs(op, "comparison_direction"):
        return pr.print_generic(op)
    pr.w(f"{op.name} {op.attributes['comparison_direction'].value}, {pr.vs(op.operands)}")
    if "compare_type" in op.attributes:
        pr.w(f", {op.attributes['compare_type'].value}")
    print_functional_tail(pr, op, ("comparison_direction", "compare_type"))


# -- reduce_precision --------------------------------------------------------------------

def parse_reduce_precision(p, name, loc, num_results):
    refs = p.parse_operands()
    p.expect(",", f"after operand of '{name}'")
    p.keyword("format", f"in '{name}'")
    p.expect("=", "after 'format'")
    token = p.i
    match = _EXP_MANT_RE.match(p.ident("exponent/mantissa format such as e5m10"))
    if match is None:
        raise p.error_at(token, "expected format like 'e5m10' (exponent and mantissa bits)")
    attrs = {"exponent_bits": IntegerAttr(int(match.group(1)), I32),
             "mantissa_bits": IntegerAttr(int(match.group(2)), I32)}
    attrs.update(p.parse_optional_attr_dict())
    operands, results = p.parse_functional_or_single(refs, name)
    return make_op(name, operands, results, attrs, loc)


def print_reduce_precision(pr, op):
    if not has_attrs(op, "exponent_bits", "mantissa_bits"):
        return pr.print_generic(op)
    exp = op.attributes["exponent_bits"].value
    mant = op.attributes["mantissa_bits"].value
    pr.w(f"{op.name} {pr.vs(op.operands)}, format = e{exp}m{mant}")
    pr.attr_dict(op, {"exponent_bits", "mantissa_bits"})
    pr.w(" : " + same_or_functional(pr, op))


# -- chlo_elementwise --------------------------------------------------------------------

def parse_chlo_elementwise(p, name, loc, num_results):
    refs = p.parse_operands()
    attrs = p.parse_optional_attr_dict()
    p.expect(":", f"after operands of '{name}'")
    token = p.i
    inputs = [p.parse_type()]
    while p.accept(","):
        inputs.append(p.parse_type())
    p.expect("->", f"in type of '{name}'")
    results = p.parse_result_types()
    operands = p.resolve_all(refs, inputs, token, name)
    return make_op(name, operands, results, attrs, loc)


def print_chlo_elementwise(pr, op):
    pr.w(f"{op.name} {pr.vs(op.operands)}")
    pr.attr_dict(op)
    from stablehlo.text.print_attributes import print_result_types
    pr.w(f" : {pr.ts(op.operand_types)} -> {print_result_types(op.result_types)}")


# -- nullary (replica_id, partition_id, create_token) --------------------------------------------------

def parse_nullary(p, name, loc, num_results):
    attrs = p.parse_optional_attr_dict()
    p.expect(":", f"after '{name}'")
    return make_op(name, [], [p.parse_type()], attrs, loc)


def print_nullary(pr, op):
    if op.operands or len(op.results) != 1:
        return pr.print_generic(op)
    pr.w(op.name)
    pr.attr_dict(op)
    pr.w(" : " + pr.t(op.result_types[0]))


register("same_type", parse_same_type, print_same_type)
register("functional", parse_functional, print_functional)
register("complex", parse_complex, print_complex)
register("select", parse_select, print_select)
register("compare", parse_compare, print_compare)
register("reduce_precision", parse_reduce_precision, print_reduce_precision)
register("chlo_elementwise", parse_chlo_elementwise, print_chlo_elementwise)
register("nullary", parse_nullary, print_nullary)
