"""Compiling generated C++ into shared libraries, with a content-keyed on-disk cache.

A translation unit is compiled by the system C++ compiler (``$CXX``, else ``c++``/``g++``)
for the host CPU and stored under ``$OPENHLO_CACHE_DIR/cpu_kernels`` (the root from
``xla_core.cache_root``, default ``~/.cache/openhlo``) as ``<sha256 of source, compiler,
processor and flags>.so``: a second process (or a second compile of the same program) loads the
library and compiles nothing.
Without a compiler the backend says so once and runs everything in the executor.

The unit is compiled to an object (``-c``) and linked by ``ld -shared`` directly: generated
code uses neither libstdc++ nor the C runtime's start files (the memset/memcpy/malloc and
libm calls it makes resolve against the libc and libm the Python process has loaded), and the compiler driver's link step
costs ~15-20 ms of a 40 ms minimal compile. Without ``ld`` the driver links.

Flags keep IEEE semantics (no -ffast-math, and no contraction of a*b+c into one FMA, which
rounds differently from the interpreter: f64 programs drifted 5 ULP): the generated code
reassociates only where it says so itself (reductions with explicit lanes), so results stay
close to the interpreter's.
"""
from __future__ import annotations

import functools
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
import time

from xla_core.cache_root import cache_root
from stablehlo.instrument import trace

LOG = logging.getLogger("openhlo.cpu")

FLAGS = ["-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=off",
         "-fPIC", "-pipe", "-std=c++17", "-fno-exceptions", "-fno-rtti", "-fno-plt"]
_NO_COMPILER_SAID = False

# What the last compilations cost (for benchmarks and tests): (seconds, source bytes).
COMPILE_TIMES: list[tuple[float, int]] = []


def cache_dir() -> str:
    return cache_root("cpu_kernels")


@functools.lru_cache(maxsize=1)
def host_cpu() -> str:
    """The processor the libraries are built for (-march=native): a cache folder shared by
    machines with other processors must not hand them code with instructions they lack."""
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
    except OSError:
        return platform.machine() + " " + platform.processor()
    wanted = ("model name", "flags", "Features", "CPU part")
    lines = []
    for line in info.splitlines():
        key = line.split(":", 1)[0].strip()
        if key in wanted and key not in {k for k, _ in lines}:
            lines.append((key, line))
    return platform.machine() + "\n" + "\n".join(line for _, line in lines)


def find_compiler():
    """The C++ compiler to use, or None (said once on the log)."""
    global _NO_COMPILER_SAID
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if compiler is None and not _NO_COMPILER_SAID:
        LOG.warning("no C++ compiler found: generated kernels are off, fusions and loops run "
                    "op by op in the executor (set CXX to enable them)")
        _NO_COMPILER_SAID = True
    return compiler


class Deferred(Exception):
    """The library is not in the cache and compiling now was not allowed (the caller runs
    without it for the moment: see pjrt/plugins/cpu/tiering.py)."""


def compile_source(source: str, now: bool = True):
    """Path of the shared library built from ``source`` (cached by content), or None.

    ``now=False``: only a library already in the cache; raises Deferred instead of running
    the compiler."""
    compiler = find_compiler()
    if compiler is None:
        return None
    key = hashlib.sha256("\0".join([source, compiler, host_cpu()] + FLAGS).encode()
                         ).hexdigest()[:32]
    folder = cache_dir()
    library = os.path.join(folder, f"{key}.so")
    if os.path.exists(library):
        return library
    if not now:
        raise Deferred(library)
    os.makedirs(folder, exist_ok=True)
    start = time.perf_counter()
    # mkdtemp, not TemporaryDirectory: the latter's exit-time finalizer would delete the
    # folder under a background compile that tiering.py lets finish at interpreter exit.
    tmp = tempfile.mkdtemp(dir=folder)
    try:
        with trace.span("kernel compile", "compile", source_bytes=len(source)):
            built = _build(compiler, source, tmp, library)
        if not built:
            return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    seconds = time.perf_counter() - start
    COMPILE_TIMES.append((seconds, len(source)))
    LOG.debug("compiled %d bytes of generated C++ in %.3f s", len(source), seconds)
    return library


def _build(compiler: str, source: str, tmp: str, library: str) -> bool:
    """Compile ``source`` in folder ``tmp`` and move the library to ``library``."""
    src = os.path.join(tmp, "kernel.cc")
    with open(src, "w") as f:
        f.write(source)
    built = os.path.join(tmp, "kernel.so")
    linker = shutil.which("ld")
    if linker is None:
        done = subprocess.run([compiler, *FLAGS, "-shared", src, "-o", built],
                              capture_output=True, text=True)
    else:
        obj = os.path.join(tmp, "kernel.o")
        done = subprocess.run([compiler, *FLAGS, "-c", src, "-o", obj], capture_output=True,
                              text=True)
        if done.returncode == 0:
            done = subprocess.run([linker, "-shared", obj, "-o", built], capture_output=True,
                                  text=True)
    if done.returncode != 0:
        LOG.warning("generated kernels failed to compile (running op by op): %s",
                    done.stderr[-2000:])
        return False
    os.replace(built, library)  # atomic: concurrent processes see all or nothing
    return True
