"""``python -m tools.bench_checkpoint jax|torch``: how long saving a checkpoint blocks a
training loop, asynchronous against synchronous, across processes on this machine.

- ``jax``: processes of 2 virtual devices joined by ``jax.distributed`` on loopback
  (frameworks/jax/distributed.py) hold a train state of ``--mb`` MiB (4 float32 arrays
  sharded over every device, a replicated int32 step) that a jitted, donating step updates;
  orbax ``CheckpointManager``s save it, ``enable_async_checkpointing`` True then False. The
  blocking time is how long ``save`` takes to return, the background time how long
  ``wait_until_finished`` then takes.
- ``torch``: a ``torchrun`` of processes with one device each and a gloo process group
  (frameworks/torch/distributed.py) hold ``--mb`` MiB in 8 float32 weights, half split over a
  "model" axis spanning the processes, half replicated, plus a step count; an in-place update
  stands for a training step. frameworks/torch/checkpoint.py saves it: ``async_save`` with
  a ``ShardedStager(reuse_buffers=True)`` kept across saves, as a training loop keeps it
  (blocking: until it returns, the snapshot of this process's pieces; background: until its
  future's result), and ``save`` (blocking throughout).

Each mode saves after a step, once untimed (first-save setup: directories, fresh snapshot
memory), then ``--runs`` timed saves, each into a new step directory; the figure of a mode is
the median over the runs of the slowest process's time. The last save of each mode is read
back and compared with the state it saved. Process 0's progress lines are relayed to stderr
while the job runs. Speed is reported, never asserted; the machine's load (1-minute
average, CPU count) is printed with the figures, since the processes share its cores.
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
DEFAULT_MB, DEFAULT_RUNS, DEFAULT_PROCESSES = 256, 5, 2
# Seconds one benchmark job may take before its processes are stopped.
JOB_TIMEOUT_S = 600.0
# Worker stderr lines starting with this are progress, relayed while the job runs.
PROGRESS = "[bench_checkpoint]"
MODES = ("async", "sync")
# The JAX state: sharded float32 arrays (the size split evenly), devices per process.
JAX_ARRAYS, JAX_DEVICES = 4, 2
# The torch state: float32 weights of 1024 columns (the size split evenly), half split.
TORCH_WEIGHTS, TORCH_COLUMNS = 8, 1024


def _progress(message: str) -> None:
    print(f"{PROGRESS} {message}", file=sys.stderr, flush=True)


class _Timings:
    """One process's times per mode and run, and the saved state's size."""

    def __init__(self, process: int, state_bytes: int):
        self.process, self.state_bytes = process, state_bytes
        self.times = {mode: {"blocking_s": [], "background_s": []} for mode in MODES}

    def add(self, mode: str, run: int, runs: int, blocking: float, background: float) -> None:
        """Record run ``run`` (0: the untimed first save) and report it from process 0."""
        if run:
            self.times[mode]["blocking_s"].append(blocking)
            self.times[mode]["background_s"].append(background)
        if self.process == 0:
            _progress(f"{mode} save {run}/{runs}{' (untimed)' if not run else ''}: blocked "
                      f"{blocking:.3f} s, then {background:.3f} s to finish")

    def write(self, directory: str) -> None:
        with open(os.path.join(directory, f"times.{self.process}.json"), "w") as f:
            json.dump({"process": self.process, "state_bytes": self.state_bytes,
                       "modes": self.times}, f)


# ---- the JAX worker ------------------------------------------------------------------------

def jax_worker(mb: int, runs: int, directory: str) -> None:
    from frameworks.jax import distributed
    distributed.initialize()
    import jax
    import jax.numpy as jnp
    import numpy as np
    import orbax.checkpoint as ocp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()).reshape(jax.process_count(), -1), ("p", "l"))
    sharded, replicated = NamedSharding(mesh, P(("p", "l"))), NamedSharding(mesh, P())
    count = mb * MIB // 4 // JAX_ARRAYS // mesh.devices.size * mesh.devices.size
    shardings = {**{f"a{i}": sharded for i in range(JAX_ARRAYS)}, "step": replicated}
    state = jax.jit(lambda: {**{f"a{i}": jnp.arange(count, dtype=jnp.float32) * (i + 1)
                                for i in range(JAX_ARRAYS)}, "step": jnp.zeros((), jnp.int32)},
                    out_shardings=shardings)()
    step = jax.jit(lambda s: {k: v + 1 for k, v in s.items()}, out_shardings=shardings,
                   donate_argnums=0)
    timings = _Timings(jax.process_index(), JAX_ARRAYS * count * 4 + 4)
    for mode in MODES:
        manager = ocp.CheckpointManager(
            os.path.join(directory, mode),
            options=ocp.CheckpointManagerOptions(enable_async_checkpointing=mode == "async",
                                                 max_to_keep=2))
        for run in range(runs + 1):
            state = step(state)
            jax.block_until_ready(state)
            start = time.perf_counter()
            manager.save(run, args=ocp.args.StandardSave(state))
            returned = time.perf_counter()
            manager.wait_until_finished()
            timings.add(mode, run, runs, returned - start, time.perf_counter() - returned)
        restored = manager.restore(runs, args=ocp.args.StandardRestore(
            {k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=v.sharding)
             for k, v in state.items()}))
        for key, value in state.items():
            for mine, theirs in zip(value.addressable_shards, restored[key].addressable_shards):
                if not np.array_equal(np.asarray(mine.data), np.asarray(theirs.data)):
                    raise AssertionError(f"{mode}: restored {key} differs from the saved one")
        manager.close()
    timings.write(directory)


# ---- the torch worker ----------------------------------------------------------------------

def torch_worker(mb: int, runs: int, directory: str) -> None:
    from datetime import timedelta

    import numpy as np
    import torch
    import torch.distributed as dist

    from frameworks.torch import checkpoint as ckpt
    from frameworks.torch import sharding as xs
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    world, rank = dist.get_world_size(), dist.get_rank()
    mesh = xs.Mesh(np.arange(world), (world,), ("model",))
    rows = mb * MIB // 4 // TORCH_WEIGHTS // TORCH_COLUMNS // world * world
    generator = torch.Generator().manual_seed(0)
    weights = {}
    for i in range(TORCH_WEIGHTS):
        weights[f"layer{i}.weight"] = torch.randn(rows, TORCH_COLUMNS, generator=generator)
        if i % 2 == 0:
            xs.mark_sharding(weights[f"layer{i}.weight"], mesh, ("model", None))
    state = {"model": weights, "step": 0}
    timings = _Timings(rank, TORCH_WEIGHTS * rows * TORCH_COLUMNS * 4)
    stager = ckpt.ShardedStager(reuse_buffers=True)
    for mode in MODES:
        for run in range(runs + 1):
            with torch.no_grad():  # the training step
                for weight in weights.values():
                    weight.add_(1.0)
            state["step"] += 1
            path = ckpt.checkpoint_path(os.path.join(directory, mode), run)
            dist.barrier()
            start = time.perf_counter()
            if mode == "async":
                future = ckpt.async_save(state, path, stager=stager)
                returned = time.perf_counter()
                future.result()
            else:
                ckpt.save(state, path)
                returned = time.perf_counter()
            timings.add(mode, run, runs, returned - start, time.perf_counter() - returned)
            if run == runs:
                _check_torch(state, path)
            dist.barrier()  # every process is done with it: the disk space is needed
            if rank == 0 and run < runs:
                shutil.rmtree(path)
    timings.write(directory)
    dist.destroy_process_group()


def _check_torch(state: dict, path: str) -> None:
    import torch

    from frameworks.torch import checkpoint as ckpt
    target = {"model": {k: torch.empty_like(v) for k, v in state["model"].items()}, "step": -1}
    ckpt.load(target, path)
    if target["step"] != state["step"]:
        raise AssertionError(f"{path}: step {target['step']} loaded, {state['step']} saved")
    for name, value in state["model"].items():
        if not torch.equal(target["model"][name], value):
            raise AssertionError(f"{path}: loaded {name} differs from the saved one")


WORKERS = {"jax": jax_worker, "torch": torch_worker}


# ---- the driver ----------------------------------------------------------------------------

def _relay(line: str) -> None:
    if line.startswith(PROGRESS):
        print(line, end="", file=sys.stderr, flush=True)


def _run_job(framework: str, mb: int, runs: int, processes: int, directory: str) -> None:
    from pjrt.errors import ExecutionError
    args = ["-m", "tools.bench_checkpoint", "--worker", framework, directory, str(mb), str(runs)]
    if framework == "jax":
        from frameworks.jax import distributed
        distributed.launch(args, processes, JAX_DEVICES, JOB_TIMEOUT_S,
                           on_stderr_line=lambda process, line: _relay(line))
        return
    from frameworks.torch import distributed
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    finished = distributed.torchrun(args, processes, JOB_TIMEOUT_S, env=env,
                                    on_stderr_line=_relay)
    if finished.returncode != 0:
        raise ExecutionError(f"bench_checkpoint torch: torchrun failed (exit status "
                             f"{finished.returncode}):\n{finished.stderr[-4000:]}")


def summarize(per_process: list) -> dict:
    """``{mode: {name: seconds}}``: per mode and time, the median over the runs of the
    slowest process's time in each run."""
    return {mode: {name: statistics.median(max(times) for times in
                                           zip(*(p["modes"][mode][name] for p in per_process)))
                   for name in ("blocking_s", "background_s")} for mode in MODES}


def measure(framework: str, mb: int = DEFAULT_MB, runs: int = DEFAULT_RUNS,
            processes: int = DEFAULT_PROCESSES, directory: str | None = None) -> dict:
    """Run one job; the figures with the machine load. Checkpoints go into a temporary
    directory under ``directory`` (default: the system's), removed after."""
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench_checkpoint.", dir=directory) as tmp:
        _run_job(framework, mb, runs, processes, tmp)
        per_process = []
        for process in range(processes):
            with open(os.path.join(tmp, f"times.{process}.json")) as f:
                per_process.append(json.load(f))
    return {"framework": framework, "processes": processes,
            "devices_per_process": JAX_DEVICES if framework == "jax" else 1, "runs": runs,
            "state_bytes": per_process[0]["state_bytes"], "modes": summarize(per_process),
            "per_process": per_process, "cpus": os.cpu_count(),
            "load_1min_before": load_before, "load_1min_after": os.getloadavg()[0]}


SAVES = {"jax": {"async": "orbax CheckpointManager.save, async",
                 "sync": "orbax CheckpointManager.save, sync"},
         "torch": {"async": "dcp.async_save (ShardedStager)", "sync": "dcp.save"}}


def report(figures: dict) -> str:
    modes = figures["modes"]
    sync = modes["sync"]["blocking_s"]
    lines = [f"machine: {figures['cpus']} CPUs, 1-minute load {figures['load_1min_before']:.2f} "
             f"before, {figures['load_1min_after']:.2f} after",
             f"{figures['framework']}: {figures['state_bytes'] / MIB:.0f} MiB state over "
             f"{figures['processes']} processes x {figures['devices_per_process']} devices, "
             f"medians of {figures['runs']} saves (the slowest process each save):",
             "| save | blocks the loop (s) | then finishes in (s) | blocking / sync save |",
             "|---|---|---|---|"]
    for mode, row in modes.items():
        lines.append(f"| {SAVES[figures['framework']][mode]} | {row['blocking_s']:.3f} | "
                     f"{row['background_s']:.3f} | {row['blocking_s'] / sync:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        framework, directory, mb, runs = argv[1:5]
        WORKERS[framework](int(mb), int(runs), directory)
        return 0
    parser = argparse.ArgumentParser(prog="python -m tools.bench_checkpoint",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("framework", choices=sorted(WORKERS))
    parser.add_argument("--mb", type=int, default=DEFAULT_MB,
                        help=f"size of the state in MiB (default {DEFAULT_MB})")
    parser.add_argument("--runs", type=int, default=DEFAULT_RUNS,
                        help=f"timed saves per mode (default {DEFAULT_RUNS})")
    parser.add_argument("--processes", type=int, default=DEFAULT_PROCESSES,
                        help=f"processes (default {DEFAULT_PROCESSES})")
    parser.add_argument("--dir", help="where the checkpoints are written (default: a "
                                      "temporary directory); removed after")
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    if args.mb < 1 or args.runs < 1 or args.processes < 1:
        parser.error("--mb, --runs and --processes must be positive")
    _progress(f"{args.framework}: {args.processes} processes, state {args.mb} MiB, "
              f"{args.runs} timed saves per mode")
    figures = measure(args.framework, args.mb, args.runs, args.processes, args.dir)
    print(report(figures))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
