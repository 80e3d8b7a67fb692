"""Run cases in worker processes, each with a deadline, surviving crashes.

Each worker is a process that receives one case at a time over a pipe and
sends back ``(status, message, integer path)``. The parent hands out cases, waits on the
pipes and process sentinels, and:

* kills a worker whose case runs past its deadline, records ``error: timed
  out`` for that case, and starts a fresh worker;
* records ``error: worker crashed`` for the case of a worker that died
  (segfault, abort, out of memory) and starts a fresh worker.

So one slow or crashing program costs its own case only. ``jobs=0`` runs the
cases in this process, without deadlines (useful under a debugger).
"""
from __future__ import annotations

import multiprocessing
import threading
import signal
import sys
import time
from collections import deque
from multiprocessing.connection import wait
from typing import Callable, Optional

from tools.conformance.discover import Case
from tools.conformance.execute import ERROR, Target, execute_case

OnResult = Callable[[int, Case, str, str, Optional[tuple]], None]


def run_cases(cases: list[Case], target: Target, jobs: int, timeout: float,
              on_result: OnResult, fork: bool = True) -> None:
    """Run every case; ``on_result(index, case, status, message, integer path)`` for each
    (``execute_case``'s outcome). ``fork=False``: workers never come from a fork of this
    process (a client of the backend made here, ``Client.survives_fork``, would not work
    in them)."""
    if jobs <= 0:
        for i, case in enumerate(cases):
            on_result(i, case, *execute_case(case, target))
        return
    _Pool(target, min(jobs, max(len(cases), 1)), timeout, on_result, fork).run(cases)


def _worker_main(conn, target: Target) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20000))
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        if task is None:
            return
        index, case = task
        conn.send((index, execute_case(case, target)))


class _Worker:
    def __init__(self, ctx, target: Target):
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_worker_main, args=(child, target), daemon=True)
        self.process.start()
        child.close()
        self.task: tuple[int, Case] | None = None
        self.deadline = 0.0

    def start(self, index: int, case: Case, timeout: float) -> None:
        self.task = (index, case)
        self.deadline = time.monotonic() + timeout
        self.conn.send(self.task)

    def stop(self, kill: bool = False) -> None:
        if kill:
            self.process.kill()
        else:
            try:
                self.conn.send(None)
            except (BrokenPipeError, OSError):
                self.process.kill()
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.conn.close()


def _start_method(fork: bool = True) -> str:
    """Fork when it is safe: it starts warm workers (the kernels are already imported).

    Forking a process that runs other threads (JAX starts native ones, as in a
    test session that also uses it as an oracle) can deadlock the child, so then
    workers come from a fork server instead.
    """
    methods = multiprocessing.get_all_start_methods()
    # Native threads (JAX's, torch's) are invisible to threading.active_count().
    native_threads = any(name in sys.modules for name in ("jax", "jaxlib", "torch"))
    if fork and "fork" in methods and threading.active_count() == 1 and not native_threads:
        return "fork"
    return "forkserver" if "forkserver" in methods else "spawn"


class _Pool:
    def __init__(self, target: Target, jobs: int, timeout: float, on_result: OnResult,
                 fork: bool = True):
        self.ctx = multiprocessing.get_context(_start_method(fork))
        self.target, self.jobs, self.timeout = target, jobs, timeout
        self.on_result = on_result

    def run(self, cases: list[Case]) -> None:
        pending = deque(enumerate(cases))
        workers = [_Worker(self.ctx, self.target) for _ in range(self.jobs)]
        try:
            while pending or any(w.task for w in workers):
                for w in workers:
                    if w.task is None and pending:
                        w.start(*pending.popleft(), self.timeout)
                self._collect(workers)
        finally:
            for w in workers:
                w.stop(kill=w.task is not None)

    def _collect(self, workers: list[_Worker]) -> None:
        busy = [w for w in workers if w.task is not None]
        horizon = max(0.0, min(w.deadline for w in busy) - time.monotonic())
        wait([w.conn for w in busy] + [w.process.sentinel for w in busy], timeout=horizon)
        now = time.monotonic()
        for slot, w in enumerate(workers):
            if w.task is None:
                continue
            index, case = w.task
            if w.conn.poll():
                try:
                    got_index, outcome = w.conn.recv()
                except (EOFError, OSError):
                    workers[slot] = self._replace(w, index, case, self._crash_message(w))
                    continue
                w.task = None
                self.on_result(got_index, case, *outcome)
            elif not w.process.is_alive():
                workers[slot] = self._replace(w, index, case, self._crash_message(w))
            elif now >= w.deadline:
                workers[slot] = self._replace(w, index, case,
                                              f"timed out after {self.timeout:g} s")

    def _replace(self, w: _Worker, index: int, case: Case, message: str) -> _Worker:
        """Record ``message`` as the case's error and put a fresh worker in ``w``'s place."""
        w.task = None
        w.stop(kill=True)
        self.on_result(index, case, ERROR, message, None)
        return _Worker(self.ctx, self.target)

    @staticmethod
    def _crash_message(w: _Worker) -> str:
        w.process.join(timeout=1)
        code = w.process.exitcode
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"worker crashed ({name})"
        return f"worker crashed (exit code {code})"
