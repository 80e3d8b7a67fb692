"""Ops on quantized types: dequantize -> compute -> quantize.

Expected storage values come from the upstream interpreter suite
(quantized_ops.mlir) or from the spec's formulas written out here in numpy:
dequantize(q) = (q - zp) * scale, quantize(x) = rint(clamp(x / scale + zp)).
"""
import numpy as np

from stablehlo.interpreter import KERNELS, evaluate, quantization
from stablehlo.text import parse_module


def run(text, *args):
    return evaluate(parse_module(text, "t.mlir"), args)


def spec_dequantize(q, scale, zp):
    return (np.asarray(q, np.float32) - np.float32(zp)) * np.float32(scale)


def spec_quantize(x, scale, zp, low=-128, high=127):
    scaled = np.asarray(x, np.float32) / np.float32(scale) + np.float32(zp)
    return np.rint(np.clip(scaled, low, high)).astype(np.int8)


def test_quantized_add_matches_upstream_suite():
    a = "!quant.uniform<i8:f32, 0.1:-30>"
    b = "!quant.uniform<i8:f32, 0.5:-20>"
    (out,) = run(f"""
    func.func @main() -> tensor<2xi8> {{
      %a = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
      %b = stablehlo.constant dense<[3.0, 4.0]> : tensor<2xf32>
      %qa = "stablehlo.uniform_quantize"(%a) : (tensor<2xf32>) -> tensor<2x{a}>
      %qb = "stablehlo.uniform_quantize"(%b) : (tensor<2xf32>) -> tensor<2x{b}>
      %r = "stablehlo.add"(%qa, %qb) : (tensor<2x{a}>, tensor<2x{b}>) -> tensor<2x{b}>
      %s = "stablehlo.bitcast_convert"(%r) : (tensor<2x{b}>) -> tensor<2xi8>
      return %s : tensor<2xi8>
    }}""")
    assert out.tolist() == [-12, -8]


def test_per_axis_quantize_and_requantize():
    q = "!quant.uniform<i8:f32:0, {0.1:-30,0.5:-20}>"
    r = "!quant.uniform<i8:f32:0, {0.1:-20,0.2:-30}>"
    first, second = run(f"""
    func.func @main() -> (tensor<2xi8>, tensor<2xi8>) {{
      %x = stablehlo.constant dense<[4.0, 15.0]> : tensor<2xf32>
      %q = "stablehlo.uniform_quantize"(%x) : (tensor<2xf32>) -> tensor<2x{q}>
      %b = "stablehlo.bitcast_convert"(%q) : (tensor<2x{q}>) -> tensor<2xi8>
      %r = "stablehlo.uniform_quantize"(%q) : (tensor<2x{q}>) -> tensor<2x{r}>
      %c = "stablehlo.bitcast_convert"(%r) : (tensor<2x{r}>) -> tensor<2xi8>
      return %b, %c : tensor<2xi8>, tensor<2xi8>
    }}""")
    assert first.tolist() == [10, 10] and second.tolist() == [20, 45]


Q1 = "!quant.uniform<i8:f32, 0.05:3>"
Q2 = "!quant.uniform<i8:f32, 0.02:-7>"


def test_unary_op_dequantize_compute_quantize():
    storage = np.int8([-128, -50, 0, 3, 60, 127])
    (out,) = run(f"""
    func.func @main(%s: tensor<6xi8>) -> tensor<6xi8> {{
      %q = "stablehlo.bitcast_convert"(%s) : (tensor<6xi8>) -> tensor<6x{Q1}>
      %n = stablehlo.negate %q : (tensor<6x{Q1}>) -> tensor<6x{Q2}>
      %o = "stablehlo.bitcast_convert"(%n) : (tensor<6x{Q2}>) -> tensor<6xi8>
      return %o : tensor<6xi8>
    }}""", storage)
    expected = spec_quantize(-spec_dequantize(storage, 0.05, 3), 0.02, -7)
    np.testing.assert_array_equal(out, expected)   # includes clamping at -128/127


def test_storage_data_movement_is_exact_and_unwrapped():
    module = parse_module(f"""
    func.func @main(%s: tensor<2x3xi8>) -> tensor<3x2xi8> {{
      %q = "stablehlo.bitcast_convert"(%s) : (tensor<2x3xi8>) -> tensor<2x3x{Q1}>
      %t = stablehlo.transpose %q, dims = [1, 0] : (tensor<2x3x{Q1}>) -> tensor<3x2x{Q1}>
      %o = "stablehlo.bitcast_convert"(%t) : (tensor<3x2x{Q1}>) -> tensor<3x2xi8>
      return %o : tensor<3x2xi8>
    }}""", "t.mlir")
    transpose = module.functions()[0].body.operations[1]
    kernel = KERNELS.get("stablehlo.transpose")
    run_fn, kernel_op = quantization.plan(kernel, transpose)
    assert run_fn is kernel and kernel_op is transpose
    storage = np.int8([[1, -2, 3], [-128, 127, 0]])
    (out,) = evaluate(module, [storage])
    np.testing.assert_array_equal(out, storage.T)


def test_data_movement_with_new_params_requantizes():
    storage = np.int8([[1, -2, 3], [-100, 100, 0]])
    (out,) = run(f"""
    func.func @main(%s: tensor<2x3xi8>) -> tensor<6xi8> {{
      %q = "stablehlo.bitcast_convert"(%s) : (tensor<2x3xi8>) -> tensor<2x3x{Q1}>
      %r = stablehlo.reshape %q : (tensor<2x3x{Q1}>) -> tensor<6x{Q2}>
      %o = "stablehlo.bitcast_convert"(%r) : (tensor<6x{Q2}>) -> tensor<6xi8>
      return %o : tensor<6xi8>
    }}""", storage)
    expected = spec_quantize(spec_dequantize(storage.reshape(6), 0.05, 3), 0.02, -7)
    np.testing.assert_array_equal(out, expected)


def test_region_op_computes_in_expressed_type():
    # reduce over a quantized tensor: the body adds in f32, one quantize at the end.
    storage = np.int8([[10, 20, 30], [-5, 7, 9]])
    init = np.int8([3])  # the zero point: dequantizes to 0.0
    (out,) = run(f"""
    func.func @main(%s: tensor<2x3xi8>, %i: tensor<1xi8>) -> tensor<2xi8> {{
      %q = "stablehlo.bitcast_convert"(%s) : (tensor<2x3xi8>) -> tensor<2x3x{Q1}>
      %i1 = stablehlo.reshape %i : (tensor<1xi8>) -> tensor<i8>
      %z = "stablehlo.bitcast_convert"(%i1) : (tensor<i8>) -> tensor<{Q1}>
      %r = stablehlo.reduce(%q init: %z) applies stablehlo.add across dimensions = [1]
          : (tensor<2x3x{Q1}>, tensor<{Q1}>) -> tensor<2x{Q2}>
      %o = "stablehlo.bitcast_convert"(%r) : (tensor<2x{Q2}>) -> tensor<2xi8>
      return %o : tensor<2xi8>
    }}""", storage, init)
    sums = spec_dequantize(storage, 0.05, 3).sum(axis=1, dtype=np.float32)
    np.testing.assert_array_equal(out, spec_quantize(sums, 0.02, -7))


def test_zero_storage_is_the_zero_point():
    from stablehlo.text import parse_type
    zero = quantization.zero_storage(parse_type(f"tensor<2x{Q2}>"))
    assert zero.dtype == np.int8 and zero.tolist() == [-7, -7]
    per_axis = parse_type("tensor<2x2x!quant.uniform<i8:f32:1, {0.1:4,0.5:-2}>>")
    assert quantization.zero_storage(per_axis).tolist() == [[4, -2], [4, -2]]

