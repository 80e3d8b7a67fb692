"""Numerics of the cuda backend's executables without a GPU: each compiled directory runs on the
CPU (host_emulation.py: the same kernels.cu through the host compiler, one thread doing every
task of the grid-stride loops, a warp of one lane; the steps as executable.json says) and its
results are compared with the reference interpreter on random inputs. This checks the generated
CUDA C's arithmetic and the description (buffers, offsets, copies, GEMM fields) end to end; the
device's own math library and cuBLAS are checked on the GPU."""
import json
import pathlib

import numpy as np
import pytest

import stablehlo
from stablehlo.interpreter import evaluate
from pjrt.plugins.cuda import aot, nvcc
from pjrt.plugins.cuda.tests import host_emulation
from pjrt.plugins.cuda.tests.programs import (BLOCK_ROW_REDUCTIONS, ELEMENTWISE, MIXED,
                                              REDUCE_WINDOWS, REPO, SHIFTS, SOFTMAX,
                                              SOFTMAX_BLOCK_ROWS, SOFTMAX_LONG_ROWS,
                                              SOFTMAX_RECOMPUTED)

NVCC = nvcc.find_tool("nvcc")
pytestmark = pytest.mark.skipif(NVCC is None or host_emulation.host_compiler() is None,
                                reason="needs nvcc (CUDA toolkit) and g++")

INNER_DIMS_REDUCE = """
module @m {
  func.func public @main(%x: tensor<3x5x7xf32>) -> tensor<3x7xf32> {
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1]
        : (tensor<3x5x7xf32>, tensor<f32>) -> tensor<3x7xf32>
    return %s : tensor<3x7xf32>
  }
}
"""

NARROW_CONSTANTS = """
module @m {
  func.func public @main(%x: tensor<4x3xbf16>, %y: tensor<4x3xf16>)
      -> (tensor<4xbf16>, tensor<4x3xf16>) {
    %c = stablehlo.constant dense<[[1.5, -2.0, 0.1], [3.0, 0.25, 0.1], [1.0, 2.0, 3.0],
                                   [4.0, 5.0, 6.0]]> : tensor<4x3xbf16>
    %d = stablehlo.constant dense<[[1.5, -2.0, 0.1], [3.0, 0.25, 0.1]]> : tensor<2x3xf16>
    %dd = stablehlo.concatenate %d, %d, dim = 0
        : (tensor<2x3xf16>, tensor<2x3xf16>) -> tensor<4x3xf16>
    %a = stablehlo.add %x, %c : tensor<4x3xbf16>
    %ninf = stablehlo.constant dense<0xFF80> : tensor<bf16>
    %m = stablehlo.reduce(%a init: %ninf) applies stablehlo.maximum across dimensions = [1]
        : (tensor<4x3xbf16>, tensor<bf16>) -> tensor<4xbf16>
    %b = stablehlo.multiply %y, %dd : tensor<4x3xf16>
    %e = stablehlo.exponential %b : tensor<4x3xf16>
    return %m, %e : tensor<4xbf16>, tensor<4x3xf16>
  }
}
"""

BITCASTS = """
module @m {
  func.func public @main(%x: tensor<4x8xf32>) -> (tensor<4x8xui32>, tensor<4x8x4xui8>) {
    %a = stablehlo.add %x, %x : tensor<4x8xf32>
    %b = stablehlo.bitcast_convert %a : (tensor<4x8xf32>) -> tensor<4x8xui32>
    %c = stablehlo.bitcast_convert %a : (tensor<4x8xf32>) -> tensor<4x8x4xui8>
    return %b, %c : tensor<4x8xui32>, tensor<4x8x4xui8>
  }
}
"""

# attention's q.k: batch dims (B, H) of [B, S, H, D] are no one strided run: a step per B
ATTENTION_SCORES = """
module @m {
  func.func public @main(%q: tensor<2x5x3x4xf32>, %k: tensor<2x6x3x4xf32>)
      -> tensor<2x3x5x6xf32> {
    %s = stablehlo.dot_general %q, %k, batching_dims = [0, 2] x [0, 2],
        contracting_dims = [3] x [3]
        : (tensor<2x5x3x4xf32>, tensor<2x6x3x4xf32>) -> tensor<2x3x5x6xf32>
    return %s : tensor<2x3x5x6xf32>
  }
}
"""

HELLO = (REPO / "examples" / "hello.mlir").read_text()


def _inputs(module, rng) -> list:
    func = module.lookup("main")
    return [rng.standard_normal(tuple(t.shape)).astype(
        host_emulation.dtype_of(str(t.element_type))) for t in func.type.inputs]


@pytest.mark.parametrize("name, text, rtol", [
    ("hello", HELLO, 1e-5), ("elementwise", ELEMENTWISE, 1e-2), ("softmax", SOFTMAX, 1e-5),
    ("mixed", MIXED, 1e-5), ("inner_dims_reduce", INNER_DIMS_REDUCE, 1e-5),
    ("narrow_constants", NARROW_CONSTANTS, 1e-2), ("softmax_long_rows", SOFTMAX_LONG_ROWS, 1e-5),
    ("bitcasts", BITCASTS, 0), ("attention_scores", ATTENTION_SCORES, 1e-5),
    ("softmax_block_rows", SOFTMAX_BLOCK_ROWS, 1e-5),
    ("softmax_recomputed", SOFTMAX_RECOMPUTED, 1e-5)])
def test_results_match_the_interpreter(name, text, rtol, tmp_path):
    module = stablehlo.parse(text)
    args = _inputs(module, np.random.default_rng(0))
    expected = evaluate(stablehlo.parse(text), args)
    out = aot.compile_module(module, out_dir=tmp_path / name)
    got = host_emulation.HostExecutable(out, NVCC, tmp_path)(args)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g.astype(np.float64), np.asarray(e).astype(np.float64),
                                   rtol=rtol, atol=rtol)


def test_shifts_match_the_interpreter(tmp_path):
    """Shifts by every amount from -2 (read as unsigned: past the width) to the bit width + 2,
    on values with the top bit set and clear: exact."""
    module = stablehlo.parse(SHIFTS)
    rng = np.random.default_rng(3)
    args = []
    for t in module.lookup("main").type.inputs[::2]:
        dtype = host_emulation.dtype_of(str(t.element_type))
        width = dtype.itemsize * 8
        values = rng.integers(0, 256, (64, dtype.itemsize), dtype=np.uint8).view(dtype)
        amounts = (np.arange(64) % (width + 5) - 2).astype(dtype)
        args += [values.reshape(64), amounts]
    expected = evaluate(stablehlo.parse(SHIFTS), args)
    out = aot.compile_module(module, out_dir=tmp_path / "shifts")
    got = host_emulation.HostExecutable(out, NVCC, tmp_path)(args)
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.dtype
        np.testing.assert_array_equal(g, np.asarray(e))


# Overlapping updates (index 1 twice) through a region whose result depends on their order,
# and rows out of bounds (7, -1) that the spec skips.
SCATTER_IN_ORDER = """
module @m {
  func.func public @main(%x: tensor<5x3xf32>, %u: tensor<5x3xf32>) -> tensor<5x3xf32> {
    %i = stablehlo.constant dense<[[1], [1], [4], [7], [-1]]> : tensor<5x1xi32>
    %s = "stablehlo.scatter"(%x, %i, %u) <{scatter_dimension_numbers = #stablehlo.scatter<
        update_window_dims = [1], inserted_window_dims = [0],
        scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %m = stablehlo.multiply %a, %b : tensor<f32>
      %two = stablehlo.constant dense<2.0> : tensor<f32>
      %t = stablehlo.add %m, %two : tensor<f32>
      stablehlo.return %t : tensor<f32>
    }) : (tensor<5x3xf32>, tensor<5x1xi32>, tensor<5x3xf32>) -> tensor<5x3xf32>
    return %s : tensor<5x3xf32>
  }
}
"""

# Two results combined by one region that reads both (an argmax: the larger value and its
# label), with a batching dim (dim 0 of the inputs and of the indices) and indices that are a
# parameter (some out of bounds).
SCATTER_VARIADIC_BATCHED = """
module @m {
  func.func public @main(%x: tensor<2x6xf32>, %y: tensor<2x6xi32>, %i: tensor<2x4x1xi32>,
                         %u: tensor<2x4xf32>, %v: tensor<2x4xi32>)
      -> (tensor<2x6xf32>, tensor<2x6xi32>) {
    %s:2 = "stablehlo.scatter"(%x, %y, %i, %u, %v) <{scatter_dimension_numbers =
        #stablehlo.scatter<inserted_window_dims = [1], input_batching_dims = [0],
        scatter_indices_batching_dims = [0], scatter_dims_to_operand_dims = [1],
        index_vector_dim = 2>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<i32>, %c: tensor<f32>, %d: tensor<i32>):
      %g = stablehlo.compare GT, %c, %a : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %t = stablehlo.select %g, %c, %a : tensor<i1>, tensor<f32>
      %n = stablehlo.select %g, %d, %b : tensor<i1>, tensor<i32>
      stablehlo.return %t, %n : tensor<f32>, tensor<i32>
    }) : (tensor<2x6xf32>, tensor<2x6xi32>, tensor<2x4x1xi32>, tensor<2x4xf32>,
          tensor<2x4xi32>) -> (tensor<2x6xf32>, tensor<2x6xi32>)
    return %s#0, %s#1 : tensor<2x6xf32>, tensor<2x6xi32>
  }
}
"""

# Start indices are parameters: the tests pass some out of range, which the ops clamp.
GATHER_CLAMPED = """
module @m {
  func.func public @main(%x: tensor<6x4x3xf32>, %i: tensor<5x2xi32>) -> tensor<5x2x3xf32> {
    %g = "stablehlo.gather"(%x, %i) <{dimension_numbers = #stablehlo.gather<
        offset_dims = [1, 2], collapsed_slice_dims = [0], start_index_map = [0, 1],
        index_vector_dim = 1>, slice_sizes = array<i64: 1, 2, 3>}>
        : (tensor<6x4x3xf32>, tensor<5x2xi32>) -> tensor<5x2x3xf32>
    return %g : tensor<5x2x3xf32>
  }
}
"""

DYNAMIC_SLICES = """
module @m {
  func.func public @main(%x: tensor<7x5xf32>, %u: tensor<2x3xf32>, %a: tensor<i64>,
                         %b: tensor<i32>) -> (tensor<3x2xf32>, tensor<7x5xf32>) {
    %bb = stablehlo.convert %b : (tensor<i32>) -> tensor<i64>
    %s = stablehlo.dynamic_slice %x, %a, %bb, sizes = [3, 2]
        : (tensor<7x5xf32>, tensor<i64>, tensor<i64>) -> tensor<3x2xf32>
    %aa = stablehlo.convert %a : (tensor<i64>) -> tensor<i32>
    %d = stablehlo.dynamic_update_slice %x, %u, %b, %aa
        : (tensor<7x5xf32>, tensor<2x3xf32>, tensor<i32>, tensor<i32>) -> tensor<7x5xf32>
    return %s, %d : tensor<3x2xf32>, tensor<7x5xf32>
  }
}
"""


def _indexing_inputs(module, rng) -> list:
    """Floats standard normal, integers (indices) in [-3, 9): some out of range."""
    out = []
    for t in module.lookup("main").type.inputs:
        dtype = host_emulation.dtype_of(str(t.element_type))
        if np.issubdtype(dtype, np.integer):
            out.append(rng.integers(-3, 9, tuple(t.shape)).astype(dtype))
        else:
            out.append(rng.standard_normal(tuple(t.shape)).astype(dtype))
    return out


def _check_indexing(text: str, out_dir, tmp_path, seeds=range(3)) -> dict:
    """Compile ``text``, run it on a few input draws, compare with the interpreter exactly
    (these ops move or combine values in the interpreter's order); ptxas.json back."""
    out = aot.compile_module(stablehlo.parse(text), out_dir=out_dir)
    run = host_emulation.HostExecutable(out, NVCC, tmp_path)
    for seed in seeds:
        args = _indexing_inputs(stablehlo.parse(text), np.random.default_rng(seed))
        expected = evaluate(stablehlo.parse(text), args)
        for g, e in zip(run(args), expected, strict=True):
            assert g.shape == e.shape and g.dtype == e.dtype
            np.testing.assert_array_equal(g, np.asarray(e))
    return json.loads((out / "ptxas.json").read_text())


@pytest.mark.parametrize("name, text", [
    ("softmax", SOFTMAX), ("softmax_long_rows", SOFTMAX_LONG_ROWS),
    ("softmax_block_rows", SOFTMAX_BLOCK_ROWS), ("softmax_recomputed", SOFTMAX_RECOMPUTED)])
def test_rows_shared_by_threads_match_the_interpreter(name, text, tmp_path):
    """A row per thread, warp and block on a block of real host threads (the shuffles,
    barriers and shared memory between them: host_emulation's ``threaded``)."""
    module = stablehlo.parse(text)
    args = _inputs(module, np.random.default_rng(2))
    expected = evaluate(stablehlo.parse(text), args)
    out = aot.compile_module(module, out_dir=tmp_path / name)
    (got,) = host_emulation.HostExecutable(out, NVCC, tmp_path, threaded=True)(args)
    np.testing.assert_allclose(got, expected[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("threaded", [False, True])
def test_block_row_reductions_match_float64(threaded, tmp_path):
    """max, min and an integer sum over rows of a thread block each against numpy: exact,
    as any combination order gives the same result (on one thread, and on a block of
    threads)."""
    module = stablehlo.parse(BLOCK_ROW_REDUCTIONS)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 2053)).astype(np.float32)
    x[1, 2052] = 9.0  # the extremes in the tails and heads of the rows' thread shares
    x[2, 0] = -9.0
    i = rng.integers(-1000, 1000, (3, 3001)).astype(np.int32)
    h = rng.standard_normal((2, 2048)).astype(host_emulation.dtype_of("bf16"))
    out = aot.compile_module(module, out_dir=tmp_path / "block_rows")
    assert "__syncthreads();" in (out / "kernels.cu").read_text()
    m, n, s, hs, d = host_emulation.HostExecutable(out, NVCC, tmp_path, threaded)([x, i, h])
    np.testing.assert_array_equal(m, x.max(axis=1))
    np.testing.assert_array_equal(n, x.min(axis=1))
    np.testing.assert_array_equal(s, i.astype(np.int64).sum(axis=1).astype(np.int32))
    np.testing.assert_array_equal(hs, h.max(axis=1))
    np.testing.assert_array_equal(d, x - x.max(axis=1, keepdims=True))


@pytest.mark.parametrize("name, text", [
    ("scatter_in_order", SCATTER_IN_ORDER), ("scatter_variadic_batched", SCATTER_VARIADIC_BATCHED),
    ("gather_clamped", GATHER_CLAMPED),
    ("dynamic_slices", DYNAMIC_SLICES), ("reduce_windows", REDUCE_WINDOWS)])
def test_indexing_ops_match_the_interpreter(name, text, tmp_path):
    ptxas = _check_indexing(text, tmp_path / name, tmp_path)
    indexing = [k for k in ptxas.values() if k["kind"] == "indexing"]
    assert indexing and not aot.spills({n: k for n, k in ptxas.items()
                                        if k["kind"] == "indexing"})


TESTDATA = pathlib.Path("/work/shared/conformance/stablehlo/testdata")


@pytest.mark.skipif(not TESTDATA.is_dir(), reason="needs the StableHLO conformance testdata")
@pytest.mark.parametrize("name", [
    "scatter_add_bfloat16_3_5_40_bfloat16_3_5_2", "scatter_mul_float32_3_5_40_float32_3_5_2",
    "scatter_min_int64_4_2_3_5_int64_4_3", "scatter_uint8_5_6_7_uint8_2_7",
    "gather_float32_10_10_10_int64_1_4_2", "gather_float32_2_6_3_int64_2_3",
    "dynamic_slice_float32_7_5_3_int64_3", "dynamic_update_slice_bfloat16_3_bfloat16_1_int64_1",
    "reduce_window_add_float32_4_6", "reduce_window_max_bfloat16_4_6",
    "reduce_window_min_float32_1_1600", "shift_left_int32_1_20_int32_20_20",
    "shift_right_arithmetic_uint32_20_20_uint32_20_20",
    "shift_right_logical_int8_20_20_int8_20_20"])
def test_indexing_testdata_match_the_interpreter(name, tmp_path):
    from tools.cuda_aot_report import program_of_testdata
    module = stablehlo.parse((TESTDATA / f"{name}.mlir").read_text())
    program_of_testdata(module)
    _check_indexing(str(module), tmp_path / name, tmp_path, seeds=range(2))
