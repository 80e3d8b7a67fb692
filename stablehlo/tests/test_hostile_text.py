"""Hostile program text is refused with an OpenHLOError that names the place, quickly.

One test per class of input that used to escape as another exception (TypeError,
RecursionError, MemoryError, OverflowError) or to be accepted and fail later.
"""
from __future__ import annotations

import numpy as np
import pytest

import stablehlo
from stablehlo.errors import ParseError, VerificationError
from stablehlo.ir.attributes import DenseElementsAttr, held_as_splat
from stablehlo.limits import max_nesting_depth


def _func(args: str, result: str, body: str) -> str:
    return f"func.func @main({args}) -> {result} {{\n{body}\n}}"


def _constant_attr(module) -> DenseElementsAttr:
    for op in module.walk():
        if op.name == "stablehlo.constant":
            return op.attributes["value"]
    raise AssertionError("no constant")


# -- 1. integer widths ------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    _func("", "tensor<i3>", " %0 = stablehlo.constant dense<1> : tensor<i3>\n"
                            " return %0 : tensor<i3>"),
    _func("%a: tensor<2xi3>", "tensor<2xi3>", " return %a : tensor<2xi3>"),
    _func("%a: tensor<2x?xui7>", "tensor<2x?xui7>", " return %a : tensor<2x?xui7>"),
    _func("%a: tuple<tensor<i128>>", "tuple<tensor<i128>>", " return %a : tuple<tensor<i128>>"),
])
def test_integer_width_stablehlo_lacks_is_a_parse_error(text):
    with pytest.raises(ParseError, match=r"<string>:1:\d+: error: unsupported integer type "
                                         r"'u?i(3|7|128)'"):
        stablehlo.parse(text)


def test_every_stablehlo_integer_width_and_quantized_storage_still_parse():
    for name in ("i1", "i2", "i4", "i8", "i16", "i32", "i64", "ui2", "ui4", "ui8", "ui16",
                 "ui32", "ui64"):
        module = stablehlo.parse(_func(f"%a: tensor<2x{name}>", f"tensor<2x{name}>",
                                       f" return %a : tensor<2x{name}>"))
        assert f"tensor<2x{name}>" in stablehlo.print_module(module)
    quant = "tensor<2x!quant.uniform<i4:f32, 5.000000e-01:1>>"
    module = stablehlo.parse(_func(f"%a: {quant}", quant, f" return %a : {quant}"))
    assert "!quant.uniform<i4:f32, 5.000000e-01:1>" in stablehlo.print_module(module)


# -- 2. nesting -------------------------------------------------------------------------

def _nested(kind: str, n: int) -> str:
    """A program whose deepest construct of ``kind`` is ``n`` levels deep in all (the
    function body and an op's attribute dictionary count as levels)."""
    const = " %0 = stablehlo.constant dense<1.0> : tensor<f32>\n return %0 : tensor<f32>"
    if kind == "tuple":
        return _func("%a: " + "tuple<" * n + "tensor<f32>" + ">" * n, "tensor<f32>", const)
    if kind == "function":
        return _func("%a: " + "(tensor<f32>) -> " * n + "tensor<f32>", "tensor<f32>", const)
    if kind == "array":
        inner = "[" * (n - 2) + "1" + "]" * (n - 2)
        return _func("", "tensor<f32>", const.replace("constant", f"constant {{x = {inner}}}"))
    if kind == "dictionary":
        inner = "{a = " * (n - 2) + "1" + "}" * (n - 2)
        return _func("", "tensor<f32>", const.replace("constant", f"constant {{x = {inner}}}"))
    if kind == "dense":
        inner = "[" * n + "1.0" + "]" * n
        return _func("", "tensor<f32>", const.replace("dense<1.0>", f"dense<{inner}>"))
    if kind == "case":
        head = ' %r = "stablehlo.case"(%i) ({\n'
        tail = "\n }) : (tensor<i32>) -> tensor<i32>\n stablehlo.return %r : tensor<i32>"
        body = head * (n - 1) + " stablehlo.return %x : tensor<i32>" + tail * (n - 1)
        body = body[:body.rfind("stablehlo.return")] + "return %r : tensor<i32>"
        return _func("%x: tensor<i32>, %i: tensor<i32>", "tensor<i32>", body)
    if kind == "while":
        head = (" %r = stablehlo.while(%x = %x) : tensor<i32>\n cond {\n"
                " %c = stablehlo.compare LT, %x, %x : (tensor<i32>, tensor<i32>) -> tensor<i1>\n"
                " stablehlo.return %c : tensor<i1>\n } do {\n")
        tail = "\n }\n stablehlo.return %r : tensor<i32>"
        # the compare's function type is one level below the innermost while's regions
        body = head * (n - 2) + " stablehlo.return %x : tensor<i32>" + tail * (n - 2)
        body = body[:body.rfind("stablehlo.return")] + "return %r : tensor<i32>"
        return _func("%x: tensor<i32>", "tensor<i32>", body)
    raise AssertionError(kind)


_NESTABLE = ["tuple", "function", "array", "dictionary", "dense", "case", "while"]


@pytest.mark.parametrize("kind", _NESTABLE)
def test_ten_thousand_deep_nest_is_a_parse_error(kind):
    with pytest.raises(ParseError, match=r"<string>:\d+:\d+: error: .* nested deeper than 128 "
                                         r"\(OPENHLO_MAX_NESTING_DEPTH\)"):
        stablehlo.parse(_nested(kind, 10_000))


@pytest.mark.parametrize("kind", [k for k in _NESTABLE if k != "dense"])
def test_nest_at_the_limit_parses_prints_and_verifies(kind):
    limit = max_nesting_depth()
    module = stablehlo.parse(_nested(kind, limit))
    text = stablehlo.print_module(module)
    assert stablehlo.print_module(stablehlo.parse(text)) == text
    stablehlo.verify(module)
    with pytest.raises(ParseError, match="nested deeper than"):
        stablehlo.parse(_nested(kind, limit + 1))


def test_nesting_limit_follows_its_environment_variable(monkeypatch):
    monkeypatch.setenv("OPENHLO_MAX_NESTING_DEPTH", "600")
    stablehlo.print_module(stablehlo.parse(_nested("case", 600)))
    monkeypatch.setenv("OPENHLO_MAX_NESTING_DEPTH", "8")
    with pytest.raises(ParseError, match=r"nested deeper than 8 "):
        stablehlo.parse(_nested("tuple", 9))


# -- 3. splats --------------------------------------------------------------------------

def test_huge_splat_is_held_as_one_element():
    shape = "100000x100000"
    text = _func("", f"tensor<{shape}xf32>",
                 f" %0 = stablehlo.constant dense<1.0> : tensor<{shape}xf32>\n"
                 f" return %0 : tensor<{shape}xf32>")
    module = stablehlo.parse(text)
    attr = _constant_attr(module)
    assert attr.array.shape == (100000, 100000)
    assert attr.array.strides == (0, 0) and held_as_splat(attr.array)
    assert not attr.array.flags.writeable
    printed = stablehlo.print_module(module)
    assert f"dense<1.000000e+00> : tensor<{shape}xf32>" in printed
    again = _constant_attr(stablehlo.parse(printed))
    assert again == attr and hash(again) == hash(attr)


def test_splat_view_equals_and_hashes_like_materialized_splat():
    view = _constant_attr(stablehlo.parse(_func(
        "", "tensor<2x3xi32>", " %0 = stablehlo.constant dense<7> : tensor<2x3xi32>\n"
                               " return %0 : tensor<2x3xi32>")))
    full = DenseElementsAttr(view.type, np.full((2, 3), 7, dtype=np.int32))
    other = DenseElementsAttr(view.type, np.array([[7, 7, 7], [7, 7, 8]], dtype=np.int32))
    assert view == full and hash(view) == hash(full)
    assert view != other and other != view


def test_interpreter_evaluates_splat_and_checks_the_constant_limit(monkeypatch):
    module = stablehlo.parse(_func(
        "%a: tensor<2x3xf32>", "tensor<2x3xf32>",
        " %0 = stablehlo.constant dense<1.5> : tensor<2x3xf32>\n"
        " %1 = stablehlo.multiply %a, %0 : tensor<2x3xf32>\n"
        " return %1 : tensor<2x3xf32>"))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (out,) = stablehlo.evaluate(module, [x])
    np.testing.assert_array_equal(out, x * np.float32(1.5))
    monkeypatch.setenv("OPENHLO_MAX_CONSTANT_BYTES", "16")
    with pytest.raises(stablehlo.InterpreterError,
                       match=r"<string>:2:2: 'stablehlo.constant': constant tensor<2x3xf32> "
                             r"needs 24 bytes.*OPENHLO_MAX_CONSTANT_BYTES"):
        stablehlo.evaluate(module, [x])


@pytest.mark.parametrize("literal", ["[1.0, 2.0]", "[[1.0, 2.0, 3.0]]", '"0x0000803F0000"'])
def test_dense_literal_whose_size_does_not_match_its_type_is_a_parse_error(literal):
    text = _func("", "tensor<3xf32>", f" %0 = stablehlo.constant dense<{literal}> : "
                                      "tensor<3xf32>\n return %0 : tensor<3xf32>")
    with pytest.raises(ParseError, match=r"<string>:2:\d+: error: invalid dense literal"):
        stablehlo.parse(text)


# -- 4. integers out of range -----------------------------------------------------------

_CONV = (" %0 = stablehlo.convolution(%a, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->"
         "[b, 0, 1, f], window = {{stride = [1, 1], pad = [[{pad}, 1], [1, 1]]}} "
         "{{batch_group_count = 1 : i64, feature_group_count = 1 : i64}} : "
         "(tensor<1x4x4x1xf32>, tensor<3x3x1x1xf32>) -> tensor<1x4x4x1xf32>\n"
         " return %0 : tensor<1x4x4x1xf32>")


@pytest.mark.parametrize("body, number", [
    (_CONV.format(pad="99999999999999999999999"), "99999999999999999999999"),
    (_CONV.format(pad="9223372036854775808"), "9223372036854775808"),
    (_CONV.format(pad="9" * 5000), "999999999999...999999999999"),
    (" %0 = stablehlo.constant {x = array<i64: 1, 18446744073709551616>} dense<1.0> : "
     "tensor<1x4x4x1xf32>\n return %0 : tensor<1x4x4x1xf32>", "18446744073709551616"),
    (" %0 = stablehlo.constant {x = 300 : i8} dense<1.0> : tensor<1x4x4x1xf32>\n"
     " return %0 : tensor<1x4x4x1xf32>", "300"),
    (" %0 = stablehlo.constant dense<18446744073709551616> : tensor<1x4x4x1xi64>\n"
     " return %0 : tensor<1x4x4x1xf32>", "18446744073709551616"),
])
def test_integer_out_of_its_attribute_range_is_a_parse_error(body, number):
    text = _func("%a: tensor<1x4x4x1xf32>, %w: tensor<3x3x1x1xf32>", "tensor<1x4x4x1xf32>",
                 body)
    with pytest.raises(ParseError, match=r"<string>:2:\d+: error: .*" + number.replace(".", r"\.")
                       + ".* out of range"):
        stablehlo.parse(text)


def test_dimension_beyond_int64_is_a_parse_error():
    with pytest.raises(ParseError, match=r"<string>:1:\d+: error: dimension size "
                                         r"99999999999999999999 exceeds the int64 range"):
        stablehlo.parse(_func("%a: tensor<99999999999999999999xf32>", "tensor<f32>",
                              " %0 = stablehlo.constant dense<1.0> : tensor<f32>\n"
                              " return %0 : tensor<f32>"))


# -- 5-8. the verifier and struct attributes --------------------------------------------

def test_dynamic_conv_padding_must_have_one_row_per_spatial_dimension():
    text = _func(
        "%a: tensor<1x4x4x1xf32>, %w: tensor<3x3x1x1xf32>, %p: tensor<0x2xi64>",
        "tensor<1x2x2x1xf32>",
        ' %0 = "stablehlo.dynamic_conv"(%a, %w, %p) {dimension_numbers = #stablehlo.conv<'
        "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>, batch_group_count = 1 : i64, "
        "feature_group_count = 1 : i64} : (tensor<1x4x4x1xf32>, tensor<3x3x1x1xf32>, "
        "tensor<0x2xi64>) -> tensor<1x2x2x1xf32>\n return %0 : tensor<1x2x2x1xf32>")
    with pytest.raises(VerificationError, match=r"<string>:2:2: 'stablehlo.dynamic_conv': "
                                                r"operand #2 \(padding\) .* expected 2x2"):
        stablehlo.parse(text)


@pytest.mark.parametrize("op, text", [
    ("recv", _func("%t: !stablehlo.token", "(tensor<2xf32>, !stablehlo.token)",
                   ' %0:2 = "stablehlo.recv"(%t) {is_host_transfer = false} : '
                   "(!stablehlo.token) -> (tensor<2xf32>, !stablehlo.token)\n"
                   " return %0#0, %0#1 : tensor<2xf32>, !stablehlo.token")),
    ("send", _func("%x: tensor<2xf32>, %t: !stablehlo.token", "!stablehlo.token",
                   ' %0 = "stablehlo.send"(%x, %t) {is_host_transfer = false} : '
                   "(tensor<2xf32>, !stablehlo.token) -> !stablehlo.token\n"
                   " return %0 : !stablehlo.token")),
])
def test_send_and_recv_need_a_channel_handle(op, text):
    with pytest.raises(VerificationError, match=rf"<string>:2:2: 'stablehlo.{op}': attribute "
                                                r"'channel_handle' is missing"):
        stablehlo.parse(text)


def test_public_function_declaration_is_refused_and_private_one_kept():
    main = _func("%a: tensor<f32>", "tensor<f32>",
                 " %0 = func.call @f(%a) : (tensor<f32>) -> tensor<f32>\n"
                 " return %0 : tensor<f32>")
    with pytest.raises(VerificationError, match=r"<string>:1:1: 'func.func': function @f has "
                                                r"no body: a symbol declaration cannot have "
                                                r"public visibility"):
        stablehlo.parse("func.func @f(%a: tensor<f32>) -> tensor<f32>\n" + main)
    module = stablehlo.parse("func.func private @f(%a: tensor<f32>) -> tensor<f32>\n" + main)
    assert "func.func private @f" in stablehlo.print_module(module)


def test_dot_algorithm_names_its_missing_field():
    text = _func("%a: tensor<2x2xf32>, %b: tensor<2x2xf32>", "tensor<2x2xf32>",
                 " %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0], "
                 "algorithm = <lhs_precision_type = f32, rhs_precision_type = f32, "
                 "accumulation_type = f32> : (tensor<2x2xf32>, tensor<2x2xf32>) -> "
                 "tensor<2x2xf32>\n return %0 : tensor<2x2xf32>")
    with pytest.raises(ParseError, match=r"<string>:2:\d+: error: #stablehlo.dot_algorithm "
                                         r"is missing field 'lhs_component_count'"):
        stablehlo.parse(text)


def test_verify_is_the_function_after_a_parse():
    module = stablehlo.parse(_func("%a: tensor<f32>", "tensor<f32>", " return %a : tensor<f32>"))
    assert callable(stablehlo.verify)
    stablehlo.verify(module)


# -- found by mutating the conformance programs -----------------------------------------

@pytest.mark.parametrize("elem", ["!stablehlo.token", "tuple<>", "tensor<f32>"])
def test_tensor_of_a_non_number_type_is_a_parse_error(elem):
    text = _func("", f"tensor<2x{elem}>", f" %0 = stablehlo.constant dense<1> : "
                                          f"tensor<2x{elem}>\n return %0 : tensor<2x{elem}>")
    with pytest.raises(ParseError, match=r"<string>:1:\d+: error: (tensor element type must "
                                         r"be a number or quantized type|unknown element type)"):
        stablehlo.parse(text)


def test_probe_without_operands_is_a_parse_error():
    text = _func("%a: tensor<f32>", "tensor<f32>",
                 ' %0 = interpreter.probe, probe_id = "p" : tensor<f32>\n'
                 " return %a : tensor<f32>")
    with pytest.raises(ParseError, match=r"<string>:2:\d+: error: 'interpreter.probe' has 0 "
                                         r"operands but 1 operand types"):
        stablehlo.parse(text)


def test_bitcast_of_an_opaque_element_type_is_a_verification_error():
    text = _func("%a: tensor<2x!foo.bar>", "tensor<2xf32>",
                 " %0 = stablehlo.bitcast_convert %a : (tensor<2x!foo.bar>) -> tensor<2xf32>\n"
                 " return %0 : tensor<2xf32>")
    with pytest.raises(VerificationError, match=r"<string>:2:2: 'stablehlo.bitcast_convert': "
                                                r"cannot bitcast"):
        stablehlo.parse(text)


def test_a_list_attribute_of_billions_of_entries_is_refused_without_building_it():
    text = """func.func @main(%a: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %0 = "stablehlo.transpose"(%a) {permutation = dense<1> : tensor<10000000000xi64>}
      : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}"""
    with pytest.raises(stablehlo.VerificationError,
                       match=r"2:3: 'stablehlo.transpose': attribute 'permutation' must be a "
                             r"list of at most \d+ entries"):
        stablehlo.parse(text)


def test_an_empty_dense_literal_of_a_non_empty_tensor_is_refused():
    text = """func.func @main() -> tensor<f32> {
  %r = stablehlo.constant dense<> : tensor<f32>
  func.return %r : tensor<f32>
}"""
    with pytest.raises(ParseError, match=r"2:27: .*parsed zero elements, but type "
                                         r"tensor<f32> has 1"):
        stablehlo.parse(text)


def test_a_check_tolerance_printed_as_a_hex_float_parses_back():
    text = """func.func @main() {
  %r = stablehlo.constant dense<1.0> : tensor<f32>
  check.expect_almost_eq %r, %r, tolerance = 2147483648 : tensor<f32>
  func.return
}"""
    printed = stablehlo.print_module(stablehlo.parse(text))
    assert "tolerance = 0x41E0000000000000" in printed
    again = stablehlo.parse(printed)
    tolerance = next(op for op in again.functions()[0].body.walk()
                     if op.name == "check.expect_almost_eq").attributes["tolerance"]
    assert tolerance.value == 2147483648.0
    assert stablehlo.print_module(again) == printed


def test_a_splat_pickles_as_one_element():
    # The compile cache and worker processes pickle modules: a 1.6 GB splat must stay small.
    import pickle
    text = """func.func @main() -> tensor<20000x20000xf32> {
  %0 = stablehlo.constant dense<1.5> : tensor<20000x20000xf32>
  return %0 : tensor<20000x20000xf32>
}"""
    data = pickle.dumps(stablehlo.parse(text))
    assert len(data) < 10_000
    again = pickle.loads(data)
    value = next(op for op in again.walk() if op.name == "stablehlo.constant").attributes["value"]
    assert held_as_splat(value.array) and value.array.shape == (20000, 20000)
    assert value.array[123, 4567] == np.float32(1.5)
    assert stablehlo.print_module(again) == stablehlo.print_module(stablehlo.parse(text))
