"""``python -m tools.bench_allreduce``: all-reduce bandwidth across processes, OpenHLO against
``torch.distributed`` on gloo in the same run, and a data-parallel step on 1, 2 and 4
processes.

* ``allreduce``: 2 processes (``torchrun --nproc-per-node 2`` on loopback), one cpu device
  each. For each size (float32, 4 KiB to 64 MiB), ours is an OpenHLO program holding one
  ``stablehlo.all_reduce`` over both processes' devices (a multi-process cpu client joined
  through torchrun's store, frameworks/torch/distributed.py), executed from buffers already
  on the device; the peer is ``torch.distributed.all_reduce`` of a gloo process group in
  the same processes. Both are timed in alternating rounds, the same number of times in
  every process (collectives must match up); each reports the median. GB/s is the size over
  the time (for 2 processes the "bus bandwidth" of nccl-tests is the same figure).
* ``dp_step``: a data-parallel training step (an MLP, the global batch split over a 1-D
  mesh of one device per process with ``mark_sharding``, ``torch.compile(backend="openhlo")``
  forward and backward, SGD) on 1, 2 and 4 processes, the same global batch each time.

Results are checked (every all-reduce's sum, the step's loss against eager); speed is
reported, never asserted. The machine's load (1-minute average, CPU count) is printed with
the figures, since the processes share its cores.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

KIB = 1024
DEFAULT_SIZES = tuple(4 * KIB * 4 ** i for i in range(8))  # 4 KiB .. 64 MiB
DEFAULT_PROCESSES = (1, 2, 4)
# Seconds one torchrun of the benchmark may take before it is stopped.
TORCHRUN_TIMEOUT_S = 600.0
# The data-parallel step's model and global batch.
DP_BATCH, DP_WIDTH, DP_HIDDEN = 256, 256, 1024


def repeats_for(size: int, quick: bool) -> int:
    """How many timed all-reduces of ``size`` bytes: about 256 MiB moved per contender (fewer
    with --quick), at least 5. A function of the size only: every process runs the same
    count, as collectives require."""
    budget = (16 if quick else 256) * KIB * KIB
    return max(5, min(200, budget // size))


# ---- the workers (run by torchrun) --------------------------------------------------------

def _all_reduce_program(count: int, processes: int) -> str:
    t = f"tensor<{count}xf32>"
    group = ", ".join(str(i) for i in range(processes))
    return f"""module attributes {{mhlo.num_replicas = {processes} : i32}} {{
func.func @main(%x: {t}) -> {t} {{
  %r = "stablehlo.all_reduce"(%x) ({{
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %c = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %c : tensor<f32>
  }}) {{replica_groups = dense<[[{group}]]> : tensor<1x{processes}xi64>}} : ({t}) -> {t}
  return %r : {t}
}}
}}"""


def worker_allreduce(sizes: list, quick: bool) -> dict:
    import numpy as np
    import torch
    import torch.distributed as dist

    from frameworks.torch import distributed
    # The gloo group first: openhlo then joins through its store (distributed.py).
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    client = distributed.client(world)  # one device per process
    device = client.addressable_devices()[0]
    expected = world * (world + 1) / 2  # process r contributes r + 1
    rows = []
    for size in sizes:
        count = size // 4
        exe = client.compile(_all_reduce_program(count, world))
        mine = np.full(count, rank + 1, np.float32)
        buffer = client.buffer_from_numpy(mine, device)
        tensor = torch.from_numpy(mine.copy())

        def ours():
            outputs, events = exe.execute_sharded([[buffer]], with_events=True)
            events[0].wait()
            return outputs[0][0]

        def theirs():
            dist.all_reduce(tensor)  # in place: the values grow, which costs nothing

        checked_ours = ours().to_numpy()
        theirs()
        if not (np.all(checked_ours == expected) and bool((tensor == expected).all())):
            raise AssertionError(f"all-reduce of {size} bytes: wrong sum")
        times = {"ours": [], "torch_gloo": []}
        for _ in range(repeats_for(size, quick)):
            for name, fn in (("ours", ours), ("torch_gloo", theirs)):
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
        medians = {name: statistics.median(t) for name, t in times.items()}
        rows.append({"bytes": size, "repeats": len(times["ours"]),
                     **{f"{k}_s": v for k, v in medians.items()},
                     **{f"{k}_gbps": size / v / 1e9 for k, v in medians.items()}})
    dist.barrier()
    dist.destroy_process_group()
    return {"processes": world, "rows": rows}


def _timed(fn, repeats: int) -> list:
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def worker_dp_step(steps: int) -> dict:
    import numpy as np
    import torch

    from frameworks.torch import distributed
    from frameworks.torch import sharding as xs
    from frameworks.torch.backend import openhlo_backend
    world = distributed.num_processes()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(DP_WIDTH, DP_HIDDEN), torch.nn.ReLU(),
                                torch.nn.Linear(DP_HIDDEN, DP_WIDTH))
    x = torch.randn(DP_BATCH, DP_WIDTH, generator=torch.Generator().manual_seed(1))
    target = torch.randn(DP_BATCH, DP_WIDTH, generator=torch.Generator().manual_seed(2))
    mesh = xs.Mesh(np.arange(world), (world,), ("data",))
    xs.mark_sharding(x, mesh, ("data", None))
    xs.mark_sharding(target, mesh, ("data", None))

    def loss_fn(x, target):
        return torch.nn.functional.mse_loss(model(x), target)

    compiled = torch.compile(loss_fn, backend=openhlo_backend)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        optimizer.zero_grad()
        loss = compiled(x, target)
        loss.backward()
        optimizer.step()
        return loss

    with torch.no_grad():
        want = loss_fn(x, target).item()  # eager, from the initial weights
    first = step().item()
    if abs(first - want) > 1e-5 * abs(want):
        raise AssertionError(f"data-parallel step on {world} process(es): loss {first} != "
                             f"eager {want}")
    times = _timed(step, steps)
    return {"processes": world, "step_s": statistics.median(times), "loss_checked": want}


# ---- the driver -------------------------------------------------------------------------

def _torchrun(worker_args: list, processes: int) -> dict:
    from frameworks.torch import distributed
    from pjrt.errors import ExecutionError
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OPENHLO_COLLECTIVE_TIMEOUT_S=os.environ.get("OPENHLO_COLLECTIVE_TIMEOUT_S",
                                                           "120"))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        finished = distributed.torchrun(["-m", "tools.bench_allreduce", "--worker", out,
                                         *worker_args], processes, TORCHRUN_TIMEOUT_S, env=env)
        if finished.returncode != 0:
            raise ExecutionError(f"bench_allreduce: torchrun of {processes} process(es) "
                                 f"failed:\n{finished.stderr[-4000:]}")
        with open(out) as f:
            return json.load(f)


def measure(sizes=DEFAULT_SIZES, processes=DEFAULT_PROCESSES, quick: bool = False,
            steps: int = 10) -> dict:
    """Run the benchmark (a torchrun per measurement; ``processes=()`` skips the
    data-parallel step); the figures, with the machine load."""
    load_before = os.getloadavg()[0]
    allreduce = _torchrun(["allreduce", "--sizes", ",".join(map(str, sizes))]
                          + (["--quick"] if quick else []), 2)
    dp = [_torchrun(["dp_step", "--steps", str(steps)], p) for p in processes]
    return {"allreduce": allreduce, "dp_step": dp, "cpus": os.cpu_count(),
            "load_1min_before": load_before, "load_1min_after": os.getloadavg()[0]}


def _human(size: int) -> str:
    return f"{size // (KIB * KIB)} MiB" if size >= KIB * KIB else f"{size // KIB} KiB"


def report(figures: dict) -> str:
    lines = [f"machine: {figures['cpus']} CPUs, 1-minute load {figures['load_1min_before']:.2f} "
             f"before, {figures['load_1min_after']:.2f} after",
             f"all-reduce f32 across {figures['allreduce']['processes']} processes (GB/s, median):",
             "| size | openhlo | torch gloo | openhlo / torch |", "|---|---|---|---|"]
    for row in figures["allreduce"]["rows"]:
        lines.append(f"| {_human(row['bytes'])} | {row['ours_gbps']:.3f} | "
                     f"{row['torch_gloo_gbps']:.3f} | "
                     f"{row['ours_gbps'] / row['torch_gloo_gbps']:.2f} |")
    if not figures["dp_step"]:
        return "\n".join(lines)
    base = figures["dp_step"][0]["step_s"]
    lines += [f"data-parallel step (MLP {DP_WIDTH}-{DP_HIDDEN}-{DP_WIDTH}, global batch "
              f"{DP_BATCH}, one device per process):", "| processes | step (ms) | vs 1 |",
              "|---|---|---|"]
    for row in figures["dp_step"]:
        lines.append(f"| {row['processes']} | {row['step_s'] * 1e3:.1f} | "
                     f"{row['step_s'] / base:.2f}x |")
    return "\n".join(lines)


def _sizes(text: str) -> list:
    return [int(s) for s in text.split(",")]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_allreduce",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=_sizes, default=list(DEFAULT_SIZES),
                        help="comma-separated all-reduce sizes in bytes (multiples of 4)")
    parser.add_argument("--processes", type=_sizes, default=list(DEFAULT_PROCESSES),
                        help="process counts of the data-parallel step (default 1,2,4)")
    parser.add_argument("--steps", type=int, default=10, help="timed data-parallel steps")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--json", metavar="OUT", help="also write the figures as JSON")
    parser.add_argument("--worker", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return _worker(args.worker)
    if any(s % 4 or s <= 0 for s in args.sizes):
        parser.error(f"--sizes must be positive multiples of 4 bytes, got {args.sizes}")
    figures = measure(args.sizes, args.processes, args.quick, args.steps)
    print(report(figures))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)
    return 0


def _worker(argv: list) -> int:
    """``--worker OUT allreduce --sizes ... [--quick]`` or ``--worker OUT dp_step --steps N``
    (one torchrun process; process 0 writes OUT)."""
    out, kind, rest = argv[0], argv[1], argv[2:]
    parser = argparse.ArgumentParser(prog=f"bench_allreduce worker {kind}")
    parser.add_argument("--sizes", type=_sizes)
    parser.add_argument("--steps", type=int)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(rest)
    result = (worker_allreduce(args.sizes, args.quick) if kind == "allreduce"
              else worker_dp_step(args.steps))
    if int(os.environ.get("RANK", "0")) == 0:
        with open(out, "w") as f:
            json.dump(result, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
