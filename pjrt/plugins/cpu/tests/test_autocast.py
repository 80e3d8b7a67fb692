"""The cpu backend under the ``autocast`` compile option: where the CPU has AVX-512 BF16 the
optimized program's products take bf16 operands while its reductions, exp and norm stay f32,
and the results are within bf16's error of float64; with the portable low-precision loops
forced (no native bf16) the request is skipped and the program runs in f32."""
import logging

import numpy as np
import pytest

import pjrt
from pjrt.api import CompileOptions
from pjrt.plugins.cpu.native_module import native

# a classifier's softmax over one product's logits, an RMS norm of another product (not
# softmax(q k^T) v: fuse-attention would make that an attention composite)
BLOCK = """
func.func @main(%x: tensor<8x32xf32>, %w1: tensor<32x8xf32>, %w2: tensor<32x32xf32>) -> (tensor<8x8xf32>, tensor<8x32xf32>) {
  %s = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] : (tensor<8x32xf32>, tensor<32x8xf32>) -> tensor<8x8xf32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m = stablehlo.reduce(%s init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<8x8xf32>, tensor<f32>) -> tensor<8xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<8xf32>) -> tensor<8x8xf32>
  %d = stablehlo.subtract %s, %mb : tensor<8x8xf32>
  %e = stablehlo.exponential %d : tensor<8x8xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %sum = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<8x8xf32>, tensor<f32>) -> tensor<8xf32>
  %sb = stablehlo.broadcast_in_dim %sum, dims = [0] : (tensor<8xf32>) -> tensor<8x8xf32>
  %p = stablehlo.divide %e, %sb : tensor<8x8xf32>
  %o = stablehlo.dot_general %x, %w2, contracting_dims = [1] x [0] : (tensor<8x32xf32>, tensor<32x32xf32>) -> tensor<8x32xf32>
  %n = stablehlo.constant dense<3.125e-02> : tensor<8xf32>
  %ss = stablehlo.multiply %o, %o : tensor<8x32xf32>
  %sq = stablehlo.reduce(%ss init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<8x32xf32>, tensor<f32>) -> tensor<8xf32>
  %ms = stablehlo.multiply %sq, %n : tensor<8xf32>
  %r = stablehlo.rsqrt %ms : tensor<8xf32>
  %rb = stablehlo.broadcast_in_dim %r, dims = [0] : (tensor<8xf32>) -> tensor<8x32xf32>
  %y = stablehlo.multiply %o, %rb : tensor<8x32xf32>
  return %p, %y : tensor<8x8xf32>, tensor<8x32xf32>
}
"""


def _reference(x, w1, w2):
    x, w1, w2 = (a.astype(np.float64) for a in (x, w1, w2))
    s = x @ w1
    p = np.exp(s - s.max(axis=1, keepdims=True))
    o = x @ w2
    return p / p.sum(axis=1, keepdims=True), o / np.sqrt((o * o).mean(axis=1, keepdims=True))


def _inputs():
    rng = np.random.default_rng(0)
    return [rng.standard_normal(shape).astype(np.float32)
            for shape in ((8, 32), (32, 8), (32, 32))]


def _compile(client, **overrides):
    return client.compile(BLOCK, CompileOptions(env_option_overrides=overrides))


def _walk(module):
    return [op for op in module.op.walk()]


def _element(value) -> str:
    return str(getattr(value.type, "element_type", ""))


@pytest.mark.skipif(not native().lowp.active_isa()["bf16"], reason="needs AVX-512 BF16")
def test_products_in_bf16_reductions_exp_and_norm_in_f32():
    exe = _compile(pjrt.make_client("cpu"), autocast="bf16")
    ops = _walk(exe.executable.compiled.optimized)
    products = [op for op in ops if op.name == "stablehlo.dot_general"]
    assert len(products) == 2 and all(_element(v) == "bf16" for op in products
                                      for v in op.operands)
    for name in ("stablehlo.reduce", "stablehlo.exponential", "stablehlo.rsqrt"):
        found = [op for op in ops if op.name == name]
        assert found and all(_element(v) == "f32" for op in found for v in op.operands), name
    inputs = _inputs()
    full = _compile(pjrt.make_client("cpu"))(*inputs)
    for got, exact, want in zip(exe(*inputs), full, _reference(*inputs)):
        error = np.abs(np.asarray(got, np.float64) - want).max()
        # products of bf16 operands over 32 terms (2^-8 relative each); rows normalized
        assert 1e-4 < error < 5e-2
        assert np.abs(np.asarray(exact, np.float64) - want).max() < 1e-5


def test_without_native_bf16_autocast_is_skipped_unless_forced(caplog):
    lowp = native().lowp
    lowp.limit_isa("portable")
    try:
        client = pjrt.make_client("cpu")
        with caplog.at_level(logging.WARNING, "openhlo.compile"):
            skipped = _compile(client, autocast="bf16")
        forced = _compile(client, autocast="bf16", autocast_force=True)
    finally:
        lowp.limit_isa("detected")
    assert "autocast to bf16 skipped" in caplog.text
    elements = {_element(v) for op in _walk(skipped.executable.compiled.optimized)
                for v in op.operands}
    assert "bf16" not in elements
    assert any(_element(v) == "bf16" for op in _walk(forced.executable.compiled.optimized)
               if op.name == "stablehlo.dot_general" for v in op.operands)
