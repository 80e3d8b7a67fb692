"""Quantized dot_generals and convolutions written as upstream writes them, compiled as they
are by the cpu backend (its pipeline runs quant-lower): their contractions run on the int8
kernel (i8 x i8 -> i32 dot_generals), and the results are the interpreter's (integer results
bit for bit) and the exact integer sums numpy computes.

Storage values stay small enough that the interpreter's f32 sums are exact, so the three
agree bit for bit; the zero points, per-axis scales, padding, dilations, strides, groups
and window reversal are the parts the lowering must get right. A convolution runs one
dot_general per kernel tap."""
from __future__ import annotations

import numpy as np
import pytest

from stablehlo.interpreter import evaluate
from stablehlo.text import parse_module
from tools.conformance.integer_path import FLOAT, INTEGER, classify, integer_kernels
from xla_core.quantization.integer_contraction import refusal

A = "!quant.uniform<i8:f32, 5.000000e-01:3>"
W = "!quant.uniform<i8:f32, 2.500000e-01:-2>"
ACC = "!quant.uniform<i32:f32, 1.250000e-01>"
SCALES_8 = "{1.0e-01,2.0e-01,3.0e-01,4.0e-01,5.0e-01,6.0e-01,7.0e-01,8.0e-01}"
W_AXIS_0 = f"!quant.uniform<i8:f32:0, {SCALES_8}>"
W_AXIS_1 = f"!quant.uniform<i8:f32:1, {SCALES_8}>"
OUT_DOT = "!quant.uniform<i8:f32, 2.000000e-01:-5>"
OUT_CONV = "!quant.uniform<i8:f32, 1.370000e-01:2>"

# name: (program, input shapes, i8 dot_generals it runs)
PROGRAMS = {
    # batch dims, zero points on both sides, the i32 accumulator as the result
    "dot_batched": (f"""
func.func @main(%a: tensor<2x3x8x{A}>, %w: tensor<2x8x5x{W}>) -> tensor<2x3x5x{ACC}> {{
  %0 = stablehlo.dot_general %a, %w, batching_dims = [0] x [0], contracting_dims = [2] x [1]
      : (tensor<2x3x8x{A}>, tensor<2x8x5x{W}>) -> tensor<2x3x5x{ACC}>
  return %0 : tensor<2x3x5x{ACC}>
}}""", [(2, 3, 8), (2, 8, 5)], 1),
    # per-axis weights along a free dim, requantized to i8 and dequantized, as upstream ends
    "dot_per_axis": (f"""
func.func @main(%a: tensor<4x8x{A}>, %w: tensor<8x8x{W_AXIS_1}>) -> tensor<4x8xf32> {{
  %0 = stablehlo.dot_general %a, %w, contracting_dims = [1] x [0]
      : (tensor<4x8x{A}>, tensor<8x8x{W_AXIS_1}>) -> tensor<4x8x{OUT_DOT}>
  %1 = stablehlo.uniform_dequantize %0 : (tensor<4x8x{OUT_DOT}>) -> tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}}""", [(4, 8), (8, 8)], 1),
    # NHWC, strides, edge padding, kernel dilation
    "conv_strided_padded": (f"""
func.func @main(%x: tensor<2x7x6x3x{A}>, %w: tensor<3x2x3x4x{W}>) -> tensor<2x4x6x4x{ACC}> {{
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
      window = {{stride = [2, 1], pad = [[1, 1], [2, 0]], rhs_dilate = [1, 2]}}
      {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}}
      : (tensor<2x7x6x3x{A}>, tensor<3x2x3x4x{W}>) -> tensor<2x4x6x4x{ACC}>
  return %0 : tensor<2x4x6x4x{ACC}>
}}""", [(2, 7, 6, 3), (3, 2, 3, 4)], 6),
    # NCHW, transposed (input dilation), depthwise groups, window reversal, per-axis weights
    "conv_transposed_depthwise": (f"""
func.func @main(%x: tensor<1x4x5x5x{A}>, %w: tensor<8x1x3x3x{W_AXIS_0}>)
    -> tensor<1x8x11x9xf32> {{
  %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1],
      window = {{pad = [[2, 2], [1, 1]], lhs_dilate = [2, 2], reverse = [true, false]}}
      {{batch_group_count = 1 : i64, feature_group_count = 4 : i64}}
      : (tensor<1x4x5x5x{A}>, tensor<8x1x3x3x{W_AXIS_0}>) -> tensor<1x8x11x9x{OUT_CONV}>
  %1 = stablehlo.uniform_dequantize %0 : (tensor<1x8x11x9x{OUT_CONV}>) -> tensor<1x8x11x9xf32>
  return %1 : tensor<1x8x11x9xf32>
}}""", [(1, 4, 5, 5), (8, 1, 3, 3)], 9),
}


def _inputs(shapes, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(-20, 21, size=s).astype(np.int8) for s in shapes]


def _run_cpu(module, inputs):
    import pjrt
    exe = pjrt.make_client("cpu").compile(module)
    return exe, [np.asarray(r) for r in exe(*inputs)]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_runs_on_the_int8_kernel_with_the_interpreters_results(name):
    text, shapes, taps = PROGRAMS[name]
    module = parse_module(text, name)
    assert all(refusal(op) is None for op in module.walk()
               if op.name in ("stablehlo.dot_general", "stablehlo.convolution"))
    inputs = _inputs(shapes, seed=len(name))
    exe, on_cpu = _run_cpu(module, inputs)
    assert integer_kernels(exe) == taps   # one i8 dot_general per kernel tap
    assert classify(module, exe) == (INTEGER, "")
    expected = [np.asarray(r) for r in evaluate(module, inputs)]
    for got, want in zip(on_cpu, expected):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_the_accumulator_is_the_exact_integer_sum():
    text, shapes, _ = PROGRAMS["dot_batched"]
    a, w = _inputs(shapes, seed=3)
    _, (acc,) = _run_cpu(parse_module(text, "dot"), [a, w])
    exact = np.einsum("bmk,bkn->bmn", a.astype(np.int64) - 3, w.astype(np.int64) + 2)
    np.testing.assert_array_equal(acc, exact)


def test_storage_wider_than_i8_runs_in_float_and_says_why():
    qa = "!quant.uniform<ui8:f32, 5.000000e-01:130>"
    qw = "!quant.uniform<ui8:f32, 2.500000e-01:126>"
    text = f"""
func.func @main(%a: tensor<3x8x{qa}>, %w: tensor<8x5x{qw}>) -> tensor<3x5xf32> {{
  %0 = stablehlo.dot_general %a, %w, contracting_dims = [1] x [0]
      : (tensor<3x8x{qa}>, tensor<8x5x{qw}>) -> tensor<3x5x{OUT_DOT}>
  %1 = stablehlo.uniform_dequantize %0 : (tensor<3x5x{OUT_DOT}>) -> tensor<3x5xf32>
  return %1 : tensor<3x5xf32>
}}"""
    module = parse_module(text, "u8")
    rng = np.random.default_rng(0)
    inputs = [rng.integers(110, 150, size=(3, 8)).astype(np.uint8),
              rng.integers(110, 150, size=(8, 5)).astype(np.uint8)]
    exe, (got,) = _run_cpu(module, inputs)
    assert integer_kernels(exe) == 0
    assert classify(module, exe) == (FLOAT, "lhs storage type ui8 does not fit in i8")
    np.testing.assert_array_equal(got, np.asarray(evaluate(module, inputs)[0]))


def test_a_program_quant_lower_cannot_lower_keeps_the_pipeline(caplog):
    # A reduce over quantized values has a region: quant-lower leaves the module quantized
    # (interpreter fallbacks) instead of failing the cpu pipeline.
    text = f"""
func.func @main(%a: tensor<3x8x{A}>, %w: tensor<8x5x{W}>) -> tensor<5x{ACC}> {{
  %0 = stablehlo.dot_general %a, %w, contracting_dims = [1] x [0]
      : (tensor<3x8x{A}>, tensor<8x5x{W}>) -> tensor<3x5x{ACC}>
  %z = stablehlo.constant() {{value = dense<0> : tensor<i32>}} : () -> tensor<{ACC}>
  %1 = stablehlo.reduce(%0 init: %z) applies stablehlo.add across dimensions = [0]
      : (tensor<3x5x{ACC}>, tensor<{ACC}>) -> tensor<5x{ACC}>
  return %1 : tensor<5x{ACC}>
}}"""
    module = parse_module(text, "reduce")
    inputs = _inputs([(3, 8), (8, 5)], seed=5)
    with caplog.at_level("WARNING"):
        exe, (got,) = _run_cpu(module, inputs)
    assert not [r for r in caplog.records if "pipeline failed" in r.getMessage()]
    path = classify(module, exe)
    assert path[0] == FLOAT and path[1].startswith("quantized ops left to the interpreter")
    np.testing.assert_array_equal(got, np.asarray(evaluate(module, inputs)[0]))
