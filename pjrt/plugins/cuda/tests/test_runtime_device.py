"""The CUDA runtime on a real GPU (skipped without a driver and nvcc): a kernel compiled
here with nvcc, launched through an executable description with a copy and a cuBLAS gemm,
with and without a CUDA graph, checked against numpy; a failing launch's error. The same
checks on the fake driver are in test_runtime.py; these prove the driver ABI."""
import os
import subprocess

import ml_dtypes
import numpy as np
import pytest

from pjrt.plugins.cuda import runtime
from pjrt.plugins.cuda.nvcc import find_tool
from pjrt.plugins.cuda.tests.runtime_support import (download, gemm_case, load,
                                                       write_executable)

N = 1 << 20
KERNEL = r"""
extern "C" __global__ void axpy(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < %d) y[i] = 2.0f * x[i] + 1.0f;
}
""" % N


@pytest.fixture(scope="module")
def gpu():
    if os.environ.get(runtime.DRIVER_ENV):
        pytest.skip(f"{runtime.DRIVER_ENV} is set: not the system's driver")
    try:
        driver = runtime.open_driver()
    except runtime.NoCudaDriverError as exc:
        pytest.skip(str(exc))
    return runtime.native().Device(driver, 0, runtime.cublas_path())


def compile_cubin(directory, compute_capability: int):
    nvcc = find_tool("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc to compile the test kernel")
    source = directory / "axpy.cu"
    source.write_text(KERNEL)
    arch = f"sm_{compute_capability}" + ("a" if compute_capability == 90 else "")
    subprocess.run([nvcc, "-cubin", f"-arch={arch}", "-o", str(directory / "kernels.cubin"),
                    str(source)], check=True, capture_output=True, text=True)


def axpy_executable(directory, device, block=256):
    doc = {"params": [{"shape": [N], "dtype": "f32"}], "results": [1, 2],
           "buffers": [{"id": 0, "bytes": 4 * N, "kind": "param", "param": 0},
                       {"id": 1, "bytes": 4 * N, "kind": "temp"},
                       {"id": 2, "bytes": 4 * N, "kind": "temp"}],
           "steps": [{"op": "launch", "kernel": "axpy", "grid": [N // 256], "block": [block],
                      "shared": 0, "args": [0, 1]},
                     {"op": "copy", "src": 1, "dst": 2, "bytes": 4 * N}]}
    write_executable(directory, doc)
    compile_cubin(directory, device.compute_capability)
    return directory


@pytest.mark.parametrize("use_graph", [False, True])
def test_kernel_and_copy_on_the_gpu(gpu, tmp_path, use_graph):
    executable = load(gpu, axpy_executable(tmp_path, gpu), use_graph=use_graph)
    x = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    arg = gpu.upload(x)
    for _ in range(3):
        (y, copied), event = executable.run([arg], [False])
        event.synchronize()
        np.testing.assert_array_equal(download(gpu, y, np.float32, (N,)), 2 * x + 1)
        np.testing.assert_array_equal(download(gpu, copied, np.float32, (N,)), 2 * x + 1)
        del y, copied
    if use_graph:
        assert executable.stats()["graph_captures"] == 1
        assert executable.stats()["graph_launches"] == 3


@pytest.mark.parametrize("dtype", ["f32", "bf16", "f16"])
@pytest.mark.parametrize("trans_a,trans_b,batch", [(0, 0, 1), (1, 0, 2), (0, 1, 3), (1, 1, 1)])
def test_cublas_gemm_matches_numpy(gpu, tmp_path, dtype, trans_a, trans_b, batch):
    m, n, k = 96, 80, 64
    np_dtype = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16}[dtype]
    a, b, doc, expected = gemm_case(dtype, np_dtype, trans_a, trans_b, batch, m, n, k, 1)
    executable = load(gpu, write_executable(tmp_path, doc))
    (c,), event = executable.run([gpu.upload(a), gpu.upload(b)], [False, False])
    event.synchronize()
    got = download(gpu, c, np_dtype, (batch, m, n)).astype(np.float32)
    # f32: cuBLAS's default math (no TF32 with CUBLAS_COMPUTE_32F); halves round the output.
    tolerance = {"f32": 1e-4, "bf16": 5e-2, "f16": 1e-2}[dtype]
    np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance * 8)


def test_invalid_launch_names_the_kernel(gpu, tmp_path):
    executable = load(gpu, axpy_executable(tmp_path, gpu, block=4096))  # > 1024 threads
    arg = gpu.upload(np.zeros(N, np.float32))
    with pytest.raises(runtime.native().CudaError, match=r"cuLaunchKernel\(axpy\) failed: "
                                                         r"CUDA_ERROR_INVALID_VALUE"):
        executable.run([arg], [False])
