"""Measure this machine's f32 matmul throughput and memory bandwidth, once.

The measurement takes about a second (numpy f32 matmuls of 32..1024, a copy of a 64 MiB
array, best of several timings) and is cached as JSON in
``$OPENHLO_CACHE_DIR/hardware/<host-key>-v<version>.json`` (the root from ``xla_core.cache_root``,
default ``~/.cache/openhlo``), so later processes only read a file. The key names the
machine: hostname, CPU model (from ``/proc/cpuinfo``) and core count; a cache
file whose recorded key or format version differs is ignored and rewritten.
Nothing here touches the network.

Best-of-N is used rather than the mean: the machine may be shared, and the cost
model wants what the hardware can do, not what a noisy neighbour left over.
numpy's matmul is a BLAS call, so this is the throughput a library-backed dot
achieves, a realistic "peak" for the roofline. Each size's rate is kept as well
(``matmul_curve``, Note [matmul curve] in hardware.py): small products reach a
fraction of the peak.

``fit_latency_bandwidth`` fits ``latency + bytes / bandwidth`` to timed transfers; ``openhlo
calibrate`` (tools/calibrate.py) uses it for the runtime's collectives and writes a whole
hardware description.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import re
import socket
import tempfile
import time
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from stablehlo.errors import OpenHLOError
from xla_core.cost.hardware import HardwareDescription
from xla_core.cache_root import cache_root

# 2: the record gained matmul_curve.
CACHE_VERSION = 2
# The curve's sizes: the small ones are those of sharded steps' dots, the large ones reach
# the BLAS peak.
DEFAULT_MATMUL_SIZES = (32, 64, 128, 256, 512, 768, 1024)
DEFAULT_COPY_BYTES = 64 * 1024 * 1024
DEFAULT_REPEATS = 3
# A timing of a small product covers this many seconds of back-to-back calls, so the
# clock's resolution and one call's jitter do not decide its rate; a size is timed at least
# `repeats` times and until CURVE_SECONDS_PER_SIZE have passed: on a loaded host, BLAS's
# threads on a product just large enough to be split wait for each other's cores, and only
# some timings show what the size reaches.
MIN_TIMED_SECONDS = 2e-3
CURVE_SECONDS_PER_SIZE = 0.05


class CalibrationError(OpenHLOError):
    """Measurements that cannot be fitted (too few, or times that do not grow with size)."""


def cache_dir() -> str:
    return cache_root("hardware")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown-cpu"


def core_count() -> int:
    if hasattr(os, "sched_getaffinity"):  # cores this process may run on, not the host's
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def host_key() -> str:
    """``hostname|cpu model|cores``: what makes two machines' numbers differ."""
    return f"{socket.gethostname()}|{_cpu_model()}|{core_count()}"


def cache_path(key: str | None = None) -> str:
    key = host_key() if key is None else key
    host = re.sub(r"[^A-Za-z0-9_.-]", "_", key.split("|", 1)[0])[:64] or "host"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    # the format version in the name: checkouts of different versions sharing the folder
    # keep a file each instead of replacing each other's
    return os.path.join(cache_dir(), f"{host}-{digest}-v{CACHE_VERSION}.json")


def measure_matmul_curve(sizes: Sequence[int] = DEFAULT_MATMUL_SIZES,
                         repeats: int = DEFAULT_REPEATS) -> list[list[float]]:
    """``[[flops, flop/s], ...]``: the best f32 rate of an n x n product for each n of
    ``sizes`` (2*n^3 flops), each timing over enough back-to-back calls to last
    ``MIN_TIMED_SECONDS``, at least ``repeats`` timings and ``CURVE_SECONDS_PER_SIZE``; never
    below a smaller size's rate (non-decreasing in n)."""
    rng = np.random.default_rng(0)
    curve = []
    for n in sorted(sizes):
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        out = np.empty((n, n), dtype=np.float32)
        np.matmul(a, b, out=out)  # warm-up: thread pool start, page faults on `out`
        start = time.perf_counter()
        np.matmul(a, b, out=out)
        calls = max(1, math.ceil(MIN_TIMED_SECONDS / max(time.perf_counter() - start, 1e-9)))
        best, timings, begin = 0.0, 0, time.perf_counter()
        while timings < repeats or time.perf_counter() - begin < CURVE_SECONDS_PER_SIZE:
            start = time.perf_counter()
            for _ in range(calls):
                np.matmul(a, b, out=out)
            elapsed = time.perf_counter() - start
            best = max(best, calls * 2.0 * n ** 3 / max(elapsed, 1e-9))
            timings += 1
        # an n x n product can be done as products of smaller blocks, so it reaches at least
        # a smaller size's rate: a dip below it is a timing that lost its cores
        curve.append([2.0 * n ** 3, max([best] + [rate for _, rate in curve])])
    return curve


def measure_memory_bandwidth(nbytes: int = DEFAULT_COPY_BYTES,
                             repeats: int = DEFAULT_REPEATS) -> float:
    """Best copy rate (bytes/s), counting the bytes read plus the bytes written."""
    src = np.ones(max(nbytes // 4, 1), dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)  # warm-up: fault in `dst`'s pages, which a real kernel would not pay
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(dst, src)
        elapsed = time.perf_counter() - start
        best = max(best, 2.0 * src.nbytes / max(elapsed, 1e-9))
    return best


def measure_machine(sizes: Sequence[int] = DEFAULT_MATMUL_SIZES,
                    nbytes: int = DEFAULT_COPY_BYTES,
                    repeats: int = DEFAULT_REPEATS) -> dict:
    """Fresh measurements (no cache)."""
    start = time.perf_counter()
    curve = measure_matmul_curve(sizes, repeats)
    bandwidth = measure_memory_bandwidth(nbytes, repeats)
    return {"peak_flops": max(rate for _, rate in curve), "matmul_curve": curve,
            "memory_bandwidth": bandwidth,
            "measure_seconds": time.perf_counter() - start,
            "method": {"matmul_sizes": list(sizes), "copy_bytes": int(nbytes),
                       "repeats": int(repeats), "numpy": np.__version__}}


def _read_cache(path: str, key: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION \
            or data.get("host_key") != key:
        return None
    if not all(isinstance(data.get(k), (int, float)) and data[k] > 0
               for k in ("peak_flops", "memory_bandwidth", "cores")):
        return None
    curve = data.get("matmul_curve")
    if not isinstance(curve, list) or not all(
            isinstance(p, list) and len(p) == 2 and
            all(isinstance(v, (int, float)) and v > 0 for v in p) for p in curve):
        return None
    return data


def _write_cache(path: str, data: dict) -> None:
    # Write-then-rename so a concurrent reader never sees half a file.
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def calibrate(*, refresh: bool = False, sizes: Sequence[int] = DEFAULT_MATMUL_SIZES,
              nbytes: int = DEFAULT_COPY_BYTES, repeats: int = DEFAULT_REPEATS) -> dict:
    """This machine's numbers: from the cache when present (unless ``refresh``),
    else measured with the given parameters and written to the cache.

    Returns the cached record: ``peak_flops``, ``matmul_curve``, ``memory_bandwidth``,
    ``cores``, ``host_key``, ``version``, ``measured_at`` (Unix time), ``method``.
    """
    key = host_key()
    path = cache_path(key)
    if not refresh:
        cached = _read_cache(path, key)
        if cached is not None:
            return cached
    data = measure_machine(sizes, nbytes, repeats)
    data.update(version=CACHE_VERSION, host_key=key, cores=core_count(),
                measured_at=time.time())
    _write_cache(path, data)
    return data


def calibrated_cpu() -> HardwareDescription:
    """The ``"cpu"`` hardware entry: this machine, measured once and then cached."""
    data = calibrate()
    return HardwareDescription(name="cpu", peak_flops=float(data["peak_flops"]),
                               memory_bandwidth=float(data["memory_bandwidth"]),
                               cores=int(data["cores"]),
                               matmul_curve=tuple((float(f), float(r))
                                                  for f, r in data["matmul_curve"]))


class LinkFit(NamedTuple):
    """``latency`` (seconds; the mean of ``latencies``, each kind's) and ``bandwidth``
    (bytes/s, shared by the kinds) of ``fit_latency_bandwidth``."""
    latency: float
    bandwidth: float
    latencies: dict


def fit_latency_bandwidth(nbytes: Sequence[float], seconds: Sequence[float],
                          kinds: Sequence[str] | None = None) -> LinkFit:
    """``seconds = latency[kind] + nbytes / bandwidth`` fitted by least squares on relative
    errors (each timing weighted by 1/seconds: the sizes span orders of magnitude, and an
    unweighted fit would let the largest decide the latencies). ``kinds`` labels each timing
    (the collective: an all-gather may pay a fixed cost an all-reduce does not); every kind
    gets its own latency, all share the bandwidth (one transport); without ``kinds``, one
    latency. A negative latency is clamped to 0 and the rest refitted. Raises
    CalibrationError for timings that cannot say a bandwidth (one size per kind, times not
    positive) or that do not grow with size."""
    x = np.asarray(nbytes, dtype=np.float64)
    t = np.asarray(seconds, dtype=np.float64)
    labels = list(kinds) if kinds is not None else [""] * len(x)
    names = list(dict.fromkeys(labels))
    if x.shape != t.shape or len(labels) != len(x) or not np.all(t > 0) or \
            not any(len({b for b, k in zip(x, labels) if k == name}) > 1 for name in names):
        raise CalibrationError(f"fitting latency and bandwidth needs positive times of at "
                               f"least two sizes of one kind; got sizes {x.tolist()}, "
                               f"kinds {labels}, times {t.tolist()}")
    w = 1.0 / t
    free = list(names)  # kinds whose latency is fitted (the others are clamped to 0)
    while True:
        columns = [w * np.array([k == name for k in labels]) for name in free] + [x * w]
        solution, *_ = np.linalg.lstsq(np.stack(columns, axis=1), t * w, rcond=None)
        latencies = dict(zip(free, solution[:-1]))
        negative = [name for name, latency in latencies.items() if latency < 0]
        if not negative:
            break
        free = [name for name in free if name not in negative]
    per_byte = float(solution[-1])
    if per_byte <= 0:
        raise CalibrationError(f"times {t.tolist()} do not grow with sizes {x.tolist()} "
                               f"bytes: measure larger sizes")
    latencies = {name: float(latencies.get(name, 0.0)) for name in names}
    return LinkFit(float(np.mean(list(latencies.values()))), 1.0 / per_byte, latencies)
