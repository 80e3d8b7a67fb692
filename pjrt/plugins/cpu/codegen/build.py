"""Compiling generated C++ into shared libraries, with a content-keyed on-disk cache.

A library is built from one or more translation units by the system C++ compiler (``$CXX``,
else ``c++``/``g++``) for the host CPU and stored under ``$OPENHLO_CACHE_DIR/cpu_kernels`` (the
root from ``xla_core.cache_root``, default ``~/.cache/openhlo``) as ``<sha256 of the units,
compiler, processor and flags>.so``: a second process (or a second compile of the same program)
loads the library and compiles nothing.
Without a compiler the backend says so once and runs everything in the executor.

The units of one library compile at the same time, one compiler process each (the caller
splits a program's kernels into as many units as ``jobs()``: the compiler's optimizer is
nearly all of a program's compile time, and it runs on one core per unit). Each unit is
compiled to an object (``-c``) and the objects are linked by ``ld -shared`` directly:
generated code uses neither libstdc++ nor the C runtime's start files (the
memset/memcpy/malloc and libm calls it makes resolve against the libc and libm the Python
process has loaded), and the compiler driver's link step costs ~15-20 ms of a 40 ms minimal
compile. Without ``ld`` the driver links.

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

# -O3: "-O2 -ftree-vectorize -fvect-cost-model=dynamic" gave the same kernels' speed and cost
# the compiler as much (gpt_block_train's kernels: 732M instructions against 735M, counted by
# valgrind), and plain -O2's "very cheap" vectorizer leaves loops that need an epilogue
# scalar (layernorm_gelu 7x slower). The compile time is the vectorizer's; see program.py
# for how a program's kernels compile in parallel instead.
FLAGS = ["-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=off",
         "-fPIC", "-pipe", "-std=c++17", "-fno-exceptions", "-fno-rtti", "-fno-plt"]
_NO_COMPILER_SAID = False

# What the last compilations cost (for benchmarks and tests): (seconds, source bytes), one
# entry per library built.
COMPILE_TIMES: list[tuple[float, int]] = []


def jobs() -> int:
    """How many compiler processes one library may run at once: the cores this process may
    run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # no affinity on this platform
        return max(1, os.cpu_count() or 1)


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
    """Path of the shared library built from the translation unit ``source`` (cached by
    content), or None.

    ``now=False``: only a library already in the cache; raises Deferred instead of running
    the compiler."""
    return compile_units([source], now)


def compile_units(units: list[str], now: bool = True):
    """Path of the shared library linked from the translation units ``units``, compiled in
    parallel (cached by content), or None. ``now`` as for ``compile_source``."""
    compiler = find_compiler()
    if compiler is None:
        return None
    key = hashlib.sha256("\0".join([*units, compiler, host_cpu()] + FLAGS).encode()
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
    source_bytes = sum(map(len, units))
    try:
        with trace.span("kernel compile", "compile", source_bytes=source_bytes,
                        units=len(units)):
            built = _build(compiler, units, tmp, library)
        if not built:
            return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    seconds = time.perf_counter() - start
    COMPILE_TIMES.append((seconds, source_bytes))
    LOG.debug("compiled %d bytes of generated C++ in %d units in %.3f s", source_bytes,
              len(units), seconds)
    return library


def _build(compiler: str, units: list[str], tmp: str, library: str) -> bool:
    """Compile ``units`` in folder ``tmp`` and move the library to ``library``."""
    sources = []
    for i, unit in enumerate(units):
        sources.append(os.path.join(tmp, f"kernel{i}.cc"))
        with open(sources[-1], "w") as f:
            f.write(unit)
    built = os.path.join(tmp, "kernel.so")
    linker = shutil.which("ld")
    if linker is None:
        done = subprocess.run([compiler, *FLAGS, "-shared", *sources, "-o", built],
                              capture_output=True, text=True)
        failure = done.stderr if done.returncode != 0 else None
    else:
        objects = [src[:-len(".cc")] + ".o" for src in sources]
        failure = _compile_objects(compiler, sources, objects)
        if failure is None:
            done = subprocess.run([linker, "-shared", *objects, "-o", built],
                                  capture_output=True, text=True)
            failure = done.stderr if done.returncode != 0 else None
    if failure is not None:
        LOG.warning("generated kernels failed to compile (running op by op): %s",
                    failure[-2000:])
        return False
    os.replace(built, library)  # atomic: concurrent processes see all or nothing
    return True


def _compile_objects(compiler: str, sources: list[str], objects: list[str]) -> str | None:
    """Compile every source to its object, one compiler process each, all at once; the
    first failing one's messages, or None.

    Processes and polling rather than threads: a compile may run at interpreter exit
    (tiering.py lets it finish), where no new thread or executor may start."""
    running = []
    for source, obj in zip(sources, objects):
        messages = open(obj + ".log", "w+")
        process = subprocess.Popen([compiler, *FLAGS, "-c", source, "-o", obj],
                                   stdout=subprocess.DEVNULL, stderr=messages)
        running.append((process, messages, time.perf_counter_ns(), os.path.getsize(source)))
    failure = None
    while running:
        waiting = []
        for process, messages, start, size in running:
            if process.poll() is None:
                waiting.append((process, messages, start, size))
                continue
            trace.event("kernel unit compile", "compile", start,
                        time.perf_counter_ns() - start, source_bytes=size)
            if process.returncode != 0 and failure is None:
                messages.seek(0)
                failure = messages.read()
            messages.close()
        running = waiting
        if running:
            time.sleep(0.001)
    return failure
