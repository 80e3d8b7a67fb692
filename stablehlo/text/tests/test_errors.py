"""Malformed text fails with a ParseError that names file:line:col and what went wrong."""
from __future__ import annotations

import re

import pytest

from stablehlo.errors import ParseError
from stablehlo.text import parse_attribute, parse_module, parse_type


def _error(text: str) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse_module(text, "f.mlir")
    return info.value


def _func(body: str, sig: str = "(%a: tensor<2xf32>)") -> str:
    return f"func.func @f{sig} {{\n{body}\n  return\n}}\n"


@pytest.mark.parametrize("body,line,col,message", [
    ("  %0 = stablehlo.add %a, %a\n  %1 = stablehlo.add %0, %0 : tensor<2xf32>", 3, 3,
     "expected ':' after operands of 'stablehlo.add', found '%1'"),
    ("  %0 = stablehlo.add %a, %5 : tensor<2xf32>", 2, 26, "use of undefined value '%5'"),
    ("  %0 = stablehlo.frobnicate %a : tensor<2xf32>", 2, 8,
     "custom op 'stablehlo.frobnicate' is unknown"),
    ("  %0 = stablehlo.add %a, %a : tensor<2xi32>", 2, 22,
     ("use of value '%a' expects different type than prior uses: 'tensor<2xi32>' vs "
      "'tensor<2xf32>'")),
    ("  %0 = stablehlo.constant dense<[1.0, 2.0, 3.0]> : tensor<2xf32>", 2, 27,
     "literal has shape [3] but the type has shape [2]"),
    ("  %0 = stablehlo.constant dense<[[1.0, 2.0], [3.0]]> : tensor<2x2xf32>", 2, 50,
     "dense literal is not rectangular"),
    ("  %0 = stablehlo.constant dense<[1, 300]> : tensor<2xi8>", 2, 27,
     "integer constant 300 out of range for i8"),
    ("  %0 = stablehlo.constant dense<\"0x0102GG\"> : tensor<2xi8>", 2, 27,
     "invalid hex digit 'G'"),
    ("  %0 = stablehlo.constant dense<\"0x010203\"> : tensor<2xi32>", 2, 27,
     "hex data has 3 bytes, expected 8"),
    ("  %0 = stablehlo.constant dense<[true, 2.5]> : tensor<2xi1>", 2, 27,
     "expected an integer for i1"),
    ("  %0, %1 = stablehlo.add %a, %a : tensor<2xf32>", 2, 3,
     "operation defines 1 results but was provided 2 to bind"),
    ("  %0 = stablehlo.abs %a : tensor<2xf32>\n  %0 = stablehlo.abs %a : tensor<2xf32>", 3, 3,
     "redefinition of SSA value '%0'"),
    ("  %0 = \"stablehlo.add\"(%a, %a) : (tensor<2xf32>) -> tensor<2xf32>", 2, 34,
     "'stablehlo.add' has 2 operands but 1 operand types"),
    (("  %0:2 = \"x.y\"(%a) : (tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>)\n"
      "  %1 = stablehlo.abs %0#2 : tensor<2xf32>"), 3, 22, "result number 2 of '%0' out of range"),
    ("  %0 = stablehlo.compare %a, %a : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xi1>", 2, 26,
     "expected comparison direction, found '%a'"),
    ("  %0 = stablehlo.abs %a : tensor<2xfoo>", 2, 27, "unknown element type 'foo'"),
    ("  \"stablehlo.foo() : () -> ()", 2, 3, "found an unterminated string"),
    ("  %0 = stablehlo.abs %a : tensor<2xf32> $", 2, 41, "found '$'"),
])
def test_error_location_and_message(body, line, col, message):
    error = _error(_func(body))
    assert (error.file, error.line, error.col) == ("f.mlir", line, col), str(error)
    assert message in str(error)
    assert str(error).startswith(f"f.mlir:{line}:{col}: error: ")


def test_unterminated_region():
    error = _error("func.func @f() {\n  return\n")
    assert (error.line, error.col) == (3, 1)
    assert "expected '}' to close region, found end of input" in str(error)


def test_unknown_generic_op_is_kept():
    module = parse_module('func.func @f() {\n  %0 = "foo.bar"() {x = 1 : i32} : () -> tensor<f32>\n'
                          '  return\n}')
    op = module.functions()[0].body.operations[0]
    assert op.name == "foo.bar" and op.opdef is None
    from stablehlo.text import print_module
    assert '%0 = "foo.bar"() {x = 1 : i32} : () -> tensor<f32>' in print_module(module)


def test_value_of_other_function_is_undefined():
    text = ("func.func @f(%a: tensor<f32>) {\n  return\n}\n"
            "func.func @g() {\n  %0 = stablehlo.abs %a : tensor<f32>\n  return\n}\n")
    error = _error(text)
    assert (error.line, "use of undefined value '%a'") == (5, error.reason)


def test_parse_type_and_attribute_errors():
    with pytest.raises(ParseError, match=r"<string>:1:8: error: unranked"):
        parse_type("tensor<*xf32>")
    with pytest.raises(ParseError, match="unexpected ',' after the end"):
        parse_type("tensor<f32>, tensor<f32>")
    with pytest.raises(ParseError, match=re.escape("expected '>' to close tensor type")):
        parse_type("tensor<2xf32")
    with pytest.raises(ParseError, match="unknown field 'bogus' in #stablehlo.gather"):
        parse_attribute("#stablehlo.gather<bogus = [1]>")
    with pytest.raises(ParseError, match="hex float literal too large|too large for f16"):
        parse_attribute("dense<[0x123456]> : tensor<1xf16>")
