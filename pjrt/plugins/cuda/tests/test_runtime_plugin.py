"""The cuda backend's client on the fake driver: registration, buffers, executables bound
to programs (ahead-of-time directories and the compile hook), donation, and the error of a
machine without a driver."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import pjrt
from pjrt.api import PluginError, UnimplementedError
from pjrt.plugins.cuda import runtime

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))))
COPY_PROGRAM = """
func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  return %x : tensor<2x3xf32>
}
"""
DOT_PROGRAM = """
func.func @main(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
      : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}
"""
COPY_STEPS = {"format": runtime.FORMAT, "target": "sm_90a", "cubin": "kernels.cubin",
              "params": [{"shape": [2, 3], "dtype": "f32"}], "results": [1],
              "buffers": [{"id": 0, "bytes": 24, "kind": "param", "param": 0},
                          {"id": 1, "bytes": 24, "kind": "temp", "alias_param": 0}],
              "steps": [{"op": "copy", "src": 0, "dst": 1, "bytes": 24}]}
DOT_STEPS = {"format": runtime.FORMAT, "target": "sm_90a", "cubin": "kernels.cubin",
             "params": [{"shape": [2, 3], "dtype": "f32"}, {"shape": [3, 4], "dtype": "f32"}],
             "results": [2],
             "buffers": [{"id": 0, "bytes": 24, "kind": "param", "param": 0},
                         {"id": 1, "bytes": 48, "kind": "param", "param": 1},
                         {"id": 2, "bytes": 32, "kind": "temp"}],
             "steps": [{"op": "gemm", "dtype": "f32", "m": 2, "n": 4, "k": 3, "a": 0, "b": 1,
                        "c": 2, "lda": 3, "ldb": 4, "ldc": 4}]}


def directory_of(tmp_path, doc):
    (tmp_path / "executable.json").write_text(json.dumps(doc))
    return tmp_path


def test_cuda_is_a_registered_backend():
    assert "cuda" in pjrt.available_backends()


def test_buffers_live_on_the_device(fake_cuda):
    client = pjrt.make_client("cuda")
    assert client.platform_name == "cuda"
    assert [d.kind for d in client.devices()] == ["OpenHLO fake GPU"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    buffer = client.buffer_from_numpy(x)
    assert fake_cuda.log()["calls"]["cuMemcpyHtoDAsync_v2"] == 1
    np.testing.assert_array_equal(buffer.to_numpy(), x)
    copied = buffer.copy_to_device(client.devices()[0])
    buffer.delete()
    np.testing.assert_array_equal(copied.to_numpy(), x)
    assert client.memory_stats()["bytes_in_use"] == 512


def test_deleted_buffer_refuses_every_use(fake_cuda):
    from pjrt.api import BufferDeletedError
    client = pjrt.make_client("cuda")
    buffer = client.buffer_from_numpy(np.ones((2, 3), np.float32))
    buffer.delete()
    assert buffer.is_deleted
    for use in (buffer.to_numpy, buffer.block_until_ready,
                lambda: buffer.copy_to_device(client.devices()[0])):
        with pytest.raises(BufferDeletedError, match="deleted or donated buffer"):
            use()


def test_ahead_of_time_directory_runs_with_donation(fake_cuda, tmp_path):
    client = pjrt.make_client("cuda")
    executable = client.load_directory(directory_of(tmp_path, COPY_STEPS), COPY_PROGRAM)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(executable(x)[0], x)
    argument = client.buffer_from_numpy(x)
    address = argument._native.address
    (result,) = executable.execute([argument], donate=[0])
    assert argument.is_deleted
    assert result._native.address == address  # written in place
    np.testing.assert_array_equal(result.to_numpy(), x)


def test_compile_goes_through_the_code_generator(fake_cuda):
    """client.compile runs the code generator (aot.py: a lone dot is one GEMM step, no
    kernel, so no nvcc) and the directory it writes; the fake cuBLAS computes the product."""
    client = pjrt.make_client("cuda")
    executable = client.compile(DOT_PROGRAM)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(executable(a, b)[0], a @ b, rtol=1e-5, atol=1e-6)
    assert len(fake_cuda.log()["gemms"]) == 1  # one cuBLAS call (column-major: m, n swapped)
    assert executable._natives[client.devices()[0]].stats()["graph_captures"] == 1


UNCLAIMED_PROGRAM = """
func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = "stablehlo.sort"(%x) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %1 = stablehlo.compare LT, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  }) {dimension = 0 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
"""


def test_unclaimed_program_is_refused_with_the_reason(fake_cuda):
    client = pjrt.make_client("cuda")
    with pytest.raises(UnimplementedError, match="stablehlo.sort"):
        client.compile(UNCLAIMED_PROGRAM)


def test_no_driver_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("OPENHLO_CUDA_DRIVER", "/nonexistent/libcuda.so.1")
    with pytest.raises(PluginError, match="no CUDA driver: /nonexistent/libcuda.so.1 not "
                                          "found"):
        pjrt.make_client("cuda")


def test_importing_needs_no_driver(tmp_path):
    code = ("import pjrt, pjrt.plugins.cuda.plugin, pjrt.plugins.cuda.runtime; "
            "print(pjrt.available_backends())")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "OPENHLO_CUDA_DRIVER": "/nonexistent",
                                 "HOME": str(tmp_path)}, cwd=REPOSITORY)
    assert result.returncode == 0, result.stderr
    assert "cuda" in result.stdout
