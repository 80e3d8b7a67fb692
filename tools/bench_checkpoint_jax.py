"""``python -m tools.bench_checkpoint_jax``: how long an orbax checkpoint save blocks a JAX
training loop on openhlo, asynchronous against synchronous, across processes.

2 processes (default) x 2 virtual devices, joined by ``jax.distributed`` on the loopback
address (frameworks/jax/distributed.py), hold a train state of ``--mb`` MiB (float32 arrays
sharded over every device, and a small replicated one) that a jitted, donating step updates.
For each mode, a ``CheckpointManager`` (``enable_async_checkpointing`` True, then False)
saves the state after a step, ``--runs`` times (after one untimed save): the figure is the
time ``manager.save`` takes to return (what the loop waits for), and, for the asynchronous
manager, the time until ``wait_until_finished`` returns after it (the write in the
background). Each process reports its medians; a mode's figure is the slowest process's.
Every save is restored once at the end and compared with the state it saved (numpy).

Speed is reported, never asserted. The machine's load (1-minute average, CPU count) is
printed with the figures, since the processes share its cores.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

MIB = 2 ** 20
DEFAULT_MB, DEFAULT_RUNS, DEFAULT_PROCESSES, DEVICES = 256, 5, 2, 2
# The state's sharded float32 arrays (the size split evenly among them).
ARRAYS = 4
# Seconds one benchmark job may take before its processes are stopped.
LAUNCH_TIMEOUT_S = 600.0
MODES = {"async": True, "sync": False}


def _log(message: str) -> None:
    print(f"[bench_checkpoint_jax] {message}", file=sys.stderr, flush=True)


# ---- the worker (one process of the job) ---------------------------------------------------

def worker(mb: int, runs: int, directory: str) -> dict:
    from frameworks.jax import distributed
    distributed.initialize()
    import jax
    import jax.numpy as jnp
    import numpy as np
    import orbax.checkpoint as ocp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    process = jax.process_index()
    mesh = Mesh(np.array(jax.devices()).reshape(jax.process_count(), -1), ("p", "l"))
    sharded, replicated = NamedSharding(mesh, P(("p", "l"))), NamedSharding(mesh, P())
    count = mb * MIB // 4 // ARRAYS // mesh.devices.size * mesh.devices.size
    shardings = {**{f"a{i}": sharded for i in range(ARRAYS)}, "step": replicated}
    state = jax.jit(lambda: {**{f"a{i}": jnp.arange(count, dtype=jnp.float32) * (i + 1)
                                for i in range(ARRAYS)}, "step": jnp.zeros((), jnp.int32)},
                    out_shardings=shardings)()
    step = jax.jit(lambda s: {k: v + 1 for k, v in s.items()}, out_shardings=shardings,
                   donate_argnums=0)
    figures = {}
    for mode, asynchronous in MODES.items():
        manager = ocp.CheckpointManager(
            os.path.join(directory, mode),
            options=ocp.CheckpointManagerOptions(enable_async_checkpointing=asynchronous,
                                                 max_to_keep=2))
        blocking, background = [], []
        for run in range(runs + 1):  # run 0: untimed (first-save setup)
            state = step(state)
            jax.block_until_ready(state)
            start = time.perf_counter()
            manager.save(run, args=ocp.args.StandardSave(state))
            returned = time.perf_counter()
            manager.wait_until_finished()
            finished = time.perf_counter()
            if run:
                blocking.append(returned - start)
                background.append(finished - returned)
            if process == 0:
                _log(f"{mode} save {run}/{runs}: blocked {returned - start:.3f} s, "
                     f"then {finished - returned:.3f} s to finish")
        restored = manager.restore(runs, args=ocp.args.StandardRestore(
            {k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=v.sharding)
             for k, v in state.items()}))
        for key, value in state.items():
            for mine, theirs in zip(value.addressable_shards, restored[key].addressable_shards):
                if not np.array_equal(np.asarray(mine.data), np.asarray(theirs.data)):
                    raise AssertionError(f"{mode}: restored {key} differs from the saved one")
        manager.close()
        figures[mode] = {"blocking_s": statistics.median(blocking),
                         "background_s": statistics.median(background)}
    return {"process": process, "state_bytes": ARRAYS * count * 4 + 4, **figures}


# ---- the driver ----------------------------------------------------------------------------

def measure(mb: int = DEFAULT_MB, runs: int = DEFAULT_RUNS,
            processes: int = DEFAULT_PROCESSES) -> dict:
    """Run the job once; the slowest process's medians per mode, with the machine load."""
    from frameworks.jax import distributed
    load_before = os.getloadavg()[0]
    directory = tempfile.mkdtemp(prefix="bench_checkpoint_jax.")
    try:
        _log(f"{processes} processes x {DEVICES} devices, state {mb} MiB, {runs} runs per mode")
        finished = distributed.launch(["-m", "tools.bench_checkpoint_jax", "--worker",
                                       directory, str(mb), str(runs)], processes, DEVICES,
                                      LAUNCH_TIMEOUT_S)
        # the job's output is captured until it ends: relay process 0's progress lines
        for line in finished[0].stderr.splitlines():
            if line.startswith("[bench_checkpoint_jax]"):
                print(line, file=sys.stderr)
        per_process = []
        for process in range(processes):
            with open(os.path.join(directory, f"result.{process}.json")) as f:
                per_process.append(json.load(f))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    modes = {mode: {name: max(p[mode][name] for p in per_process)
                    for name in ("blocking_s", "background_s")} for mode in MODES}
    return {"processes": processes, "devices_per_process": DEVICES, "runs": runs,
            "state_bytes": per_process[0]["state_bytes"], "modes": modes,
            "per_process": per_process, "cpus": os.cpu_count(),
            "load_1min_before": load_before, "load_1min_after": os.getloadavg()[0]}


def report(figures: dict) -> str:
    modes = figures["modes"]
    sync = modes["sync"]["blocking_s"]
    lines = [f"machine: {figures['cpus']} CPUs, 1-minute load {figures['load_1min_before']:.2f} "
             f"before, {figures['load_1min_after']:.2f} after",
             f"orbax CheckpointManager.save, {figures['state_bytes'] / MIB:.0f} MiB state over "
             f"{figures['processes']} processes x {figures['devices_per_process']} devices "
             f"(medians of {figures['runs']} saves, slowest process):",
             "| save | blocks the loop (s) | then finishes in (s) | blocking / sync save |",
             "|---|---|---|---|"]
    for mode, row in modes.items():
        lines.append(f"| {mode} | {row['blocking_s']:.3f} | {row['background_s']:.3f} | "
                     f"{row['blocking_s'] / sync:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_checkpoint_jax",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=DEFAULT_MB,
                        help=f"size of the train state in MiB (default {DEFAULT_MB})")
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS,
                        help=f"timed saves per mode (default {DEFAULT_RUNS})")
    parser.add_argument("--processes", type=int, default=DEFAULT_PROCESSES,
                        help=f"processes of {DEVICES} devices each (default "
                             f"{DEFAULT_PROCESSES})")
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON")
    parser.add_argument("--worker", nargs=3, metavar=("DIR", "MB", "RUNS"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        directory, mb, runs = args.worker[0], int(args.worker[1]), int(args.worker[2])
        result = worker(mb, runs, directory)
        with open(os.path.join(directory, f"result.{result['process']}.json"), "w") as f:
            json.dump(result, f)
        return 0
    if args.mb < 1 or args.runs < 1 or args.processes < 1:
        parser.error("--mb, --runs and --processes must be positive")
    figures = measure(args.mb, args.runs, args.processes)
    print(report(figures))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
