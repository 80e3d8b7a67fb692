"""Tiered compilation: a program runs at once while its generated kernels compile.

The system C++ compiler takes 30-600 ms for a program's kernels; XLA, compiling in process,
takes 20-500 ms for the whole program. So when the kernels of a program are not in the
on-disk cache yet, ``compile`` returns an executable that runs every fusion op by op on the
native kernels (and loops in the executor), and a background thread compiles the kernels,
lowers the program again with them and swaps the new program in: executions that start
after that use the generated code, executions in flight finish on the one they started with
(each holds its own reference). ``exe.wait_optimized()`` blocks until the swap (tests and
benchmarks call it before timing); ``exe.program.deferred`` says whether the running program
still lacks kernels.

Turned off (compile waits for the compiler, as before) with ``OPENHLO_CPU_ASYNC_CODEGEN=0``
or ``CompileOptions(env_option_overrides={"async_codegen": False})``, and under a
``memory_limit`` (the first tier's fusions, op by op, hold values the limit does not count).
One worker thread compiles in the background, one program at a time, in order (more
compilers beside a running program would take its cores).
At interpreter exit, compiles still running get a few seconds to finish (a compiler killed
half way leaves only a temporary folder behind: libraries appear atomically).
"""
from __future__ import annotations

import atexit
import logging
import os
import queue
import threading
import time
from typing import Callable, Optional

LOG = logging.getLogger("openhlo.cpu")

_QUEUE: "queue.Queue[Upgrade]" = queue.Queue()
_WORKER: Optional[threading.Thread] = None
_WORKER_LOCK = threading.Lock()
_IN_FLIGHT: set = set()
_IN_FLIGHT_LOCK = threading.Lock()
EXIT_GRACE_S = 5.0


def async_codegen(options) -> bool:
    given = options.env_option_overrides.get("async_codegen") if options is not None else None
    if given is None:
        return os.environ.get("OPENHLO_CPU_ASYNC_CODEGEN", "1") != "0"
    return bool(given)


class Upgrade:
    """One background compile: ``build()`` makes the full program, ``install(program)``
    puts it in place. Upgrades run one at a time, in order, on one worker thread."""

    def __init__(self, build: Callable, install: Callable):
        self._build = build
        self._install = install
        self._done = threading.Event()
        with _IN_FLIGHT_LOCK:
            _IN_FLIGHT.add(self)
        _QUEUE.put(self)
        _ensure_worker()

    def run(self) -> None:
        try:
            self._install(self._build())
        except Exception as exc:  # noqa: BLE001 - the program keeps running op by op
            LOG.warning("generated kernels could not be built; the program keeps running op "
                        "by op: %s: %s", type(exc).__name__, exc)
        finally:
            with _IN_FLIGHT_LOCK:
                _IN_FLIGHT.discard(self)
            self._done.set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        return self._done.wait(timeout)


def wait_all() -> None:
    """Block until every background compile queued so far (and any it queues) is done:
    what a benchmark calls before timing programs it did not compile itself (torch.compile's
    graphs)."""
    while True:
        with _IN_FLIGHT_LOCK:
            pending = list(_IN_FLIGHT)
        if not pending:
            return
        for upgrade in pending:
            upgrade.wait()


def _ensure_worker() -> None:
    global _WORKER
    with _WORKER_LOCK:
        if _WORKER is None or not _WORKER.is_alive():
            _WORKER = threading.Thread(target=_work, name="openhlo-codegen", daemon=True)
            _WORKER.start()


def _work() -> None:
    while True:
        _QUEUE.get().run()


def _forget_in_child() -> None:
    # A forked child has none of the parent's threads: its queue, worker and locks start
    # afresh (a lock held by a parent thread would never be released there).
    global _QUEUE, _WORKER, _WORKER_LOCK, _IN_FLIGHT_LOCK
    _QUEUE = queue.Queue()
    _WORKER = None
    _WORKER_LOCK = threading.Lock()
    _IN_FLIGHT_LOCK = threading.Lock()
    _IN_FLIGHT.clear()


os.register_at_fork(after_in_child=_forget_in_child)


@atexit.register
def _finish_in_flight() -> None:
    deadline = time.monotonic() + EXIT_GRACE_S
    with _IN_FLIGHT_LOCK:
        pending = list(_IN_FLIGHT)
    for upgrade in pending:
        upgrade.wait(max(0.0, deadline - time.monotonic()))
