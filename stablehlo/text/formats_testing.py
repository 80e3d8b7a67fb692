"""Pretty syntaxes of the test-only ``check`` and ``interpreter`` ops.

    check.expect_eq %a, %b : tensor<3xi64>
    check.expect_almost_eq %a, %b, tolerance = 1.000000e-01 : tensor<f64>
    check.expect_close %a, %b, max_ulp_difference = 3, min_ulp_difference = 1 : T, T
    check.expect_eq_const %a, dense<[1, 2]> : tensor<2xi64>
    check.expect_almost_eq_const %a, dense<5.1> : tensor<f64> {tolerance = 0.1 : f64}
    check.expect_serialized_eq %a, probe_id = "p", iter = 1 : tensor<3xi64>
    %0 = interpreter.probe %a, probe_id = "p" : tensor<3xi64>
"""
from __future__ import annotations

from stablehlo.ir.attributes import FloatAttr, IntegerAttr, StringAttr
from stablehlo.ir.types import F64, I64, FloatType
from stablehlo.text import literals
from stablehlo.text.formats import make_op, register
from stablehlo.text.parse_attributes import unescape_string
from stablehlo.text.print_attributes import print_string

# op -> (keyword fields: (keyword, attribute, kind, optional), whether both types are written)
_BINARY = {
    "check.expect_eq": ((), False),
    "check.expect_almost_eq": ((("tolerance", "tolerance", "f64", True),), False),
    "check.expect_close": ((("max_ulp_difference", "max_ulp_difference", "i64", True),
                            ("min_ulp_difference", "min_ulp_difference", "i64", True)), True),
    "check.expect_serialized_eq": ((("probe_id", "probe_id", "string", False),
                                    ("iter", "iteration", "i64", True)), False),
    "interpreter.probe": ((("probe_id", "probe_id", "string", False),), False),
}


def _fields(name):
    return _BINARY.get(name, ((), False))


def _parse_value(p, kind):
    if kind == "string":
        return StringAttr(unescape_string(p.expect_kind("string", "string")))
    if kind == "i64":
        return IntegerAttr(p.integer(), I64)
    if p.kind == "hex":  # how the printer writes a value that short decimals cannot hold
        start = p.i
        return FloatAttr(p.float_from_bits(int(p.advance(), 16), F64, start), F64)
    if p.kind not in ("float", "int"):
        raise p.error(f"expected a number, found {p.found()}")
    return FloatAttr(float(p.advance()), F64)


def _value_text(attr) -> str:
    if isinstance(attr, StringAttr):
        return print_string(attr.value)
    if isinstance(attr, FloatAttr) and isinstance(attr.type, FloatType):
        return literals.format_float(attr.value, attr.type.name)
    return str(attr.value)


def parse_check_binary(p, name, loc, num_results):
    fields, two_types = _fields(name)
    refs = p.parse_operands()
    attrs = {}
    for keyword, attr_name, kind, optional in fields:
        if optional and not (p.at(",") and p.peek_text() == keyword):
            continue
        p.expect(",", f"before '{keyword}' in '{name}'")
        p.keyword(keyword, f"in '{name}'")
        p.expect("=", f"after '{keyword}'")
        attrs[attr_name] = _parse_value(p, kind)
    attrs.update(p.parse_optional_attr_dict())
    p.expect(":", f"after operands of '{name}'")
    token = p.i
    types = [p.parse_type()]
    while p.accept(","):
        types.append(p.parse_type())
    if not two_types and len(types) == 1 and refs:
        types = types * len(refs)
    operands = p.resolve_all(refs, types, token, name)
    results = [types[0]] if name == "interpreter.probe" else []
    return make_op(name, operands, results, attrs, loc)


def print_check_binary(pr, op):
    fields, two_types = _fields(op.name)
    types = op.operand_types
    required = [attr for _, attr, _, optional in fields if not optional]
    if not types or (not two_types and any(t != types[0] for t in types)) \
            or any(attr not in op.attributes for attr in required):
        return pr.print_generic(op)
    pr.w(f"{op.name} {pr.vs(op.operands)}")
    shown = set()
    for keyword, attr_name, kind, optional in fields:
        attr = op.attributes.get(attr_name)
        if attr is None:
            continue
        pr.w(f", {keyword} = {_value_text(attr)}")
        shown.add(attr_name)
    pr.attr_dict(op, shown)
    pr.w(" : " + (pr.ts(types) if two_types else pr.t(types[0])))


def parse_check_const(p, name, loc, num_results):
    ref = p.parse_operand()
    p.expect(",", f"after operand of '{name}'")
    attrs = {"value": p.parse_attribute("as expected value")}
    attrs.update(p.parse_optional_attr_dict())
    return make_op(name, [p.lookup(ref)], [], attrs, loc)


def print_check_const(pr, op):
    value = op.attributes.get("value")
    if len(op.operands) != 1 or value is None or op.results:
        return pr.print_generic(op)
    pr.w(f"{op.name} {pr.v(op.operands[0])}, {pr.attr(value)}")
    pr.attr_dict(op, {"value"})


register("check_binary", parse_check_binary, print_check_binary)
register("check_serialized", parse_check_binary, print_check_binary)
register("probe", parse_check_binary, print_check_binary)
register("print", parse_check_binary, print_check_binary)
register("check_const", parse_check_const, print_check_const)
