"""autocast: numerics of an autocast MLP against float64 within bf16's error bound (run by the
reference interpreter), and the options' checks. The rewrite itself is in the golden files
autocast.mlir and autocast-contraction-result.mlir."""
from __future__ import annotations

import numpy as np
import pytest

import stablehlo
from stablehlo.interpreter import evaluate
from xla_core.passes import PassContext, PassError, make_pass

MLP = """
func.func public @main(%x: tensor<16x64xf32>, %w1: tensor<64x32xf32>, %b1: tensor<32xf32>,
                       %w2: tensor<32x8xf32>) -> tensor<16x8xf32> {
  %0 = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] : (tensor<16x64xf32>, tensor<64x32xf32>) -> tensor<16x32xf32>
  %1 = stablehlo.broadcast_in_dim %b1, dims = [1] : (tensor<32xf32>) -> tensor<16x32xf32>
  %2 = stablehlo.add %0, %1 : tensor<16x32xf32>
  %c = stablehlo.constant dense<0.0> : tensor<16x32xf32>
  %3 = stablehlo.maximum %2, %c : tensor<16x32xf32>
  %4 = stablehlo.dot_general %3, %w2, contracting_dims = [1] x [0] : (tensor<16x32xf32>, tensor<32x8xf32>) -> tensor<16x8xf32>
  func.return %4 : tensor<16x8xf32>
}
"""
# A bf16 rounding of x is x(1 + d), |d| <= 2^-9 (round to nearest, 8 significant bits); a
# product of two rounded operands is off by at most (1 + 2^-9)^2 - 1 < 2^-8 + 2^-17, the f32
# accumulation adds about K * 2^-24 relative to the sum of magnitudes.
_PRODUCT = 2.0 ** -8 + 2.0 ** -17 + 64 * 2.0 ** -24


def _inputs(seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32)
            for shape in ((16, 64), (64, 32), (32,), (32, 8))]


def _autocast(text: str, **options) -> stablehlo.ir.core.Module:
    module = stablehlo.parse(text)
    make_pass("autocast", options).run(module, PassContext())
    return module


@pytest.mark.parametrize("result", ["f32", "bf16"])
def test_an_autocast_mlp_is_within_bf16_bounds_of_float64(result):
    x, w1, b1, w2 = _inputs()
    exact64 = [a.astype(np.float64) for a in (x, w1, b1, w2)]
    h = np.maximum(exact64[0] @ exact64[1] + exact64[2], 0)
    y = h @ exact64[3]
    # layer 1's error, then what it and layer 2's own rounding make of the output (relu
    # only shrinks errors); rounding the products to bf16 adds 2^-9 of each result
    rounded = 2.0 ** -9 if result == "bf16" else 0.0
    e1 = (_PRODUCT + rounded) * (np.abs(exact64[0]) @ np.abs(exact64[1])) + \
        rounded * np.abs(exact64[2])
    bound = (e1 @ np.abs(exact64[3]) + (_PRODUCT + rounded) * ((h + e1) @ np.abs(exact64[3])))
    module = _autocast(MLP, contraction_result=result)
    got = np.asarray(evaluate(module, [x, w1, b1, w2])[0], np.float64)
    assert got.dtype == np.float64 and got.shape == y.shape
    assert np.all(np.abs(got - y) <= bound * 1.01 + 1e-6)
    # and it really computed in bf16: far from what f32 gives
    full = np.asarray(evaluate(stablehlo.parse(MLP), [x, w1, b1, w2])[0], np.float64)
    assert np.max(np.abs(got - y)) > 20 * np.max(np.abs(full - y))


def test_the_signature_and_f32_results_are_kept():
    module = _autocast(MLP, contraction_result="bf16")
    func = module.lookup("main")
    assert [str(t) for t in func.type.results] == ["tensor<16x8xf32>"]
    assert func.body.operations[-1].operands[0].type == func.type.results[0]


def test_bad_options_name_the_pass_and_option():
    with pytest.raises(PassError, match="autocast.*'dtype'.*bf16.*'f16'"):
        make_pass("autocast", {"dtype": "f16"})
    with pytest.raises(PassError, match="'contraction-result' must be f32 or bf16"):
        make_pass("autocast", {"contraction-result": "f64"})


def test_a_program_without_f32_products_is_unchanged():
    text = """
func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.exponential %x : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
"""
    module = stablehlo.parse(text)
    assert make_pass("autocast").run(module, PassContext()) is False
