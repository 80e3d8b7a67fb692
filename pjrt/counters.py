"""Runtime counters of this process, in the spirit of torch_xla's metrics report.

    import pjrt
    exe = pjrt.make_client("cpu").compile(text)
    exe(x); exe(x)
    print(pjrt.metrics())        # a table; pjrt.metrics().executions == 2
    pjrt.reset_metrics()

What is counted, and where:

* compiles: every ``Client.compile`` (pjrt/api.py), its wall time, and how many were served
  from a backend's persistent compilation cache (the cpu backend's compile_cache.py);
* executions: every run of a compiled program: ``execute``/``execute_sharded`` (one per
  call), the numpy convenience ``executable(*arrays)``, and the PJRT C-API plugin's native
  fast path, which never enters Python and keeps its own counters in C (pjrt/c_api);
* transfers: host -> device (``buffer_from_numpy``, the C API's BufferFromHostBuffer) and
  device -> host (``Buffer.to_numpy``, the C API's ToHostBuffer), with bytes. The numpy
  convenience reads its arguments in place and transfers nothing;
* fallbacks by op: ops that ran outside compiled code (the torch backend's eager ops,
  counted each time they run);
* recompilations by cause: the same program text compiled again by a client (JAX after
  ``jax.clear_caches()``, a new ``jit`` of the same function...), and frameworks' own causes
  (the torch backend: a graph specialized again for new input shapes, dtypes or values, and
  Dynamo tracing the same code again after a guard failed).

Counting is an integer increment where a call passes through Python anyway; native paths
count with relaxed atomics. Counts from several threads may race under free-threaded
Python; they are exact with the GIL.
"""
from __future__ import annotations

import hashlib
import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable


class _Counters:
    """The live counts (module-level ``COUNTS``); ``metrics()`` copies them."""
    __slots__ = ("compiles", "compile_seconds", "compile_cache_hits", "executions",
                 "transfers_to_device", "bytes_to_device", "transfers_to_host",
                 "bytes_to_host", "fallbacks", "recompilations", "programs_seen")

    def __init__(self):
        self.compiles = 0
        self.compile_seconds = 0.0
        self.compile_cache_hits = 0
        self.executions = 0
        self.transfers_to_device = 0
        self.bytes_to_device = 0
        self.transfers_to_host = 0
        self.bytes_to_host = 0
        self.fallbacks: Counter = Counter()
        self.recompilations: Counter = Counter()
        # client -> digests of the program texts it compiled
        self.programs_seen: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


COUNTS = _Counters()

# Counters kept outside Python (the PJRT C-API library): each source returns a dict of
# integer counts named like Metrics fields, and takes ``reset=True``.
_NATIVE_SOURCES: list = []

_INT_FIELDS = ("compiles", "compile_cache_hits", "executions", "transfers_to_device",
               "bytes_to_device", "transfers_to_host", "bytes_to_host")


@dataclass
class Metrics:
    """A snapshot of the counters (``pjrt.metrics()``); ``str()`` is the report table."""
    compiles: int = 0
    compile_seconds: float = 0.0
    compile_cache_hits: int = 0
    executions: int = 0
    transfers_to_device: int = 0
    bytes_to_device: int = 0
    transfers_to_host: int = 0
    bytes_to_host: int = 0
    fallbacks: dict = field(default_factory=dict)       # op -> times run outside compiled code
    recompilations: dict = field(default_factory=dict)  # cause -> count

    def report(self) -> str:
        rows = [("compiles", f"{self.compiles}"),
                ("compile time", f"{self.compile_seconds * 1e3:.1f} ms"),
                ("compile-cache hits", f"{self.compile_cache_hits}"),
                ("executions", f"{self.executions}"),
                ("host->device transfers",
                 f"{self.transfers_to_device} ({_bytes(self.bytes_to_device)})"),
                ("device->host transfers",
                 f"{self.transfers_to_host} ({_bytes(self.bytes_to_host)})")]
        rows += [(f"recompilations: {cause}", f"{n}")
                 for cause, n in sorted(self.recompilations.items())]
        rows += [(f"fallback: {op}", f"{n}") for op, n in sorted(self.fallbacks.items())]
        width = max(len(name) for name, _ in rows)
        lines = ["===-- OpenHLO metrics --==="]
        lines += [f"  {name:<{width}}  {value}" for name, value in rows]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024 or unit == "MiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def metrics() -> Metrics:
    """The counts since the process started or the last ``reset_metrics()``."""
    snapshot = Metrics(
        compiles=COUNTS.compiles, compile_seconds=COUNTS.compile_seconds,
        compile_cache_hits=COUNTS.compile_cache_hits, executions=COUNTS.executions,
        transfers_to_device=COUNTS.transfers_to_device, bytes_to_device=COUNTS.bytes_to_device,
        transfers_to_host=COUNTS.transfers_to_host, bytes_to_host=COUNTS.bytes_to_host,
        fallbacks=dict(COUNTS.fallbacks), recompilations=dict(COUNTS.recompilations))
    for source in _NATIVE_SOURCES:
        for name, value in source(reset=False).items():
            setattr(snapshot, name, getattr(snapshot, name) + value)
    return snapshot


def reset_metrics() -> None:
    """Zero every counter (native ones too). The programs compiled so far stay known: one
    compiled again after a reset (past a warm-up, say) is still a recompilation."""
    for source in _NATIVE_SOURCES:
        source(reset=True)
    fresh = _Counters()
    for name in _Counters.__slots__:
        if name != "programs_seen":
            setattr(COUNTS, name, getattr(fresh, name))


def add_native_source(source: Callable[..., dict]) -> None:
    """Count what ``source(reset=...)`` reports too (names from ``Metrics``' integer fields)."""
    unknown = set(source(reset=False)) - set(_INT_FIELDS)
    if unknown:
        raise ValueError(f"unknown counters {sorted(unknown)}; known: {list(_INT_FIELDS)}")
    _NATIVE_SOURCES.append(source)


def count_compile(seconds: float, cache_hit: bool) -> None:
    COUNTS.compiles += 1
    COUNTS.compile_seconds += seconds
    COUNTS.compile_cache_hits += cache_hit


def count_program_text(client, text: str) -> None:
    """Counts a recompilation when ``client`` compiled ``text`` before."""
    digest = hashlib.sha256(text.encode()).digest()
    seen = COUNTS.programs_seen.setdefault(client, set())
    if digest in seen:
        count_recompilation("same program compiled again")
    seen.add(digest)


def count_recompilation(cause: str) -> None:
    COUNTS.recompilations[cause] += 1


def count_fallback(op: str) -> None:
    COUNTS.fallbacks[op] += 1


def count_to_device(nbytes: int) -> None:
    COUNTS.transfers_to_device += 1
    COUNTS.bytes_to_device += nbytes


def count_to_host(nbytes: int) -> None:
    COUNTS.transfers_to_host += 1
    COUNTS.bytes_to_host += nbytes
