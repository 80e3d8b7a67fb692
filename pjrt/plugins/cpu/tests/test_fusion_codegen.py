"""Generated fusion kernels (codegen/) against the reference interpreter."""
from __future__ import annotations

import logging
import re

import numpy as np
import pytest

import pjrt
import stablehlo
from pjrt.plugins.cpu.codegen import build
from xla_core.buffers import inplace_pairs
from pjrt.plugins.cpu.tests.fusion_cases import (
    check_against_interpreter as _check,
    DOT_BIAS_GELU, LAYERNORM_GELU, SOFTMAX, XENT, fill, fusion_module)

pytestmark = pytest.mark.skipif(build.find_compiler() is None, reason="no C++ compiler")
_DTYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i1": np.bool_}


def _rand(shape, T, seed=0, scale=3.0):
    rng = np.random.default_rng(seed)
    if T == "i32":
        return rng.integers(-1000, 1000, shape).astype(np.int32)
    if T == "i1":
        return rng.random(shape) < 0.5
    return (rng.standard_normal(shape) * scale).astype(_DTYPES[T])


LOOP = """
  %b = stablehlo.broadcast_in_dim %p1, dims = [1] : (tensor<{D}x{T}>) -> tensor<{N}x{D}x{T}>
  %s = stablehlo.add %p0, %b : tensor<{N}x{D}x{T}>
  %t = stablehlo.transpose %s, dims = [1, 0] : (tensor<{N}x{D}x{T}>) -> tensor<{D}x{N}x{T}>
  %r = stablehlo.reshape %t : (tensor<{D}x{N}x{T}>) -> tensor<{N}x{D}x{T}>
  %m = stablehlo.multiply %r, %s : tensor<{N}x{D}x{T}>
  %c = stablehlo.compare GT, %m, %s : (tensor<{N}x{D}x{T}>, tensor<{N}x{D}x{T}>) -> tensor<{N}x{D}xi1>
  %y = stablehlo.select %c, %m, %s : tensor<{N}x{D}xi1>, tensor<{N}x{D}x{T}>
  %z = stablehlo.maximum %y, %p0 : tensor<{N}x{D}x{T}>
  return %z, %c : tensor<{N}x{D}x{T}>, tensor<{N}x{D}xi1>"""


@pytest.mark.parametrize("T", ["f32", "f64", "i32"])
@pytest.mark.parametrize("N,D", [(1, 1), (7, 7), (1000, 33), (3, 10000)])
def test_loop_broadcast_transpose_reshape(T, N, D):
    text = fusion_module("loop", [f"tensor<{N}x{D}x{T}>", f"tensor<{D}x{T}>"],
                         [f"tensor<{N}x{D}x{T}>", f"tensor<{N}x{D}xi1>"], fill(LOOP, N=N, D=D, T=T))
    _check(text, [_rand((N, D), T), _rand((D,), T, 1)])


def test_loop_math_and_data_movement():
    body = """
  %io = stablehlo.iota dim = 0 : tensor<6x5xf32>
  %sl = stablehlo.slice %p0 [1:13:2, 0:5] : (tensor<13x5xf32>) -> tensor<6x5xf32>
  %rv = stablehlo.reverse %sl, dims = [0, 1] : tensor<6x5xf32>
  %cz = stablehlo.constant dense<0.25> : tensor<f32>
  %pd = stablehlo.pad %p1, %cz, low = [1, 0], high = [0, 1], interior = [1, 0] : (tensor<3x4xf32>, tensor<f32>) -> tensor<6x5xf32>
  %cc = stablehlo.concatenate %p2, %p2, dim = 0 : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<6x5xf32>
  %k = stablehlo.constant dense<[[1.0, 2.0, 3.0, 4.0, 5.0]]> : tensor<1x5xf32>
  %kb = stablehlo.broadcast_in_dim %k, dims = [0, 1] : (tensor<1x5xf32>) -> tensor<6x5xf32>
  %a = stablehlo.add %rv, %pd : tensor<6x5xf32>
  %b = stablehlo.multiply %a, %cc : tensor<6x5xf32>
  %c = stablehlo.add %b, %io : tensor<6x5xf32>
  %d = stablehlo.tanh %c : tensor<6x5xf32>
  %e = stablehlo.logistic %c : tensor<6x5xf32>
  %f = stablehlo.exponential %d : tensor<6x5xf32>
  %g = stablehlo.abs %c : tensor<6x5xf32>
  %h = stablehlo.log_plus_one %g : tensor<6x5xf32>
  %i = stablehlo.sqrt %g : tensor<6x5xf32>
  %j = stablehlo.add %h, %i : tensor<6x5xf32>
  %l = stablehlo.multiply %j, %kb : tensor<6x5xf32>
  %m = stablehlo.add %l, %e : tensor<6x5xf32>
  %n = stablehlo.subtract %m, %f : tensor<6x5xf32>
  return %n : tensor<6x5xf32>"""
    text = fusion_module("loop", ["tensor<13x5xf32>", "tensor<3x4xf32>", "tensor<3x5xf32>"],
                         ["tensor<6x5xf32>"], body)
    _check(text, [_rand((13, 5), "f32"), _rand((3, 4), "f32", 1), _rand((3, 5), "f32", 2)])


def test_loop_booleans_and_scalars():
    body = """
  %a = stablehlo.and %p0, %p1 : tensor<9xi1>
  %n = stablehlo.not %a : tensor<9xi1>
  %o = stablehlo.xor %n, %p1 : tensor<9xi1>
  %c = stablehlo.convert %o : (tensor<9xi1>) -> tensor<9xi32>
  %sb = stablehlo.broadcast_in_dim %p2, dims = [] : (tensor<i32>) -> tensor<9xi32>
  %m = stablehlo.multiply %c, %sb : tensor<9xi32>
  return %m, %o : tensor<9xi32>, tensor<9xi1>"""
    text = fusion_module("loop", ["tensor<9xi1>", "tensor<9xi1>", "tensor<i32>"],
                         ["tensor<9xi32>", "tensor<9xi1>"], body)
    _check(text, [_rand((9,), "i1"), _rand((9,), "i1", 1), np.array(2**30 + 7, np.int32)])


def test_reshapes_split_and_merge_dimensions_group_by_group():
    # [32,256] -> [2,16,256] -> [32,256] splits and merges the 32 only: the innermost index
    # reaches the load unchanged (xla_core/codegen/body.py, Note [reshape groups])
    body = """
  %a = stablehlo.reshape %p0 : (tensor<32x256xf32>) -> tensor<2x16x256xf32>
  %b = stablehlo.multiply %a, %a : tensor<2x16x256xf32>
  %c = stablehlo.reshape %b : (tensor<2x16x256xf32>) -> tensor<32x256xf32>
  return %c : tensor<32x256xf32>"""
    text = fusion_module("loop", ["tensor<32x256xf32>"], ["tensor<32x256xf32>"], body)
    prog = _check(text, [_rand((32, 256), "f32")])
    assert re.search(r"in0\[\w+\*256 \+ i\]", prog.fusion_library.source)
    # groups of several dimensions on both sides, and unit dimensions
    body = """
  %d = stablehlo.reshape %p0 : (tensor<6x4xf32>) -> tensor<1x4x6x1xf32>
  %e = stablehlo.reshape %d : (tensor<1x4x6x1xf32>) -> tensor<24x1xf32>
  %f = stablehlo.reshape %e : (tensor<24x1xf32>) -> tensor<4x6xf32>
  return %f : tensor<4x6xf32>"""
    text = fusion_module("loop", ["tensor<6x4xf32>"], ["tensor<4x6xf32>"], body)
    _check(text, [_rand((6, 4), "f32")])


def test_nan_splat_constant_is_a_literal_not_an_array():
    body = """
  %nan = stablehlo.constant dense<0x7FC00000> : tensor<300xf32>
  %y = stablehlo.select %p0, %p1, %nan : tensor<300xi1>, tensor<300xf32>
  return %y : tensor<300xf32>"""
    text = fusion_module("loop", ["tensor<300xi1>", "tensor<300xf32>"], ["tensor<300xf32>"], body)
    prog = _check(text, [_rand((300,), "i1"), _rand((300,), "f32")])
    assert "static const float" not in prog.fusion_library.source


@pytest.mark.parametrize("T", ["f32", "f64"])
@pytest.mark.parametrize("N,D", [(1, 1), (5, 7), (1000, 33), (4, 1000)])
def test_softmax_rows(T, N, D):
    _check(fill(SOFTMAX, N=N, D=D, T=T), [_rand((N, D), T)])


@pytest.mark.parametrize("T", ["f32", "f64"])
def test_layernorm_gelu_residual_multi_output(T):
    N, D = 67, 129
    text = fill(LAYERNORM_GELU, N=N, D=D, T=T, INVD=1.0 / D)
    args = [_rand((N, D), T), _rand((D,), T, 1, 1.0), _rand((D,), T, 2, 1.0), _rand((N, D), T, 3)]
    _check(text, args, rtol=2e-5, atol=2e-5)


def test_cross_entropy_forward_and_gradient():
    N, D = 37, 1000
    labels = np.random.default_rng(4).integers(0, D, N).astype(np.int32)
    _check(fill(XENT, N=N, D=D), [_rand((N, D), "f32", scale=5.0), labels], rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("T", ["f32", "f64", "i32"])
def test_column_reduction_bias_gradient(T):
    N, D = 1000, 33
    body = fill("""
  %zero = stablehlo.constant dense<0> : tensor<{T}>
  %s = stablehlo.reduce(%p0 init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<{N}x{D}x{T}>, tensor<{T}>) -> tensor<{D}x{T}>
  %m = stablehlo.reduce(%p0 init: %zero) applies stablehlo.maximum across dimensions = [0] : (tensor<{N}x{D}x{T}>, tensor<{T}>) -> tensor<{D}x{T}>
  %mb = stablehlo.broadcast_in_dim %m, dims = [1] : (tensor<{D}x{T}>) -> tensor<{N}x{D}x{T}>
  %d = stablehlo.subtract %p0, %mb : tensor<{N}x{D}x{T}>
  return %s, %d : tensor<{D}x{T}>, tensor<{N}x{D}x{T}>""", N=N, D=D, T=T)
    if T == "i32":
        body = body.replace("dense<0>", "dense<0>")
    else:
        body = body.replace("dense<0>", "dense<0.0>")
    text = fusion_module("reduction", [f"tensor<{N}x{D}x{T}>"],
                         [f"tensor<{D}x{T}>", f"tensor<{N}x{D}x{T}>"], body)
    _check(text, [_rand((N, D), T)], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("T", ["f32", "f64"])
@pytest.mark.parametrize("M,K,N", [(1, 1, 1), (64, 48, 80), (300, 33, 700)])
def test_dot_bias_gelu(T, M, K, N):
    text = fill(DOT_BIAS_GELU, M=M, K=K, N=N, T=T)
    args = [_rand((M, K), T, 0, 0.3), _rand((K, N), T, 1, 0.3), _rand((N,), T, 2)]
    _check(text, args, rtol=1e-4, atol=1e-5)


def test_refused_fusion_runs_op_by_op(caplog):
    body = """
  %q = stablehlo.divide %p0, %p1 : tensor<8xi32>
  return %q : tensor<8xi32>"""
    text = fusion_module("loop", ["tensor<8xi32>", "tensor<8xi32>"], ["tensor<8xi32>"], body)
    with caplog.at_level(logging.INFO, logger="openhlo.cpu"):
        prog = _check(text, [_rand((8,), "i32"), np.arange(1, 9, dtype=np.int32)],
                      generated=False)
    assert not prog.fusions_generated and len(prog.fusions_inlined) == 1
    assert "stablehlo.divide" in prog.fusions_inlined[0][1]
    assert "runs op by op" in caplog.text


INPLACE = """
func.func @main(%a: tensor<64x33xf32>, %b: tensor<64x33xf32>) -> (tensor<64x33xf32>, tensor<64x33xf32>) {
  %x = stablehlo.add %a, %b : tensor<64x33xf32>
  %y = stablehlo.composite "openhlo.fusion" %x {composite_attributes = {kind = "loop"}, decomposition = @fused_loop_0} : (tensor<64x33xf32>) -> tensor<64x33xf32>
  %z = stablehlo.composite "openhlo.fusion" %y {composite_attributes = {kind = "loop"}, decomposition = @fused_loop_1} : (tensor<64x33xf32>) -> tensor<64x33xf32>
  %w = stablehlo.multiply %y, %z : tensor<64x33xf32>
  return %z, %w : tensor<64x33xf32>, tensor<64x33xf32>
}
func.func private @fused_loop_0(%p0: tensor<64x33xf32>) -> tensor<64x33xf32> {
  %0 = stablehlo.exponential %p0 : tensor<64x33xf32>
  return %0 : tensor<64x33xf32>
}
func.func private @fused_loop_1(%p0: tensor<64x33xf32>) -> tensor<64x33xf32> {
  %0 = stablehlo.tanh %p0 : tensor<64x33xf32>
  %1 = stablehlo.add %0, %p0 : tensor<64x33xf32>
  return %1 : tensor<64x33xf32>
}
"""


def test_in_place_results_are_correct():
    # %x dies at the first fusion (written in place); %y is still read after the second,
    # which must therefore allocate.
    prog = _check(INPLACE, [_rand((64, 33), "f32"), _rand((64, 33), "f32", 1)])
    assert len(prog.fusions_generated) == 2


def test_inplace_pairs_follow_elementwise_paths():
    module = stablehlo.parse(INPLACE)
    composites = [op for op in module.lookup("main").body.operations
                  if op.name == "stablehlo.composite"]
    assert [inplace_pairs(op, module) for op in composites] == [[(0, 0)], [(0, 0)]]
    transposed = fusion_module("loop", ["tensor<4x4xf32>"], ["tensor<4x4xf32>"], """
  %t = stablehlo.transpose %p0, dims = [1, 0] : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %t : tensor<4x4xf32>""")
    module = stablehlo.parse(transposed)
    (op,) = [op for op in module.lookup("main").body.operations if op.name == "stablehlo.composite"]
    assert inplace_pairs(op, module) == []
    np.testing.assert_array_equal(
        pjrt.make_client("cpu").compile(transposed)(np.arange(16, dtype=np.float32).reshape(4, 4))[0],
        np.arange(16, dtype=np.float32).reshape(4, 4).T)


def test_fusions_in_and_after_a_generated_loop_one_library_per_program():
    text = """
func.func @main(%a: tensor<16xf32>) -> tensor<16xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %x = %a) : tensor<i32>, tensor<16xf32>
  cond {
    %n = stablehlo.constant dense<3> : tensor<i32>
    %p = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %j = stablehlo.add %i, %one : tensor<i32>
    %y = stablehlo.composite "openhlo.fusion" %x {composite_attributes = {kind = "loop"}, decomposition = @fused_loop_0} : (tensor<16xf32>) -> tensor<16xf32>
    stablehlo.return %j, %y : tensor<i32>, tensor<16xf32>
  }
  %z = stablehlo.composite "openhlo.fusion" %r#1 {composite_attributes = {kind = "loop"}, decomposition = @fused_loop_1} : (tensor<16xf32>) -> tensor<16xf32>
  return %z : tensor<16xf32>
}
func.func private @fused_loop_0(%p0: tensor<16xf32>) -> tensor<16xf32> {
  %0 = stablehlo.sine %p0 : tensor<16xf32>
  return %0 : tensor<16xf32>
}
func.func private @fused_loop_1(%p0: tensor<16xf32>) -> tensor<16xf32> {
  %0 = stablehlo.sine %p0 : tensor<16xf32>
  return %0 : tensor<16xf32>
}
"""
    before = len(build.COMPILE_TIMES)
    prog = _check(text, [_rand((16,), "f32")])
    # The loop, fusion included, is one generated while kernel; the fusion after it another.
    assert len(prog.compiled) == 1 and len(prog.fusions_generated) == 1
    # One translation unit (none on a cache hit) holds the loop and the fusion kernels.
    assert len(build.COMPILE_TIMES) - before <= 1


def test_second_compile_in_a_fresh_process_compiles_nothing(tmp_path):
    import os
    import subprocess
    import sys
    script = (
        "import numpy as np, pjrt\n"
        "from pjrt.plugins.cpu.codegen import build\n"
        "from pjrt.plugins.cpu.tests.fusion_cases import SOFTMAX, fill\n"
        "exe = pjrt.make_client('cpu').compile(fill(SOFTMAX, N=5, D=9, T='f32'))\n"
        "assert exe.program.fusions_generated\n"
        "print(len(build.COMPILE_TIMES))\n")
    env = dict(os.environ, OPENHLO_CACHE_DIR=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, check=True).stdout.strip() for _ in range(2)]
    assert runs == ["1", "0"]
    assert len(list((tmp_path / "cpu_kernels").glob("*.so"))) == 1
