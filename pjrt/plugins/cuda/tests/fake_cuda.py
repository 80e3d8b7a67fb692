"""The fake CUDA driver (fake_driver.cc) for the runtime's tests: built with g++ once per
test session, pointed at through OPENHLO_CUDA_DRIVER and OPENHLO_CUBLAS, read through its
exported log."""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess

import pytest

SOURCE = os.path.join(os.path.dirname(__file__), "fake_driver.cc")


class FakeCuda:
    def __init__(self, path: str):
        self.path = path
        self.lib = ctypes.CDLL(path)  # the same handle the runtime's dlopen gets
        self.lib.fake_cuda_log_json.restype = ctypes.c_char_p
        self.lib.fake_cuda_fail.argtypes = [ctypes.c_char_p, ctypes.c_int]
        self.lib.fake_cuda_set_memory_limit.argtypes = [ctypes.c_size_t]

    def log(self) -> dict:
        return json.loads(self.lib.fake_cuda_log_json().decode())

    def fail(self, entry_point: str, code: int) -> None:
        """Every later call of ``entry_point`` returns ``code``."""
        self.lib.fake_cuda_fail(entry_point.encode(), code)

    def set_memory_limit(self, nbytes: int) -> None:
        """cuMemAlloc fails with CUDA_ERROR_OUT_OF_MEMORY beyond ``nbytes`` allocated."""
        self.lib.fake_cuda_set_memory_limit(nbytes)

    def reset(self) -> None:
        self.lib.fake_cuda_reset()


def build_fake(directory) -> str:
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("no g++ to build the fake CUDA driver")
    out = os.path.join(str(directory), "libfakecuda.so")
    subprocess.run([compiler, "-std=c++17", "-O1", "-shared", "-fPIC", SOURCE, "-o", out],
                   check=True, capture_output=True, text=True)
    return out
