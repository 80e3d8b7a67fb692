"""Ahead-of-time compilation of a CUDA C translation unit to a cubin, with ptxas's report.

``find_tool(name)`` finds ``nvcc``/``ptxas``/``cuobjdump`` on PATH or in a CUDA toolkit under
/usr/local. ``compile_cubin`` runs one ``nvcc -cubin -arch=<target> -Xptxas -v`` on the
whole unit (nvcc costs ~0.5-1 s per call, so a program's kernels go in one call) and returns
what ``parse_ptxas`` reads from ptxas's verbose report: per kernel its registers, spill
stores and loads (bytes), stack frame and static shared memory (bytes). No GPU, driver or
NVRTC is needed.
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess

from pjrt.errors import ErrorCode, PjrtError, UnavailableError

_ENTRY = re.compile(r"Compiling entry function '(\w+)' for '(\w+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:.*?, (\d+) bytes smem)?")
COMPILE_TIMEOUT_S = 600


class KernelCompileError(PjrtError):
    """nvcc rejected generated CUDA C: a bug of the code generator, with nvcc's words."""
    code = ErrorCode.INTERNAL


def find_tool(name: str) -> str | None:
    """The path of CUDA tool ``name`` (PATH first, then the newest /usr/local/cuda*), or
    None."""
    found = shutil.which(name)
    if found:
        return found
    for bin_dir in sorted(glob.glob("/usr/local/cuda*/bin"), reverse=True):
        path = os.path.join(bin_dir, name)
        if os.access(path, os.X_OK):
            return path
    return None


def compile_cubin(source_path: str, cubin_path: str, target: str) -> dict:
    """Compile the ``.cu`` file ``source_path`` into ``cubin_path`` for ``target``
    (``sm_90a``); returns ``parse_ptxas`` of the report. Raises UnavailableError without
    nvcc, KernelCompileError when nvcc fails."""
    nvcc = find_tool("nvcc")
    if nvcc is None:
        raise UnavailableError("cuda backend: nvcc not found (on PATH or /usr/local/cuda*/bin): "
                               "install the CUDA toolkit to compile kernels ahead of time")
    command = [nvcc, "-cubin", f"-arch={target}", "-O3", "-Xptxas", "-v", "-o", cubin_path,
               source_path]
    done = subprocess.run(command, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S,
                          check=False)
    if done.returncode != 0:
        raise KernelCompileError(f"{source_path}: nvcc failed ({done.returncode}):\n"
                                 f"{done.stderr.strip()[-4000:]}")
    return parse_ptxas(done.stdout + done.stderr)


def parse_ptxas(report: str) -> dict:
    """``{kernel: {"registers", "spill_stores", "spill_loads", "stack", "shared"}}`` from
    ptxas's ``-v`` report (an entry's lines follow its "Compiling entry function")."""
    kernels: dict = {}
    current = None
    for line in report.splitlines():
        if (m := _ENTRY.search(line)) is not None:
            current = kernels.setdefault(m.group(1), {"registers": 0, "spill_stores": 0,
                                                      "spill_loads": 0, "stack": 0,
                                                      "shared": 0})
        elif current is not None and (m := _FRAME.search(line)) is not None:
            current["stack"], current["spill_stores"], current["spill_loads"] = \
                int(m.group(1)), int(m.group(2)), int(m.group(3))
        elif current is not None and (m := _USED.search(line)) is not None:
            current["registers"] = int(m.group(1))
            current["shared"] = int(m.group(2) or 0)
    return kernels
