"""What the parser builds: dense literals as numpy arrays, attributes per the shared
conventions, module structure. Expected values are written out independently (numpy, struct)."""
from __future__ import annotations

import struct

import ml_dtypes
import numpy as np
import pytest

from stablehlo.ir.attributes import (
    ArrayAttr,
    BoolAttr,
    ConvDimensionNumbersAttr,
    DenseArrayAttr,
    DenseElementsAttr,
    DictAttr,
    EnumAttr,
    FloatAttr,
    IntegerAttr,
    OpaqueAttr,
    StringAttr,
    StructAttr,
    SymbolRefAttr,
    TypeAttr,
    UnitAttr,
)
from stablehlo.ir.types import (
    I1,
    I64,
    ComplexType,
    FloatType,
    FunctionType,
    IntegerType,
    QuantizedType,
    TensorType,
    TokenType,
    TupleType,
)
from stablehlo.text import parse_attribute, parse_module, parse_type, print_module


def dense(text: str) -> np.ndarray:
    attr = parse_attribute(text)
    assert isinstance(attr, DenseElementsAttr)
    return attr.array


@pytest.mark.parametrize("text,expected", [
    ("dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32>",
     np.array([[1, 2, 3], [4, 5, 6]], np.int32)),
    ("dense<7> : tensor<2x2xi64>", np.full((2, 2), 7, np.int64)),
    ("dense<1> : tensor<3xf32>", np.ones(3, np.float32)),
    ("dense<-2.5> : tensor<f64>", np.array(-2.5)),
    ("dense<[true, false, true]> : tensor<3xi1>", np.array([True, False, True])),
    ("dense<[0, 255]> : tensor<2xui8>", np.array([0, 255], np.uint8)),
    ("dense<255> : tensor<i8>", np.array(-1, np.int8)),  # signless: unsigned spelling wraps
    ("dense<18446744073709551615> : tensor<ui64>", np.array(2**64 - 1, np.uint64)),
    ("dense<[(1.0, -2.0), (0.5, 0.0)]> : tensor<2xcomplex<f32>>",
     np.array([1 - 2j, 0.5], np.complex64)),
    ("dense<[-8, 7]> : tensor<2xi4>", np.array([-8, 7], ml_dtypes.int4)),
    ("dense<[1.5, 0.1]> : tensor<2xbf16>", np.array([1.5, 0.1], ml_dtypes.bfloat16)),
    ("dense<> : tensor<0x3xf32>", np.zeros((0, 3), np.float32)),
    ("dense<[]> : tensor<0xi32>", np.zeros(0, np.int32)),
])
def test_dense_literals(text, expected):
    array = dense(text)
    assert array.dtype == expected.dtype and array.shape == expected.shape
    assert array.tobytes() == expected.tobytes()


def test_dense_hex():
    data = struct.pack("<4f", 1.0, -2.0, 0.5, 3.0)
    array = dense(f'dense<"0x{data.hex()}"> : tensor<2x2xf32>')
    np.testing.assert_array_equal(array, [[1.0, -2.0], [0.5, 3.0]])
    # one element's bytes is a splat
    assert dense('dense<"0x0000803F"> : tensor<3xf32>').tolist() == [1.0, 1.0, 1.0]
    # narrow ints and bools take one byte per element; i4 bytes are masked and sign-extended
    assert dense('dense<"0x0F0708"> : tensor<3xi4>').tolist() == [-1, 7, -8]
    assert dense('dense<"0x0301"> : tensor<2xui2>').tolist() == [3, 1]
    assert dense('dense<"0x0100"> : tensor<2xi1>').tolist() == [True, False]
    complex_bytes = struct.pack("<4d", 1.0, 2.0, -3.0, 4.0)
    np.testing.assert_array_equal(dense(f'dense<"0x{complex_bytes.hex()}"> : '
                                        'tensor<2xcomplex<f64>>'), [1 + 2j, -3 + 4j])


def test_dense_float_bit_patterns():
    array = dense("dense<[0x7FC00000, 0xFF800000, 1.0]> : tensor<3xf32>")
    assert array.view(np.uint32).tolist() == [0x7FC00000, 0xFF800000, 0x3F800000]
    assert dense("dense<0x7E00> : tensor<f16>").view(np.uint16) == 0x7E00


def test_dense_round_trips_through_printer():
    big = np.arange(150, dtype=np.float32) / 7
    attr = DenseElementsAttr(TensorType((150,), FloatType("f32")), big)
    text = str(attr)
    assert text.startswith('dense<"0x') and text.endswith('"> : tensor<150xf32>')
    assert text.split("\"")[1][2:] == big.tobytes().hex().upper()
    assert dense(text).tobytes() == big.tobytes()


@pytest.mark.parametrize("text,expected", [
    ("tensor<2x?xf32>", TensorType((2, None), FloatType("f32"))),
    ("tensor<i1>", TensorType((), I1)),
    ("tensor<4xcomplex<f64>>", TensorType((4,), ComplexType(FloatType("f64")))),
    ("tensor<3xui4>", TensorType((3,), IntegerType(4, False))),
    ("tensor<2xf8E4M3FNUZ>", TensorType((2,), FloatType("f8E4M3FNUZ"))),
    ("tuple<tensor<f32>, tuple<!stablehlo.token>>",
     TupleType((TensorType((), FloatType("f32")), TupleType((TokenType(),))))),
    ("(tensor<f32>, i64) -> (tensor<f32>)",
     FunctionType((TensorType((), FloatType("f32")), I64), (TensorType((), FloatType("f32")),))),
    ("tensor<2x!quant.uniform<i8<-127:127>:f32:1, {0.5:-3,2.0}>>",
     TensorType((2,), QuantizedType(IntegerType(8), FloatType("f32"), (0.5, 2.0), (-3, 0), 1,
                                    -127, 127))),
])
def test_types(text, expected):
    assert parse_type(text) == expected


@pytest.mark.parametrize("text,expected", [
    ("array<i64: 1, 2>", DenseArrayAttr(I64, (1, 2))),
    ("array<i64>", DenseArrayAttr(I64, ())),
    ("array<i1: true, false>", DenseArrayAttr(I1, (True, False))),
    ("5 : i32", IntegerAttr(5, IntegerType(32))),
    ("true", BoolAttr(True)),
    ("0.1 : f64", FloatAttr(0.1, FloatType("f64"))),
    ('"a\\22b\\0A"', StringAttr('a"b\n')),
    ("@f::@g", SymbolRefAttr("f", ("g",))),
    ("unit", UnitAttr()),
    ("#stablehlo<comparison_direction LT>", EnumAttr("comparison_direction", "LT")),
    ("#stablehlo.result_accuracy_mode<TOLERANCE>", EnumAttr("result_accuracy_mode", "TOLERANCE")),
    ("#stablehlo.channel_handle<handle = 1, type = 2>",
     StructAttr("channel_handle", (("handle", 1), ("type", 2)))),
    ("#stablehlo.scatter<update_window_dims = [1], index_vector_dim = 1>",
     StructAttr("scatter", (("update_window_dims", (1,)), ("inserted_window_dims", ()),
                            ("input_batching_dims", ()), ("scatter_indices_batching_dims", ()),
                            ("scatter_dims_to_operand_dims", ()), ("index_vector_dim", 1)))),
    ("#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>",
     ConvDimensionNumbersAttr(0, 3, (1, 2), 2, 3, (0, 1), 0, 3, (1, 2))),
    ('#sdy.sharding<@mesh, [{"x"}, {}]>', OpaqueAttr('#sdy.sharding<@mesh, [{"x"}, {}]>')),
    ("{b = 1 : i64, a}", DictAttr((("b", IntegerAttr(1, I64)), ("a", UnitAttr())))),
    ("tensor<f32>", TypeAttr(TensorType((), FloatType("f32")))),
])
def test_attributes(text, expected):
    assert parse_attribute(text) == expected


def _ops(text: str) -> list:
    return [op for op in parse_module(text).walk()][2:]


def test_inherent_attributes_normalized_from_both_spellings():
    pretty = _ops("func.func @f(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) {\n"
                  "  %0 = stablehlo.compare LT, %a, %b, FLOAT : (tensor<2x3xf32>, "
                  "tensor<2x3xf32>) -> tensor<2x3xi1>\n  return\n}")[0]
    props = _ops('func.func @f(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) {\n'
                 '  %0 = "stablehlo.compare"(%a, %b) <{comparison_direction = '
                 '#stablehlo<comparison_direction LT>, compare_type = '
                 '#stablehlo<comparison_type FLOAT>}> : (tensor<2x3xf32>, tensor<2x3xf32>) -> '
                 'tensor<2x3xi1>\n  return\n}')[0]
    old = _ops('func.func @f(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) {\n'
               '  %0 = "stablehlo.compare"(%a, %b) {comparison_direction = '
               '#stablehlo<comparison_direction LT>, compare_type = '
               '#stablehlo<comparison_type FLOAT>} : (tensor<2x3xf32>, tensor<2x3xf32>) -> '
               'tensor<2x3xi1>\n  return\n}')[0]
    expected = {"comparison_direction": EnumAttr("comparison_direction", "LT"),
                "compare_type": EnumAttr("comparison_type", "FLOAT")}
    assert pretty.attributes == props.attributes == old.attributes == expected


def test_pretty_formats_build_conventional_attributes():
    text = """func.func @f(%x: tensor<1x4x9x9xf32>, %k: tensor<6x2x3x3xf32>, %m: tensor<3x4xf32>) {
  %0 = stablehlo.convolution(%x, %k) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [2, 2], pad = [[1, 1], [0, 2]], reverse = [false, true]} {batch_group_count = 1 : i64, feature_group_count = 2 : i64} : (tensor<1x4x9x9xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x4x4xf32>
  %1 = stablehlo.slice %m [0:3:2, 1:4] : (tensor<3x4xf32>) -> tensor<2x3xf32>
  %2 = stablehlo.dot_general %m, %m, contracting_dims = [0] x [0], precision = [DEFAULT, HIGH] : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<4x4xf32>
  stablehlo.custom_call @target(%m) {has_side_effect = true} : (tensor<3x4xf32>) -> ()
  return
}"""
    conv, sl, dot, call = _ops(text)[:4]
    pad = conv.attributes["padding"]
    assert pad.type == TensorType((2, 2), I64) and pad.array.tolist() == [[1, 1], [0, 2]]
    assert conv.attributes["window_strides"] == DenseArrayAttr(I64, (2, 2))
    assert conv.attributes["window_reversal"] == DenseArrayAttr(I1, (False, True))
    assert conv.attributes["feature_group_count"] == IntegerAttr(2, I64)
    assert sl.attributes == {"start_indices": DenseArrayAttr(I64, (0, 1)),
                             "limit_indices": DenseArrayAttr(I64, (3, 4)),
                             "strides": DenseArrayAttr(I64, (2, 1))}
    assert dot.attributes["precision_config"] == ArrayAttr(
        (EnumAttr("precision", "DEFAULT"), EnumAttr("precision", "HIGH")))
    assert dot.attributes["dot_dimension_numbers"].get("lhs_contracting_dimensions") == (0,)
    assert call.attributes["call_target_name"] == StringAttr("target")
    assert call.attributes["has_side_effect"] == BoolAttr(True) and not call.results


def test_module_forms_and_locations():
    text = """#loc = loc("x.py":3:4)
#loc1 = loc("f"(#loc))
module @jit_f attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main(%arg0: tensor<2xf32> {mhlo.sharding = "{replicated}"} loc("x")) -> (tensor<2xf32> {jax.result_info = ""}) {
    %0 = stablehlo.abs %arg0 : tensor<2xf32> loc(#loc1)
    return %0 : tensor<2xf32> loc(#loc)
  } loc(#loc)
} loc(#loc)
"""
    module = parse_module(text, "m.mlir")
    assert module.name == "jit_f"
    assert module.attributes["mhlo.num_partitions"] == IntegerAttr(1, IntegerType(32))
    func = module.functions()[0]
    assert func.visibility == "public"
    assert func.arg_attrs(0).get("mhlo.sharding") == StringAttr("{replicated}")
    assert func.result_attrs(0).get("jax.result_info") == StringAttr("")
    abs_op = func.body.operations[0]
    assert (abs_op.location.file, abs_op.location.line, abs_op.location.col) == ("m.mlir", 5, 5)
    assert "loc(" not in print_module(module)


def test_bare_ops_get_an_implicit_module():
    module = parse_module('func.func @f() {\n  return\n}\n"func.func"() <{function_type = '
                          '() -> (), sym_name = "g"}> ({\n  "func.return"() : () -> ()\n}) : '
                          '() -> ()\n')
    assert [f.name for f in module.functions()] == ["f", "g"]
    assert print_module(module) == "module {\n  func.func @f() {\n    return\n  }\n" \
                                   "  func.func @g() {\n    return\n  }\n}\n"


def test_regions_see_enclosing_values():
    text = """func.func @f(%p: tensor<i1>, %a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = "stablehlo.if"(%p) ({
    stablehlo.return %a : tensor<2xf32>
  }, {
    %1 = stablehlo.negate %a : tensor<2xf32>
    stablehlo.return %1 : tensor<2xf32>
  }) : (tensor<i1>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}"""
    func = parse_module(text).functions()[0]
    if_op = func.body.operations[0]
    assert if_op.regions[0].blocks[0].operations[0].operands[0] is func.body.arguments[1]
