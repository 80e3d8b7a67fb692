"""The CUDA runtime on the fake driver (fake_driver.cc): transfers, the caching allocator,
executables (launch arguments, gemm operand mapping against numpy, copies), CUDA graphs,
donation and the errors of failing driver calls and of bad executable descriptions."""
import ctypes
import json
import os
import re
import subprocess

import ml_dtypes
import numpy as np
import pytest

from pjrt.plugins.cuda import runtime
from pjrt.plugins.cuda.nvcc import find_tool
from pjrt.plugins.cuda.tests.runtime_support import (download, gemm_case, load,
                                                       write_executable)


def host_bytes(address: int, nbytes: int) -> bytes:
    """What device memory holds: the fake's device memory is host memory."""
    return ctypes.string_at(address, nbytes)


def test_transfers_round_trip(cuda_device):
    for array in (np.arange(24, dtype=np.float32).reshape(4, 6) - 7.5,
                  np.array([1.5, -2.25, 3.0], dtype=ml_dtypes.bfloat16),
                  np.arange(5, dtype=np.int64) * 10**12):
        buffer = cuda_device.upload(array)
        assert buffer.nbytes == array.nbytes
        np.testing.assert_array_equal(download(cuda_device, buffer, array.dtype, array.shape),
                                      array)
        copied = cuda_device.copy(buffer)
        assert copied.address != buffer.address
        np.testing.assert_array_equal(download(cuda_device, copied, array.dtype, array.shape),
                                      array)


def test_allocator_reuses_freed_blocks_and_reports_peak(cuda_device, fake_cuda):
    first = cuda_device.allocate(1000)
    second = cuda_device.allocate(3 << 20)
    address = first.address
    stats = cuda_device.allocator_stats()
    assert stats["bytes_in_use"] == 1024 + (4 << 20)  # 512-byte and 2 MiB size classes
    first.release()
    again = cuda_device.allocate(900)  # the same size class: the freed block
    assert again.address == address
    second.release()
    stats = cuda_device.allocator_stats()
    assert stats["cache_hits"] == 1
    assert stats["driver_allocations"] == 2
    assert stats["peak_bytes_in_use"] == 1024 + (4 << 20)
    assert stats["bytes_in_use"] == 1024
    assert stats["bytes_cached"] == 4 << 20
    assert fake_cuda.log()["calls"]["cuMemAlloc_v2"] == 2
    cuda_device.release_cached()
    assert cuda_device.allocator_stats()["bytes_cached"] == 0
    assert fake_cuda.log()["calls"]["cuMemFree_v2"] == 1


def test_out_of_memory_releases_the_cache_and_retries(cuda_device, fake_cuda):
    fake_cuda.set_memory_limit(5 << 20)
    cuda_device.allocate(2 << 20).release()  # a cached 2 MiB block
    block = cuda_device.allocate(3 << 20)    # 4 MiB: fits only once the cache is released
    assert block.nbytes == 3 << 20
    stats = cuda_device.allocator_stats()
    assert (stats["driver_frees"], stats["bytes_cached"]) == (1, 0)
    with pytest.raises(runtime.native().CudaError, match="CUDA_ERROR_OUT_OF_MEMORY"):
        cuda_device.allocate(2 << 20)  # 4 + 2 MiB: nothing left to release


THREE_STEPS = {
    "params": [{"shape": [4, 8], "dtype": "f32"}],
    "results": [2, 3],
    "buffers": [{"id": 0, "bytes": 128, "kind": "param", "param": 0},
                {"id": 1, "bytes": 16, "kind": "const", "const": "const_0.bin"},
                {"id": 2, "bytes": 256, "kind": "temp"},
                {"id": 3, "bytes": 128, "kind": "temp"}],
    "steps": [{"op": "launch", "kernel": "k0", "grid": [4, 2, 1], "block": [128, 1, 1],
               "shared": 0, "args": [0, {"id": 2, "offset": 64}]},
              {"op": "copy", "src": 0, "dst": 3, "bytes": 128},
              {"op": "launch", "kernel": "k1", "grid": [1], "block": [32, 4],
               "shared": 4096, "args": [1, 2, 3]}],
}
CONST = np.array([1.0, 2.0, 3.0, 4.0], np.float32)


def three_steps(tmp_path):
    return write_executable(tmp_path, THREE_STEPS, {"k0": 2, "k1": 3},
                            {"const_0.bin": CONST.tobytes()})


def test_executable_records_launches_with_the_buffers_addresses(cuda_device, fake_cuda,
                                                                tmp_path):
    executable = load(cuda_device, three_steps(tmp_path))
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    arg = cuda_device.upload(x)
    (out, copied), event = executable.run([arg], [False])
    event.synchronize()
    launches = fake_cuda.log()["launches"]
    assert [(l["kernel"], l["grid"], l["block"], l["shared"]) for l in launches] == [
        ("k0", [4, 2, 1], [128, 1, 1], 0), ("k1", [1, 1, 1], [32, 4, 1], 4096)]
    assert launches[0]["args"] == [arg.address, out.address + 64]
    const_address, temp, result = launches[1]["args"]
    assert (temp, result) == (out.address, copied.address)
    assert host_bytes(const_address, 16) == CONST.tobytes()  # the constant, uploaded at load
    # The copy step really copied: the second result is the argument's bytes.
    np.testing.assert_array_equal(download(cuda_device, copied, np.float32, (4, 8)), x)
    assert not any(l["via_graph"] for l in launches)


def test_cuda_graph_is_captured_once_then_replayed(cuda_device, fake_cuda, tmp_path):
    executable = load(cuda_device, three_steps(tmp_path), use_graph=True)
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    arg = cuda_device.upload(x)
    for _ in range(3):
        results, event = executable.run([arg], [False])
        event.synchronize()
        np.testing.assert_array_equal(download(cuda_device, results[1], np.float32, (4, 8)), x)
        del results  # freed: the next run gets the same blocks, so the same graph
    assert executable.stats() == {"runs": 3, "graph_captures": 1, "graph_launches": 3}
    log = fake_cuda.log()
    assert log["calls"]["cuStreamBeginCapture_v2"] == 1
    assert log["calls"]["cuGraphInstantiateWithFlags"] == 1
    assert log["calls"]["cuGraphLaunch"] == 3
    assert [l["kernel"] for l in log["launches"]] == ["k0", "k1"] * 3
    assert all(l["via_graph"] for l in log["launches"])
    # Another argument buffer is another address: a second capture.
    other = cuda_device.upload(x + 1)
    results, event = executable.run([other], [False])
    event.synchronize()
    np.testing.assert_array_equal(download(cuda_device, results[1], np.float32, (4, 8)), x + 1)
    assert executable.stats()["graph_captures"] == 2


def test_results_freed_in_any_order_replay_one_graph(cuda_device, fake_cuda, tmp_path):
    """The first GPU run captured twice: its loop freed the first result before the second,
    and the allocator's most recently freed block went to the first result of the next run,
    so the addresses (the graph's key) came out swapped. A fresh result now asks for its
    block of the last graph."""
    executable = load(cuda_device, three_steps(tmp_path), use_graph=True)
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    arg = cuda_device.upload(x)
    addresses = []
    for _ in range(3):
        (out, copied), event = executable.run([arg], [False])
        event.synchronize()
        np.testing.assert_array_equal(download(cuda_device, copied, np.float32, (4, 8)), x)
        addresses.append((out.address, copied.address))
        del out, copied  # the first result freed first
    assert addresses == [addresses[0]] * 3
    assert executable.stats() == {"runs": 3, "graph_captures": 1, "graph_launches": 3}
    # A result still held keeps its block: the next run gets another one, another graph.
    (held, _), event = executable.run([arg], [False])
    (out, copied), event = executable.run([arg], [False])
    event.synchronize()
    assert out.address != held.address
    assert executable.stats()["graph_captures"] == 2
    np.testing.assert_array_equal(download(cuda_device, copied, np.float32, (4, 8)), x)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("trans_a,trans_b,batch", [(0, 0, 1), (1, 0, 1), (0, 1, 2), (1, 1, 3)])
def test_gemm_matches_numpy(cuda_device, tmp_path, dtype, trans_a, trans_b, batch):
    m, n, k = 5, 3, 4
    np_dtype = np.float32 if dtype == "f32" else ml_dtypes.bfloat16
    a, b, doc, expected = gemm_case(dtype, np_dtype, trans_a, trans_b, batch, m, n, k, 0)
    executable = load(cuda_device, write_executable(tmp_path, doc))
    (c,), event = executable.run([cuda_device.upload(a), cuda_device.upload(b)], [False, False])
    event.synchronize()
    got = download(cuda_device, c, np_dtype, (batch, m, n)).astype(np.float32)
    tolerance = 1e-5 if dtype == "f32" else 2e-2
    np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance)


def test_donated_argument_holds_the_aliased_result(cuda_device, tmp_path):
    doc = {"params": [{"shape": [4], "dtype": "f32"}], "results": [1],
           "buffers": [{"id": 0, "bytes": 16, "kind": "param", "param": 0},
                       {"id": 1, "bytes": 16, "kind": "temp", "alias_param": 0}],
           "steps": [{"op": "copy", "src": 0, "dst": 1, "bytes": 16}]}
    executable = load(cuda_device, write_executable(tmp_path, doc))
    x = np.arange(4, dtype=np.float32)
    kept = cuda_device.upload(x)
    (fresh,), _ = executable.run([kept], [False])
    assert not fresh.shares_storage_with(kept)
    donated = cuda_device.upload(x)
    (in_place,), event = executable.run([donated], [True])
    event.synchronize()
    assert in_place.shares_storage_with(donated)
    donated.release()  # what the contract does with a donated argument
    np.testing.assert_array_equal(download(cuda_device, in_place, np.float32, (4,)), x)


def test_failing_driver_call_names_the_call_and_code(cuda_device, fake_cuda, tmp_path):
    executable = load(cuda_device, three_steps(tmp_path))
    arg = cuda_device.upload(np.zeros((4, 8), np.float32))
    fake_cuda.fail("cuLaunchKernel", 719)
    with pytest.raises(runtime.native().CudaError,
                       match=r"cuLaunchKernel\(k0\) failed: CUDA_ERROR_LAUNCH_FAILED \(719\)"):
        executable.run([arg], [False])
    fake_cuda.fail("cuMemAlloc_v2", 2)
    with pytest.raises(runtime.CudaDriverError, match="cuMemAlloc failed: "
                       "CUDA_ERROR_OUT_OF_MEMORY"):
        with runtime.driver_errors("allocating"):
            cuda_device.allocate(10 << 20)


def test_missing_kernel_fails_at_load(cuda_device, tmp_path):
    directory = write_executable(tmp_path, THREE_STEPS, {"k0": 2},
                                 {"const_0.bin": CONST.tobytes()})
    with pytest.raises(runtime.CudaDriverError,
                       match=r"cuModuleGetFunction\(k1\) failed: CUDA_ERROR_NOT_FOUND"):
        load(cuda_device, directory)


@pytest.mark.parametrize("change,message", [
    (lambda d: d.update(format="other/1"), "format: expected"),
    (lambda d: d["steps"][0]["args"].append(9), r"steps\[0\].args\[2\]: no buffer with id 9"),
    (lambda d: d["steps"][1].update(bytes=256), r"steps\[1\].src: bytes \[0, 256\) lie "
                                                r"outside buffer 0"),
    (lambda d: d["buffers"][0].update(param=3), r"buffers\[0\].param: argument 3 of 1"),
    (lambda d: d["steps"][2].update(grid=[0]), r"steps\[2\].grid: expected 1 to 3 positive"),
    (lambda d: d["params"][0].update(dtype="f33"), r"params\[0\].dtype: unknown element"),
])
def test_bad_description_names_the_field(tmp_path, change, message):
    doc = json.loads(json.dumps(THREE_STEPS))
    change(doc)
    write_executable(tmp_path, doc, {"k0": 2, "k1": 3}, {"const_0.bin": CONST.tobytes()})
    with pytest.raises(runtime.ExecutableFormatError, match="executable.json: " + message):
        runtime.read_description(tmp_path)


@pytest.mark.parametrize("change,message", [
    (lambda d: d["buffers"][1].update(bytes=12),
     r"steps\[0\].c: bytes \[0, 16\) lie outside buffer 1 \(12 bytes\)"),
    (lambda d: d["steps"][0].update(lda=2), r"steps\[0\].lda: 2 is less than the 3 columns"),
    (lambda d: d["steps"][0].update(batch=2, stride_b=6),
     r"steps\[0\].b: bytes \[0, 48\) lie outside buffer 0"),
])
def test_gemm_operands_are_bounds_checked(tmp_path, change, message):
    # C[2, 2] = A[2, 3] @ B[3, 2], A and B one buffer of 6 floats each way.
    doc = {"params": [{"shape": [2, 3], "dtype": "f32"}], "results": [1],
           "buffers": [{"id": 0, "bytes": 24, "kind": "param", "param": 0},
                       {"id": 1, "bytes": 16, "kind": "temp"}],
           "steps": [{"op": "gemm", "dtype": "f32", "m": 2, "n": 2, "k": 3, "a": 0, "b": 0,
                      "c": 1, "lda": 3, "ldb": 2, "ldc": 2}]}
    runtime.read_description(write_executable(tmp_path, doc))  # in bounds as given
    change(doc)
    write_executable(tmp_path, doc)
    with pytest.raises(runtime.ExecutableFormatError, match=message):
        runtime.read_description(tmp_path)


def test_the_readme_example_loads_and_runs(cuda_device, fake_cuda, tmp_path):
    readme = open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "README.md")).read()
    doc = json.loads(re.search(r"```\n(\{\"format\".*?)```", readme, re.S).group(1))
    write_executable(tmp_path, doc, {"k0": 3}, {"const_0.bin": CONST.tobytes()})
    executable = load(cuda_device, tmp_path)
    x = np.random.default_rng(2).standard_normal((4, 8)).astype(np.float32)
    (product, copied), event = executable.run([cuda_device.upload(x)], [False])
    event.synchronize()
    np.testing.assert_allclose(download(cuda_device, product, np.float32, (4, 4)), x @ x.T,
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(download(cuda_device, copied, np.float32, (4, 8)), x)
    assert [l["kernel"] for l in fake_cuda.log()["launches"]] == ["k0"]


def test_a_written_argument_is_copied_unless_donated(cuda_device, tmp_path):
    """written_params: the steps write into argument 0's buffer (here a copy of a constant
    into it, then a copy out as the result); the caller's buffer changes only if donated."""
    doc = {"params": [{"shape": [4], "dtype": "f32"}], "results": [2], "written_params": [0],
           "buffers": [{"id": 0, "bytes": 16, "kind": "param", "param": 0},
                       {"id": 1, "bytes": 16, "kind": "const", "const": "const_0.bin"},
                       {"id": 2, "bytes": 16, "kind": "temp"}],
           "steps": [{"op": "copy", "src": 1, "dst": 0, "bytes": 16},
                     {"op": "copy", "src": 0, "dst": 2, "bytes": 16}]}
    executable = load(cuda_device, write_executable(tmp_path, doc, consts={
        "const_0.bin": CONST.tobytes()}))
    x = np.arange(4, dtype=np.float32) + 10
    for donate in (False, True):
        arg = cuda_device.upload(x)
        (result,), event = executable.run([arg], [donate])
        event.synchronize()
        np.testing.assert_array_equal(download(cuda_device, result, np.float32, (4,)), CONST)
        expected = CONST if donate else x
        np.testing.assert_array_equal(download(cuda_device, arg, np.float32, (4,)), expected)
    # Donated but shared with another live buffer (a copy's source of truth): copied.
    arg = cuda_device.upload(x)
    (tmp_path / "passthrough").mkdir()
    passthrough = write_executable(tmp_path / "passthrough", {
        "params": [{"shape": [4], "dtype": "f32"}], "results": [0],
        "buffers": [{"id": 0, "bytes": 16, "kind": "param", "param": 0}], "steps": []})
    (same,), _ = load(cuda_device, passthrough).run([arg], [False])
    assert same.shares_storage_with(arg)
    (result,), event = executable.run([arg], [True])
    event.synchronize()
    np.testing.assert_array_equal(download(cuda_device, same, np.float32, (4,)), x)


def test_a_real_cubin_loads_and_its_launches_are_recorded(cuda_device, fake_cuda, tmp_path):
    """An nvcc-built sm_90a cubin through the fake (which takes any kernel of an ELF image):
    what an executable directory of the code generator looks like to the runtime."""
    nvcc = find_tool("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc")
    (tmp_path / "k.cu").write_text('extern "C" __global__ void scale(const float* x, '
                                   'float* y) { y[threadIdx.x] = 2 * x[threadIdx.x]; }\n')
    subprocess.run([nvcc, "-cubin", "-arch=sm_90a", "-o", str(tmp_path / "kernels.cubin"),
                    str(tmp_path / "k.cu")], check=True, capture_output=True)
    doc = {"params": [{"shape": [32], "dtype": "f32"}], "results": [1],
           "buffers": [{"id": 0, "bytes": 128, "kind": "param", "param": 0},
                       {"id": 1, "bytes": 128, "kind": "temp"}],
           "steps": [{"op": "launch", "kernel": "scale", "grid": [1], "block": [32],
                      "shared": 0, "args": [0, 1]}]}
    executable = load(cuda_device, write_executable(tmp_path, doc))
    arg = cuda_device.upload(np.zeros(32, np.float32))
    (out,), event = executable.run([arg], [False])
    event.synchronize()
    (launch,) = fake_cuda.log()["launches"]
    assert (launch["kernel"], launch["args"]) == ("scale", [arg.address, out.address])
