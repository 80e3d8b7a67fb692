"""JAX processes on this machine joined by ``jax.distributed`` on the openhlo platform.

``launch(args, num_processes, devices, timeout_s)`` starts ``python ARGS`` once per process
through pjrt.distributed.launch (bounded in time, every process stopped before it returns
or raises), each with ``JAX_PLATFORMS=openhlo``, ``devices`` virtual devices and the address
of a coordinator on the loopback address; in each process, ``initialize()`` joins the job
(``jax.distributed.initialize``). For tests and benchmarks of multi-process JAX programs
(frameworks/jax/tests/multiprocess_jax_worker.py, orbax_checkpoint_worker.py,
tools/bench_checkpoint.py).
"""
from __future__ import annotations

import os
import sys
from typing import Optional

# host:port of the coordinator (process 0 serves it), set by launch() in each process.
COORDINATOR_ENV = "OPENHLO_JAX_COORDINATOR"
# Seconds a collective waits for the other processes before it fails (the runtime's
# default is 300 s; a job on one machine that waits this long is broken).
COLLECTIVE_TIMEOUT_S = "120"


def launch(args: list, num_processes: int, devices: int, timeout_s: float,
           env: Optional[dict] = None, on_stderr_line=None) -> list:
    """Run ``python ARGS`` as ``num_processes`` JAX processes of ``devices`` devices each
    and return their ``pjrt.distributed.launch.Finished`` records once all exited 0;
    raises as pjrt.distributed.launch does (ExecutionError naming the first process that
    failed, DeadlineExceededError after ``timeout_s``); ``on_stderr_line(index, line)``
    sees the processes' stderr as it comes."""
    from pjrt.distributed import launch as launcher
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    child_env = dict(os.environ if env is None else env)
    for name in ("XLA_FLAGS", "JAX_ENABLE_X64"):  # the caller's settings, not the job's
        child_env.pop(name, None)
    paths = [p for p in child_env.get("PYTHONPATH", "").split(os.pathsep) if p]
    child_env.update({"JAX_PLATFORMS": "openhlo", "OPENHLO_JAX_NUM_DEVICES": str(devices),
                      COORDINATOR_ENV: f"127.0.0.1:{launcher.free_loopback_port()}",
                      "PYTHONPATH": os.pathsep.join([root] + paths)})
    child_env.setdefault("OPENHLO_COLLECTIVE_TIMEOUT_S", COLLECTIVE_TIMEOUT_S)
    return launcher.launch([sys.executable, *args], num_processes, timeout_s, env=child_env,
                           cwd=root, on_stderr_line=on_stderr_line)


def initialize(**options) -> None:
    """Join the job launch() started this process in: ``jax.distributed.initialize`` with
    the coordinator, this process's index and the process count it was given, and
    ``options`` (its other keywords, e.g. ``shutdown_timeout_seconds``)."""
    from pjrt.distributed.options import NUM_PROCESSES_ENV, PROCESS_INDEX_ENV
    from frameworks.jax import plugin
    plugin.initialize()
    import jax
    jax.distributed.initialize(coordinator_address=os.environ[COORDINATOR_ENV],
                               num_processes=int(os.environ[NUM_PROCESSES_ENV]),
                               process_id=int(os.environ[PROCESS_INDEX_ENV]), **options)
