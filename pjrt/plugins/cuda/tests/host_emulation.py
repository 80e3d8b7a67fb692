"""Runs a cuda executable directory on the CPU, for numerics checks without a GPU.

The generated kernels are grid-stride loops, so one thread (a grid and block of 1) computes
every task: ``kernels.cu`` is compiled by the host C++ compiler with ``HOST_PRELUDE`` (the CUDA
keywords as nothing, the thread indices as constants, a warp of one lane and a
block of one thread (shared memory a local array, barriers nothing), the CUDA headers' host
half/bf16 types) and its kernels are called through ctypes. The steps run as the description
says: launches on byte arrays per buffer at their offsets, copies, and GEMMs by numpy on strided
views (what the GPU runtime asks cuBLAS for). So the whole description, not only the kernels, is
checked against the reference interpreter.
"""
from __future__ import annotations

import ctypes
import json
import pathlib
import shutil
import subprocess
import threading

import numpy as np

HOST_PRELUDE = """
#define OHC_WARP 1
#define OHC_BLOCK 1
#include <cmath>
#include <cstdint>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#undef __shared__
#define __shared__
#define __syncthreads()
#ifndef __launch_bounds__
#define __launch_bounds__(n)
#endif
struct OhcDim { int64_t x, y, z; };
static const OhcDim gridDim{1, 1, 1}, blockDim{1, 1, 1}, blockIdx{0, 0, 0}, threadIdx{0, 0, 0};
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
template <class T> static inline T __shfl_xor_sync(unsigned, T v, int) { return v; }
"""


# A block of real threads: the launch's block size of host threads (ohc_thread gives each its
# threadIdx), warps of 32 lanes whose shuffles exchange through slots between two barriers,
# __syncthreads a barrier of the block, __shared__ arrays shared by the block's threads. A grid
# of one block runs every task (grid-stride loops), so the launch's block size is what counts.
THREADED_PRELUDE = """
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#undef __shared__
#define __shared__ static
#ifndef __launch_bounds__
#define __launch_bounds__(n)
#endif
struct OhcDim { int64_t x, y, z; };
static OhcDim gridDim{1, 1, 1}, blockDim{1, 1, 1};
static thread_local OhcDim blockIdx{0, 0, 0}, threadIdx{0, 0, 0};
static std::unique_ptr<std::barrier<>> ohc_block_barrier, ohc_warp_barriers[64];
static unsigned char ohc_slots[2048][8];
extern "C" void ohc_setup(int64_t threads) {
  blockDim.x = threads;
  ohc_block_barrier = std::make_unique<std::barrier<>>(threads);
  for (int64_t w = 0; w < (threads + 31) / 32; ++w) {
    const int64_t lanes = threads - w * 32 < 32 ? threads - w * 32 : 32;
    ohc_warp_barriers[w] = std::make_unique<std::barrier<>>(lanes);
  }
}
extern "C" void ohc_thread(int64_t t) { threadIdx.x = t; }
#define __syncthreads() ohc_block_barrier->arrive_and_wait()
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
template <class T> static inline T __shfl_xor_sync(unsigned, T v, int off) {
  const int64_t t = threadIdx.x;
  std::memcpy(ohc_slots[t], &v, sizeof(T));
  ohc_warp_barriers[t / 32]->arrive_and_wait();
  T r;
  std::memcpy(&r, ohc_slots[t ^ off], sizeof(T));
  ohc_warp_barriers[t / 32]->arrive_and_wait();
  return r;
}
"""


def dtype_of(name: str) -> np.dtype:
    if name == "bf16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    table = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i1": np.bool_,
             "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
             "ui8": np.uint8, "ui16": np.uint16, "ui32": np.uint32, "ui64": np.uint64}
    return np.dtype(table[name])


def host_compiler() -> str | None:
    return shutil.which("g++")


def cuda_include(nvcc_path: str) -> str:
    """The toolkit's include folder (cuda_fp16.h): next to nvcc's bin, else under
    /usr/local/cuda* (nvcc on PATH may be a wrapper outside the toolkit)."""
    candidates = [pathlib.Path(nvcc_path).resolve().parent.parent / "include",
                  *sorted(pathlib.Path("/usr/local").glob("cuda*/include"), reverse=True)]
    return str(next(c for c in candidates if (c / "cuda_fp16.h").is_file()))


class HostExecutable:
    """``threaded``: each launch runs one block of its block size of host threads
    (``THREADED_PRELUDE``: the warps' shuffles and the block's barriers and shared memory
    between them), else one thread with a warp of one lane and a block of one thread."""

    def __init__(self, exe_dir: pathlib.Path, nvcc_path: str, scratch: pathlib.Path,
                 threaded: bool = False):
        self.dir = pathlib.Path(exe_dir)
        self.exe = json.loads((self.dir / "executable.json").read_text())
        self.lib = None
        self.threaded = threaded
        if self.exe["cubin"] is not None:
            name = "threaded" if threaded else "host"
            prelude = scratch / f"{name}_prelude.h"
            prelude.write_text(THREADED_PRELUDE if threaded else HOST_PRELUDE)
            library = scratch / f"kernels_{name}.so"
            subprocess.run([host_compiler(), "-x", "c++", "-std=c++20", "-O1", "-shared",
                            "-fPIC", "-pthread", f"-I{cuda_include(nvcc_path)}", "-include",
                            str(prelude), "-o", str(library), str(self.dir / "kernels.cu")],
                           check=True, capture_output=True, text=True)
            self.lib = ctypes.CDLL(str(library))

    def _launch(self, kernel, step: dict, addresses: list) -> None:
        if not self.threaded:
            kernel(*addresses)
            return
        threads = step["block"][0]
        self.lib.ohc_setup(ctypes.c_int64(threads))

        def run(t: int) -> None:  # ctypes releases the GIL: the threads meet at barriers
            self.lib.ohc_thread(ctypes.c_int64(t))
            kernel(*addresses)
        pool = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()

    def __call__(self, args: list) -> list:
        memory = {b["id"]: np.zeros(max(1, b["bytes"]), np.uint8) for b in self.exe["buffers"]}
        for b in self.exe["buffers"]:
            if b["kind"] == "param":
                data = np.ascontiguousarray(args[b["param"]]).view(np.uint8).reshape(-1)
                memory[b["id"]][:data.size] = data
            elif b["kind"] == "const":
                data = np.frombuffer((self.dir / b["const"]).read_bytes(), np.uint8)
                memory[b["id"]][:data.size] = data
        for step in self.exe["steps"]:
            if step["op"] == "launch":
                kernel = getattr(self.lib, step["kernel"])
                kernel.argtypes = [ctypes.c_void_p] * len(step["args"])
                self._launch(kernel, step, [_address(memory, ref) for ref in step["args"]])
            elif step["op"] == "copy":
                ctypes.memmove(_address(memory, step["dst"]), _address(memory, step["src"]),
                               step["bytes"])
            else:
                _gemm(memory, step)
        return [memory[r][:int(np.prod(t["shape"])) * dtype_of(t["dtype"]).itemsize]
                .view(dtype_of(t["dtype"])).reshape(t["shape"])
                for r, t in zip(self.exe["results"], self.exe["result_types"])]


def _address(memory: dict, ref) -> int:
    buffer, offset = (ref, 0) if isinstance(ref, int) else (ref["id"], ref["offset"])
    return memory[buffer].ctypes.data + offset


def _matrices(memory: dict, ref, dtype, batch: int, stride: int, rows: int, cols: int, ld: int):
    """[batch, rows, cols] view of a row-major operand with leading dimension ``ld``."""
    buffer, offset = (ref, 0) if isinstance(ref, int) else (ref["id"], ref["offset"])
    raw = memory[buffer]
    size = dtype.itemsize
    data = raw[offset:offset + (raw.size - offset) // size * size].view(dtype)
    return np.lib.stride_tricks.as_strided(
        data, shape=(batch, rows, cols), strides=(stride * size, ld * size, size),
        writeable=False)


def _gemm(memory: dict, s: dict) -> None:
    dtype = dtype_of(s["dtype"])
    m, n, k, batch = s["m"], s["n"], s["k"], s["batch"]
    a = _matrices(memory, s["a"], dtype, batch, s["stride_a"],
                  *((k, m) if s["trans_a"] else (m, k)), s["lda"])
    b = _matrices(memory, s["b"], dtype, batch, s["stride_b"],
                  *((n, k) if s["trans_b"] else (k, n)), s["ldb"])
    a = a.transpose(0, 2, 1) if s["trans_a"] else a
    b = b.transpose(0, 2, 1) if s["trans_b"] else b
    product = (a.astype(np.float64) @ b.astype(np.float64)).astype(dtype)
    ref = s["c"]
    buffer, offset = (ref, 0) if isinstance(ref, int) else (ref["id"], ref["offset"])
    for bt in range(batch):
        start = offset + bt * s["stride_c"] * dtype.itemsize
        rows = memory[buffer][start:start + m * s["ldc"] * dtype.itemsize].view(dtype)
        rows.reshape(m, s["ldc"])[:, :n] = product[bt]

