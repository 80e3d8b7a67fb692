"""Numerics of the cuda backend's executables without a GPU: each compiled directory runs on the
CPU (host_emulation.py: the same kernels.cu through the host compiler, one thread doing every
task of the grid-stride loops, a warp of one lane; the steps as executable.json says) and its
results are compared with the reference interpreter on random inputs. This checks the generated
CUDA C's arithmetic and the description (buffers, offsets, copies, GEMM fields) end to end; the
device's own math library and cuBLAS are checked on the GPU."""
import numpy as np
import pytest

import stablehlo
from stablehlo.interpreter import evaluate
from pjrt.plugins.cuda import aot, nvcc
from pjrt.plugins.cuda.tests import host_emulation
from pjrt.plugins.cuda.tests.programs import (ELEMENTWISE, MIXED, REPO, SOFTMAX,
                                              SOFTMAX_LONG_ROWS)

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
    ("bitcasts", BITCASTS, 0), ("attention_scores", ATTENTION_SCORES, 1e-5)])
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
