"""Helpers of the runtime tests (test_runtime.py and test_runtime_device.py): executable
directories written by hand, loading them, and reading device buffers back."""
from __future__ import annotations

import json

import numpy as np

from pjrt.plugins.cuda import runtime


def write_executable(directory, doc: dict, kernels: dict | None = None, consts=None):
    """An executable directory: ``doc`` (format filled in), a fake cubin declaring
    ``kernels`` {name: argument count}, and ``consts`` {file name: bytes}."""
    doc = {"format": runtime.FORMAT, "target": "sm_90a", "cubin": "kernels.cubin", **doc}
    (directory / "executable.json").write_text(json.dumps(doc))
    if kernels:
        text = "".join(f"{name} {count}\n" for name, count in kernels.items())
        (directory / "kernels.cubin").write_bytes(text.encode() + b"\0")
    for name, data in (consts or {}).items():
        (directory / name).write_bytes(data)
    return directory


def load(device, directory, use_graph=False):
    return runtime.load_executable(device, runtime.read_description(directory),
                                   use_graph=use_graph)


def download(device, buffer, dtype, shape):
    out = np.empty(shape, dtype)
    device.download(buffer, out)
    return out


def gemm_case(dtype: str, np_dtype, trans_a: int, trans_b: int, batch: int, m: int, n: int,
              k: int, seed: int):
    """Operands of a batched GEMM, the executable description of ``op(a) @ op(b)`` as one
    gemm step, and its float32 product computed by numpy."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((batch, k, m) if trans_a else (batch, m, k)).astype(np_dtype)
    b = rng.standard_normal((batch, n, k) if trans_b else (batch, k, n)).astype(np_dtype)
    item = np.dtype(np_dtype).itemsize
    doc = {"params": [{"shape": list(a.shape), "dtype": dtype},
                      {"shape": list(b.shape), "dtype": dtype}],
           "results": [2],
           "buffers": [{"id": 0, "bytes": a.nbytes, "kind": "param", "param": 0},
                       {"id": 1, "bytes": b.nbytes, "kind": "param", "param": 1},
                       {"id": 2, "bytes": batch * m * n * item, "kind": "temp"}],
           "steps": [{"op": "gemm", "dtype": dtype, "m": m, "n": n, "k": k, "batch": batch,
                      "trans_a": trans_a, "trans_b": trans_b, "a": 0, "b": 1, "c": 2,
                      "lda": a.shape[2], "ldb": b.shape[2], "ldc": n,
                      "stride_a": a[0].size, "stride_b": b[0].size, "stride_c": m * n}]}
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    expected = (a32.transpose(0, 2, 1) if trans_a else a32) @ (
        b32.transpose(0, 2, 1) if trans_b else b32)
    return a, b, doc, expected
