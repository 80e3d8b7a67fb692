"""The PyTorch side of ``tools.bench.sharded``: the same two workloads (same inputs, drawn as
``tools.bench.sharded_jax`` draws them) written in PyTorch with ``mark_sharding`` and run by
``torch.compile(backend="openhlo")`` on 8 virtual cpu devices.

``python -m tools.bench.sharded_torch OUT.json [--steps N] [--quick]`` writes, per workload:
the median step time, the compile time (the first call), the results (``OUT.json.NAME.npz``,
compared with the unsharded JAX reference by ``tools.bench.sharded``) and the collectives of
every partitioned program the step ran (forward, and backward for the training step), with
the bytes each device sends.
"""
from __future__ import annotations

import json
import statistics
import sys
import time

import numpy as np

from tools.bench.sharded_jax import SIZES


def _inputs(batch: int, d: int, hidden: int) -> dict:
    """The arrays sharded_jax.workloads draws, in its order (one generator, seed 0)."""
    rng = np.random.default_rng(0)

    def normal(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)
    s1, s2 = 1.0 / np.sqrt(d), 1.0 / np.sqrt(hidden)
    megatron = (normal(batch, d), normal(d, hidden, scale=s1), normal(hidden, d, scale=s2))
    dp = (normal(d, hidden, scale=s1), normal(hidden, d, scale=s2), normal(batch, d),
          normal(batch, d))
    return {"megatron_mlp": megatron, "dp_train_step": dp}


def workloads(batch: int, d: int, hidden: int) -> dict:
    """``{name: (description, step, tensors)}``; ``step(*tensors)`` returns the results."""
    import torch

    from frameworks.torch import sharding as xs
    from frameworks.torch.backend import openhlo_backend

    arrays = _inputs(batch, d, hidden)

    x, w1, w2 = (torch.from_numpy(a.copy()) for a in arrays["megatron_mlp"])
    model_mesh = xs.Mesh(np.arange(8), (8,), ("model",))
    xs.mark_sharding(w1, model_mesh, (None, "model"))
    xs.mark_sharding(w2, model_mesh, ("model", None))
    mlp = torch.compile(lambda x, w1, w2: torch.relu(x @ w1) @ w2, backend=openhlo_backend)

    def megatron_step(x, w1, w2):
        with torch.no_grad():
            return (mlp(x, w1, w2),)

    dw1, dw2, dx, dy = (torch.from_numpy(a.copy()) for a in arrays["dp_train_step"])
    dw1.requires_grad_(True)
    dw2.requires_grad_(True)
    data_mesh = xs.Mesh(np.arange(8), (8,), ("data",))
    xs.mark_sharding(dx, data_mesh, ("data", None))
    xs.mark_sharding(dy, data_mesh, ("data", None))
    loss_fn = torch.compile(lambda w1, w2, x, y: torch.mean((torch.relu(x @ w1) @ w2 - y) ** 2),
                            backend=openhlo_backend)

    def dp_step(w1, w2, x, y):
        loss = loss_fn(w1, w2, x, y)
        g1, g2 = torch.autograd.grad(loss, (w1, w2))
        with torch.no_grad():
            return loss.detach(), w1 - 0.01 * g1, w2 - 0.01 * g2

    return {
        "megatron_mlp": ((f"x[{batch},{d}] @ w1[{d},{hidden}] (columns split) -> relu -> @ w2 "
                          f"(rows split); torch mark_sharding"), megatron_step, (x, w1, w2)),
        "dp_train_step": ((f"MLP {d}-{hidden}-{d}, batch {batch} split over 8 devices: loss, "
                           f"grads (AOTAutograd), SGD; torch mark_sharding"), dp_step,
                          (dw1, dw2, dx, dy)),
    }


def run(out_path: str, steps: int, quick: bool) -> None:

    from frameworks.torch import sharding as xs
    from tools.spmd_heldout import our_collectives

    report = {"stack": "openhlo-torch", "devices": 8, "workloads": {}}
    for name, (desc, step, tensors) in workloads(**SIZES["quick" if quick else "full"]).items():
        before = len(xs.compiled_programs())
        start = time.perf_counter()
        result = step(*tensors)  # compiles (Dynamo, AOTAutograd, lowering, partitioning)
        compile_s = time.perf_counter() - start
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            step(*tensors)
            times.append(time.perf_counter() - start)
        programs = xs.compiled_programs()[before:]
        collectives = [dict(c, program=prog) for prog, exe in programs
                       for c in our_collectives(exe.executable.module)]
        entry = {"description": desc, "compile_s": compile_s, "step_s": statistics.median(times),
                 "results": f"{out_path}.{name}.npz",
                 "programs": [prog for prog, _ in programs],
                 "partitions": [exe.num_partitions for _, exe in programs],
                 "collectives": collectives}
        np.savez(entry["results"], *[r.detach().numpy() for r in result])
        report["workloads"][name] = entry
    with open(out_path, "w") as f:
        json.dump(report, f)


def main(argv=None) -> int:
    from tools.bench.sharded import worker_args
    opts = worker_args(argv)
    run(opts.out, opts.steps, opts.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
