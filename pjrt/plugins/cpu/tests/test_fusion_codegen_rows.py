"""Row reductions: per-row scalars computed once per row, costly element values kept in a row
buffer for later loops (kernels._row_reduction), checked against the reference interpreter
and on the generated C++."""
from __future__ import annotations

import re

import numpy as np
import pytest

from pjrt.plugins.cpu.codegen import build
from pjrt.plugins.cpu.tests.fusion_cases import (SOFTMAX, XENT, check_against_interpreter, fill,
                                                  fusion_module)

pytestmark = pytest.mark.skipif(build.find_compiler() is None, reason="no C++ compiler")


def _run(text, args, rtol=2e-6, atol=1e-6):
    return check_against_interpreter(text, args, rtol, atol).fusion_library.source


def _loops(source: str) -> list[str]:
    """Bodies of the loops over a row (``for (int64_t j...``) up to their closing brace."""
    out = []
    for m in re.finditer(r"for \(int64_t j0? = ", source):
        depth, i = 0, source.index("{", m.start())
        start = i
        while True:
            depth += {"{": 1, "}": -1}.get(source[i], 0)
            if depth == 0:
                break
            i += 1
        out.append(source[start:i])
    return out


def _rand(shape, seed=0, scale=3.0, dtype=np.float32):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


@pytest.mark.parametrize("D", [1000, 5000])  # a row buffer on the stack / from env->alloc
def test_softmax_computes_exp_once_and_hoists_row_scalars(D):
    source = _run(fill(SOFTMAX, N=6, D=D, T="f32"), [_rand((6, D))])
    assert "rowbuf0" in source
    assert ("env->alloc" in source) == (D == 5000)
    loops = _loops(source)
    # exp: once per element, in the sum's loops (main and tail), which keep it; the
    # division's loop (the last) reads it back.
    assert any("ohm_exp(" in body for body in loops)
    assert all("rowbuf0[j] = " in body for body in loops if "ohm_exp(" in body)
    assert "ohm_exp(" not in loops[-1] and "rowbuf0[j]" in loops[-1]


def test_cross_entropy_row_log_outside_the_loops():
    N, D = 9, 3000
    labels = np.random.default_rng(1).integers(0, D, N).astype(np.int32)
    source = _run(fill(XENT, N=N, D=D), [_rand((N, D), scale=5.0), labels], rtol=2e-5)
    assert "ohm_log(" in source
    assert not any("ohm_log(" in body for body in _loops(source))


def test_buffered_value_read_at_other_indices_is_recomputed():
    # The element result reads exp(x) at (r, j) and, transposed, at (j, r): only the first
    # is the buffered element of the current row.
    n = 40
    body = """
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %e = stablehlo.exponential %p0 : tensor<40x40xf32>
  %z = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<40x40xf32>, tensor<f32>) -> tensor<40xf32>
  %zb = stablehlo.broadcast_in_dim %z, dims = [0] : (tensor<40xf32>) -> tensor<40x40xf32>
  %et = stablehlo.transpose %e, dims = [1, 0] : (tensor<40x40xf32>) -> tensor<40x40xf32>
  %y = stablehlo.add %e, %et : tensor<40x40xf32>
  %w = stablehlo.divide %y, %zb : tensor<40x40xf32>
  return %w : tensor<40x40xf32>"""
    text = fusion_module("reduction", ["tensor<40x40xf32>"], ["tensor<40x40xf32>"], body)
    source = _run(text, [_rand((n, n), scale=1.0)], rtol=1e-5)
    assert "rowbuf0" in source
    assert "ohm_exp(" in _loops(source)[-1]


def test_row_buffer_over_several_reduced_dims():
    # Reduced dims [1, 2]: the buffer is indexed by the flat position in the row.
    body = """
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %t = stablehlo.tanh %p0 : tensor<5x30x140xf32>
  %s = stablehlo.reduce(%t init: %zero) applies stablehlo.add across dimensions = [1, 2] : (tensor<5x30x140xf32>, tensor<f32>) -> tensor<5xf32>
  %sb = stablehlo.broadcast_in_dim %s, dims = [0] : (tensor<5xf32>) -> tensor<5x30x140xf32>
  %y = stablehlo.multiply %t, %sb : tensor<5x30x140xf32>
  return %y, %s : tensor<5x30x140xf32>, tensor<5xf32>"""
    text = fusion_module("reduction", ["tensor<5x30x140xf32>"],
                         ["tensor<5x30x140xf32>", "tensor<5xf32>"], body)
    source = _run(text, [_rand((5, 30, 140), scale=1.0)], rtol=1e-5, atol=1e-5)
    assert "rowbuf0" in source and "env->alloc" in source


def test_cheap_or_single_use_operands_are_not_buffered():
    # Layer norm's (x - mean)^2 is cheaper to recompute than to store and reload.
    body = """
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%p0 init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<8x300xf32>, tensor<f32>) -> tensor<8xf32>
  %k = stablehlo.constant dense<300.0> : tensor<f32>
  %kb = stablehlo.broadcast_in_dim %k, dims = [] : (tensor<f32>) -> tensor<8xf32>
  %mean = stablehlo.divide %s, %kb : tensor<8xf32>
  %mb = stablehlo.broadcast_in_dim %mean, dims = [0] : (tensor<8xf32>) -> tensor<8x300xf32>
  %d = stablehlo.subtract %p0, %mb : tensor<8x300xf32>
  %d2 = stablehlo.multiply %d, %d : tensor<8x300xf32>
  %v = stablehlo.reduce(%d2 init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<8x300xf32>, tensor<f32>) -> tensor<8xf32>
  %r = stablehlo.rsqrt %v : tensor<8xf32>
  %rb = stablehlo.broadcast_in_dim %r, dims = [0] : (tensor<8xf32>) -> tensor<8x300xf32>
  %y = stablehlo.multiply %d, %rb : tensor<8x300xf32>
  return %y : tensor<8x300xf32>"""
    text = fusion_module("reduction", ["tensor<8x300xf32>"], ["tensor<8x300xf32>"], body)
    source = _run(text, [_rand((8, 300))], rtol=1e-5, atol=1e-6)
    assert "rowbuf" not in source
    loops = _loops(source)
    # mean and rsqrt are per-row scalars: no division or square root inside a loop over a row
    assert not any("/" in b or "sqrt" in b for b in loops)


def test_column_reduction_of_an_empty_value_compiles_and_runs():
    """A fused column sum with no columns (jnp.delete left nothing): the generator refuses it
    and the fusion runs op by op, instead of the compile failing."""
    text = """
func.func @main(%x: tensor<3x0xf32>) -> tensor<0xf32> {
  %e = stablehlo.exponential %x : tensor<3x0xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %s = stablehlo.reduce(%e init: %z) applies stablehlo.add across dimensions = [0]
      : (tensor<3x0xf32>, tensor<f32>) -> tensor<0xf32>
  func.return %s : tensor<0xf32>
}"""
    check_against_interpreter(text, [np.zeros((3, 0), np.float32)], generated=False)


def test_while_loop_over_an_element_type_the_loop_generator_lacks():
    """A bf16 loop: the loop generator refuses the type and the executor runs the loop."""
    import ml_dtypes
    text = """
func.func @main(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, tensor<4xbf16>
    cond {
      %n = stablehlo.constant dense<3> : tensor<i32>
      %lt = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      %v1 = stablehlo.add %v, %v : tensor<4xbf16>
      stablehlo.return %i1, %v1 : tensor<i32>, tensor<4xbf16>
    }
  func.return %r#1 : tensor<4xbf16>
}"""
    x = np.array([1.0, -2.0, 0.5, 3.0], ml_dtypes.bfloat16)
    check_against_interpreter(text, [x], generated=False)
