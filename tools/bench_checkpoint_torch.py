"""``python -m tools.bench_checkpoint_torch``: how long a training loop is blocked by
``dcp.async_save`` against ``dcp.save`` for a ``mark_sharding`` state, across 2 processes.

``torchrun --nproc-per-node 2`` on loopback (frameworks/torch/distributed.py) with a gloo
process group. The state: ``--megabytes`` of float32 in 16 MiB-per-row square weights, half
of them split over a "model" axis that spans the processes (each process writes its half),
half replicated (one writer each, shared out), plus a step count, saved through
frameworks/torch/checkpoint.py's planners into a fresh directory per save. Each run times,
in every process, the blocking part of ``dcp.save`` (all of it) and of ``dcp.async_save``
(until it returns: the snapshot copy; then the write goes on in a thread), and the async
save's whole time (until its future's result); the slower process counts. Medians of
``--runs``. Every checkpoint is read back once and checked against the state. Times are
reported, never asserted; the machine's load is printed with them.
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

MIB = 1024 * 1024
# Seconds one torchrun of the benchmark may take before it is stopped.
TORCHRUN_TIMEOUT_S = 600.0


def _state(megabytes: int, mesh):
    import torch

    from frameworks.torch import sharding as xs
    count = max(2, megabytes // 16)
    generator = torch.Generator().manual_seed(0)
    weights = {}
    for i in range(count):
        weight = torch.randn(2048, 2048, generator=generator)  # 16 MiB
        if i % 2 == 0:
            xs.mark_sharding(weight, mesh, ("model", None))
        weights[f"layer{i}.weight"] = weight
    return {"model": weights, "step": 0}


def _worker(out: str, megabytes: int, runs: int, directory: str) -> int:
    from datetime import timedelta

    import numpy as np
    import torch.distributed as dist

    from frameworks.torch import checkpoint as ckpt
    from frameworks.torch import sharding as xs
    dist.init_process_group("gloo", timeout=timedelta(seconds=300))
    world, rank = dist.get_world_size(), dist.get_rank()
    mesh = xs.Mesh(np.arange(world), (world,), ("model",))
    state = _state(megabytes, mesh)
    nbytes = sum(t.numel() * t.element_size() for t in state["model"].values())
    stager = ckpt.ShardedStager(reuse_buffers=True)  # as a training loop would keep it
    rows = []
    for run in range(runs):
        times = {}
        for kind in ("save", "async_save"):
            path = ckpt.checkpoint_path(os.path.join(directory, kind), run)
            dist.barrier()
            start = time.perf_counter()
            if kind == "save":
                ckpt.save(state, path)
                times["save_s"] = time.perf_counter() - start
            else:
                future = ckpt.async_save(state, path, stager=stager)
                times["async_blocking_s"] = time.perf_counter() - start
                future.result()
                times["async_total_s"] = time.perf_counter() - start
            if run == 0:
                _check(state, path)
        slowest = [None] * world
        dist.all_gather_object(slowest, times)
        rows.append({key: max(t[key] for t in slowest) for key in times})
        if rank == 0:
            print(f"run {run + 1}/{runs}: " + ", ".join(f"{k} {v:.3f}" for k, v in
                                                      rows[-1].items()), file=sys.stderr)
        dist.barrier()
        if rank == 0:
            for kind in ("save", "async_save"):
                shutil.rmtree(os.path.join(directory, kind), ignore_errors=True)
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"rows": rows, "bytes": nbytes, "processes": world}, f)
    dist.destroy_process_group()
    return 0


def _check(state: dict, path: str) -> None:
    import torch

    from frameworks.torch import checkpoint as ckpt
    target = {"model": {k: torch.empty_like(v) for k, v in state["model"].items()}, "step": -1}
    ckpt.load(target, path)
    assert target["step"] == state["step"]
    for name, value in state["model"].items():
        assert torch.equal(target["model"][name], value), name


# ---- the driver -------------------------------------------------------------------------

def measure(megabytes: int = 256, runs: int = 3, directory: str | None = None) -> dict:
    """Run the benchmark in one torchrun of 2 processes; the figures, with the machine load.
    Checkpoints go under ``directory`` (default: a temporary directory), removed after."""
    from frameworks.torch import distributed
    from pjrt.errors import ExecutionError
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        out = os.path.join(tmp, "result.json")
        finished = distributed.torchrun(
            ["-m", "tools.bench_checkpoint_torch", "--worker", out, str(megabytes), str(runs),
             tmp], 2, TORCHRUN_TIMEOUT_S, env=env)
        if finished.returncode != 0:
            raise ExecutionError(f"bench_checkpoint_torch: torchrun failed:\n"
                                 f"{finished.stderr[-4000:]}")
        with open(out) as f:
            figures = json.load(f)
    rows = figures.pop("rows")
    for key in rows[0]:
        figures[key] = statistics.median(row[key] for row in rows)
    figures.update(runs=rows, cpus=os.cpu_count(), load_1min_before=load_before,
                   load_1min_after=os.getloadavg()[0])
    return figures


def report(figures: dict) -> str:
    save, blocking = figures["save_s"], figures["async_blocking_s"]
    return "\n".join([
        f"machine: {figures['cpus']} CPUs, 1-minute load {figures['load_1min_before']:.2f} "
        f"before, {figures['load_1min_after']:.2f} after",
        f"state: {figures['bytes'] / MIB:.0f} MiB over {figures['processes']} processes, "
        f"medians of {len(figures['runs'])} runs (the slower process each run):",
        "| | seconds | vs dcp.save |", "|---|---|---|",
        f"| dcp.save (blocks throughout) | {save:.3f} | 1.00 |",
        f"| dcp.async_save, blocking | {blocking:.3f} | {blocking / save:.2f} |",
        f"| dcp.async_save, until written | {figures['async_total_s']:.3f} | "
        f"{figures['async_total_s'] / save:.2f} |"])


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--worker":
        out, megabytes, runs, directory = argv[1:5]
        return _worker(out, int(megabytes), int(runs), directory)
    parser = argparse.ArgumentParser(prog="python -m tools.bench_checkpoint_torch",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=256,
                        help="size of the state in MiB (16 MiB weights; default 256)")
    parser.add_argument("--runs", type=int, default=3, help="runs, medians reported")
    parser.add_argument("--dir", help="where the checkpoints are written (default: a "
                                      "temporary directory); removed after")
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    print(f"bench_checkpoint_torch: {args.megabytes} MiB, {args.runs} runs, 2 processes",
          file=sys.stderr)
    figures = measure(args.megabytes, args.runs, args.dir)
    print(report(figures))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
