"""Run a function on one input at a time in a worker process that may crash or hang.

``SubprocessRunner(function).call(payload)`` sends ``payload`` to a worker process, which calls
``function(payload, stage)`` and sends back what it returns. The parent waits on the pipe and
on the process with a deadline, so a segfault, an abort, an out-of-memory kill or a hang costs
one input: the outcome says what happened (with the last ``stage`` the function announced) and
the next call starts a fresh worker.

Why not atheris' fork mode: libFuzzer's ``-fork`` re-runs the whole Python script for each
job (seconds of imports), applies one timeout to the whole job, and in Python loses the finding
of a hang to a killed job; a worker behind a pipe restarts in milliseconds from a fork server
and says which stage hung. Workers come from a fork server, never from a plain fork of the
fuzzing process: a plain fork would inherit libFuzzer's signal handlers, which turn the
worker's own crash into a report of the fuzzer's.
"""
from __future__ import annotations

import importlib
import multiprocessing
import os
import resource
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any

OK, CRASHED, TIMED_OUT = "ok", "crashed", "timed out"

# A worker may not take more address space than this: a program that asks for terabytes then
# fails with MemoryError (a finding naming the place) instead of taking the machine down.
WORKER_ADDRESS_SPACE = 8 << 30


@dataclass
class Outcome:
    status: str        # OK, CRASHED or TIMED_OUT
    value: Any = None  # what the function returned (OK)
    stage: str = ""    # the last stage announced before the crash or the timeout
    detail: str = ""   # the signal or exit code of a crash


def _exit_with_owner(lifeline) -> None:
    """Ends the worker when the process that owns it is gone: the owner holds the only
    other end of ``lifeline`` and never writes to it, so the read returns when it closes.
    A worker's parent is the fork server, not its owner, and neither notices the owner
    being killed: a worker busy on an input (a hang) would otherwise run on forever."""
    try:
        lifeline.recv()
    except (EOFError, OSError):
        pass
    os._exit(1)


def _worker_main(conn, function_path: str, lifeline) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    threading.Thread(target=_exit_with_owner, args=(lifeline,), daemon=True).start()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard == resource.RLIM_INFINITY or hard > WORKER_ADDRESS_SPACE:
        resource.setrlimit(resource.RLIMIT_AS, (WORKER_ADDRESS_SPACE, hard))
    module_name, name = function_path.split(":")
    function = getattr(importlib.import_module(module_name), name)

    def stage(what: str) -> None:
        conn.send(("stage", what))
    while True:
        try:
            payload = conn.recv()
        except EOFError:
            return
        conn.send(("done", function(payload, stage)))


class SubprocessRunner:
    """One worker process running ``function_path`` (``"package.module:function"``)."""

    def __init__(self, function_path: str, timeout: float, preload: tuple[str, ...] = ()):
        self.function_path = function_path
        self.timeout = timeout
        self.ctx = multiprocessing.get_context("forkserver")
        self.ctx.set_forkserver_preload(list(preload) or [function_path.split(":")[0]])
        self._process = None
        self._conn = None
        self._lifeline = None

    def call(self, payload) -> Outcome:
        if self._process is None:
            self._start()
        self._conn.send(payload)
        deadline = time.monotonic() + self.timeout
        stage = ""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._stop()
                return Outcome(TIMED_OUT, stage=stage)
            if self._conn.poll(min(remaining, 0.5)):
                try:
                    tag, value = self._conn.recv()
                except (EOFError, OSError):
                    return Outcome(CRASHED, stage=stage, detail=self._death())
                if tag == "done":
                    return Outcome(OK, value=value, stage=stage)
                stage = value
            elif not self._process.is_alive():
                return Outcome(CRASHED, stage=stage, detail=self._death())

    def close(self) -> None:
        if self._process is not None:
            self._stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _start(self) -> None:
        conn, child = self.ctx.Pipe()
        lifeline_read, lifeline = self.ctx.Pipe(duplex=False)
        process = self.ctx.Process(target=_worker_main,
                                   args=(child, self.function_path, lifeline_read), daemon=True)
        try:
            process.start()
        finally:
            child.close()
            lifeline_read.close()
        self._process, self._conn, self._lifeline = process, conn, lifeline

    def _death(self) -> str:
        """How the worker died (a signal name or an exit code); forgets the worker."""
        self._process.join(timeout=5)
        code = self._process.exitcode
        self._stop()
        if code is not None and code < 0:
            try:
                return signal.Signals(-code).name
            except ValueError:
                return f"signal {-code}"
        return f"exit code {code}"

    def _stop(self) -> None:
        if self._process.is_alive():
            self._process.kill()
        self._process.join(timeout=5)
        self._conn.close()
        self._lifeline.close()
        self._process = None
        self._conn = None
        self._lifeline = None
