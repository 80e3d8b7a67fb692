"""Start the processes of a multi-process job on this machine, and stop them.

``launch(command, num_processes, timeout_s)`` serves a TcpStore on the loopback address,
starts ``command`` once per process with the variables options.from_environment reads
(``OPENHLO_STORE``, ``OPENHLO_PROCESS_INDEX``, ``OPENHLO_NUM_PROCESSES``), and waits. A
child that fails stops the others; so do the timeout and Ctrl-C. ``openhlo run
--num-processes`` and the multi-process tests use it. ``free_loopback_port()`` gives a port
for a job's other servers (a JAX coordinator, torchrun's ``MASTER_PORT``).
"""
from __future__ import annotations

import functools
import os
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional

from pjrt.distributed.options import NUM_PROCESSES_ENV, PROCESS_INDEX_ENV, STORE_ENV
from pjrt.distributed.store import TcpStore
from pjrt.errors import DeadlineExceededError, ExecutionError

# Seconds a stopped child gets to exit on SIGTERM before it is killed.
STOP_GRACE_S = 5.0
# Lines of a failed child's stderr quoted in the error.
ERROR_LINES = 20


@dataclass
class Finished:
    """One child that exited: its index, exit code and captured output."""
    process_index: int
    returncode: int
    stdout: str
    stderr: str


def launch(command: list[str], num_processes: int, timeout_s: float,
           env: Optional[dict] = None, cwd: Optional[str] = None,
           on_stderr_line: Optional[Callable[[int, str], None]] = None) -> list[Finished]:
    """Run ``command`` as processes 0..num_processes-1 and return them, in order, once all
    exited with status 0. Raises ExecutionError naming the first process that failed (with
    the end of its stderr), DeadlineExceededError after ``timeout_s``; every child is
    stopped before either is raised (and on KeyboardInterrupt). ``on_stderr_line(index,
    line)`` sees each line of a child's stderr as it comes (progress while the job runs);
    the lines are captured all the same."""
    store = TcpStore.serve()
    children: list[subprocess.Popen] = []
    outputs: list[list[str]] = []
    readers: list[threading.Thread] = []
    try:
        for index in range(num_processes):
            child_env = dict(os.environ if env is None else env)
            child_env.update({STORE_ENV: store.address, PROCESS_INDEX_ENV: str(index),
                              NUM_PROCESSES_ENV: str(num_processes)})
            child = subprocess.Popen(command, env=child_env, cwd=cwd, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
            children.append(child)
            captured = ["", ""]
            outputs.append(captured)
            for slot, stream in enumerate((child.stdout, child.stderr)):
                relay = None
                if slot == 1 and on_stderr_line is not None:
                    relay = functools.partial(on_stderr_line, index)
                reader = threading.Thread(target=drain_lines,
                                          args=(stream, captured, slot, relay), daemon=True)
                reader.start()
                readers.append(reader)
        deadline = time.monotonic() + timeout_s
        failed: list[int] = []
        while any(child.poll() is None for child in children):
            # The first to fail, before stopping the others makes them fail too.
            failed = [i for i, child in enumerate(children) if child.returncode not in (None, 0)]
            if failed:
                break
            if time.monotonic() > deadline:
                running = [i for i, child in enumerate(children) if child.poll() is None]
                _stop(children)
                raise DeadlineExceededError(f"processes {running} of {num_processes} still "
                                            f"ran after {timeout_s:g} s: stopped")
            time.sleep(0.05)
        _stop(children)
        for reader in readers:
            reader.join(timeout=STOP_GRACE_S)
        finished = [Finished(i, child.returncode, out, err)
                    for i, (child, (out, err)) in enumerate(zip(children, outputs))]
        failed = failed or [one.process_index for one in finished if one.returncode != 0]
        for one in (finished[i] for i in failed[:1]):
            tail = "\n".join(one.stderr.rstrip().splitlines()[-ERROR_LINES:])
            raise ExecutionError(f"process {one.process_index} of {num_processes} failed "
                                 f"(exit status {one.returncode}):\n{tail}")
        return finished
    finally:
        _stop(children)
        store.close()


def free_loopback_port() -> int:
    """A TCP port of the loopback address that nothing listens on now (the system's choice;
    another program may take it before the caller binds it, which a job then reports as a
    failed start)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def drain_lines(stream, captured: list, slot: int,
                on_line: Optional[Callable[[str], None]] = None) -> None:
    """Read a child's text ``stream`` to its end into ``captured[slot]`` (a reader thread's
    work: a pipe nobody reads stops the child once full), passing each line to
    ``on_line``."""
    for line in stream:
        captured[slot] += line
        if on_line is not None:
            on_line(line)


def _stop(children: list) -> None:
    """Terminate the children still running, then kill those that ignore it."""
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for child in children:
        try:
            child.wait(timeout=max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
