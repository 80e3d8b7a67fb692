"""Auto-sharding on held-out programs: the plan against an expert's sharding, estimated and
measured, on 8 virtual devices.

``python -m tools.auto_sharding_heldout [--repeat 15] [--hardware generic-cpu]
[--json OUT.json] [--case NAME ...]``

The programs are training steps (forward, loss, weight gradients) written in JAX with shapes
and compositions the auto-sharding tests do not use: a four-layer MLP, a transformer block
with a batch dimension, a two-convolution CNN. Each runs on a 1-D mesh (``model=8``) and a
2-D mesh (``x=4,y=2``). The expert plan is what a user writes with ``jax.jit(...,
in_shardings=...)``: Megatron (column- then row-parallel pairs, heads split) for the MLP and
the transformer, data parallel for the CNN; JAX lowers it with its shardings and our
propagation and partitioner place the collectives. The auto plan is the same program lowered
without shardings and given to ``auto_shard`` with the mesh.

For each case it reports the solver's status and time; the estimated step time of the
per-device program (costed op by op by the scheduler's estimator, not the solver's own
objective) and the bytes its collectives move, for both plans; the measured step time of
both on the cpu backend's 8 virtual devices (medians of interleaved runs, with the machine's
load); and whether the auto-sharded results equal the unsharded program's. Exit status 1
when a plan is more than 5% slower in estimate than the expert's, moves more bytes, or
computes other results.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

DEVICES = 8
MESHES = {"model=8": (("model",), (8,)), "x=4,y=2": (("x", "y"), (4, 2))}


def _mlp(x, t, w1, w2, w3, w4):
    import jax
    import jax.numpy as jnp

    def loss(*ws):
        h = x
        for i, w in enumerate(ws):
            h = h @ w
            if i < len(ws) - 1:
                h = jnp.tanh(h)
        return jnp.mean((h - t) ** 2)
    return jax.value_and_grad(loss, argnums=(0, 1, 2, 3))(w1, w2, w3, w4)


def _transformer(x, t, wq, wk, wv, wo, w1, w2):
    import jax
    import jax.numpy as jnp

    def loss(wq, wk, wv, wo, w1, w2):
        q = jnp.einsum("bsd,dhk->bhsk", x, wq)
        k = jnp.einsum("bsd,dhk->bhsk", x, wk)
        v = jnp.einsum("bsd,dhk->bhsk", x, wv)
        probs = jax.nn.softmax(jnp.einsum("bhsk,bhtk->bhst", q, k) / 8.0, axis=-1)
        attn = jnp.einsum("bhst,bhtk,hkd->bsd", probs, v, wo) + x
        y = jax.nn.gelu(attn @ w1) @ w2 + attn
        return jnp.mean((y - t) ** 2)
    return jax.value_and_grad(loss, argnums=tuple(range(6)))(wq, wk, wv, wo, w1, w2)


def _cnn(x, labels, k1, k2, w):
    import jax
    import jax.numpy as jnp

    def conv(h, k):
        return jax.lax.conv_general_dilated(h, k, (1, 1), "SAME",
                                            dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def loss(k1, k2, w):
        h = jax.nn.relu(conv(jax.nn.relu(conv(x, k1)), k2))
        logits = jnp.mean(h, axis=(1, 2)) @ w
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * labels, axis=-1))
    return jax.value_and_grad(loss, argnums=(0, 1, 2))(k1, k2, w)


def cases() -> dict:
    """name -> (step function, argument shapes, expert spec per argument: one entry per
    dimension, "M" for the model axes, "B" for the batch axes, None for whole)."""
    return {
        "mlp4": (_mlp, [(16, 512), (16, 512), (512, 1536), (1536, 512), (512, 1536),
                        (1536, 512)],
                 [None, None, (None, "M"), ("M", None), (None, "M"), ("M", None)]),
        "transformer": (_transformer, [(2, 16, 256), (2, 16, 256), (256, 8, 32), (256, 8, 32),
                                       (256, 8, 32), (8, 32, 256), (256, 1024), (1024, 256)],
                        [None, None, (None, "M", None), (None, "M", None), (None, "M", None),
                         ("M", None, None), (None, "M"), ("M", None)]),
        "cnn": (_cnn, [(256, 12, 12, 3), (256, 16), (3, 3, 3, 8), (3, 3, 8, 8), (8, 16)],
                [("B", None, None, None), ("B", None), None, None, None]),
    }


def _spec(entry, shape, names):
    """A PartitionSpec for ``entry``: "M"/"B" stand for all the mesh's axes."""
    from jax.sharding import PartitionSpec
    if entry is None:
        return PartitionSpec(*([None] * len(shape)))
    axes = tuple(names) if len(names) > 1 else names[0]
    return PartitionSpec(*[axes if e in ("M", "B") else None for e in entry])


def lowered(name: str, mesh: str | None) -> str:
    """The step's StableHLO: unannotated (``mesh`` None) or with the expert's shardings."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    fn, shapes, expert = cases()[name]
    args = [jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes]
    if mesh is None:
        return jax.jit(fn).lower(*args).as_text()
    names, sizes = MESHES[mesh]
    device_mesh = jax.make_mesh(sizes, names, devices=jax.devices()[:DEVICES])
    shardings = [NamedSharding(device_mesh, _spec(e, s, names)) for e, s in zip(expert, shapes)]
    return jax.jit(fn, in_shardings=shardings).lower(*args).as_text()


def estimate(module, hw: str) -> tuple:
    """(estimated seconds, collective bytes) of ``module``'s per-device program."""
    from xla_core.cost import hardware
    from xla_core.passes import PassContext, Pipeline, parse_pass_list
    from xla_core.scheduling.estimator import CostModelEstimator, sequential_seconds
    from xla_core.spmd.summary import collectives
    Pipeline("spmd", parse_pass_list("inline,sharding-propagation,spmd-partition")).run(
        module, PassContext())
    seconds = sequential_seconds(CostModelEstimator(hardware(hw), module), module)
    return seconds, sum(nbytes for _, _, nbytes in collectives(module))


def _time(executables: dict, inputs: list, repeat: int) -> dict:
    """Median seconds of each executable's run, interleaved so load hits them alike."""
    times = {k: [] for k in executables}
    for exe in executables.values():
        exe.execute_global(*inputs)  # warm: kernels compiled, buffers sized
    for _ in range(repeat):
        for key, exe in executables.items():
            start = time.perf_counter()
            exe.execute_global(*inputs)
            times[key].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}


def run_case(name: str, mesh: str, hw: str, repeat: int) -> dict:
    import numpy as np

    import pjrt
    import stablehlo
    from xla_core.passes import PassContext, Pipeline, parse_pass_list
    from xla_core.spmd.auto_sharding import apply_plan, auto_shard
    plain = lowered(name, None)
    expert_text = lowered(name, mesh)
    module = stablehlo.parse(plain)
    # JAX's private helpers (relu, gelu, ...) are calls, which auto_shard runs whole
    Pipeline("inline", parse_pass_list("inline")).run(module, PassContext())
    plan = auto_shard(module, mesh, hardware=hw)
    apply_plan(module, plan)
    auto_text = stablehlo.print_module(module)
    auto_s, auto_bytes = estimate(stablehlo.parse(auto_text), hw)
    expert_s, expert_bytes = estimate(stablehlo.parse(expert_text), hw)

    rng = np.random.default_rng(0)
    shapes = cases()[name][1]
    inputs = [(0.1 * rng.standard_normal(s)).astype(np.float32) for s in shapes]
    client = pjrt.make_client("cpu", num_devices=DEVICES)
    options = pjrt.CompileOptions(num_partitions=DEVICES)
    executables = {"auto": client.compile(auto_text, options),
                   "expert": client.compile(expert_text, options)}
    want = [np.asarray(r) for r in pjrt.make_client("cpu").compile(plain)(*inputs)]
    got = [np.asarray(r) for r in executables["auto"].execute_global(*inputs)]
    equal = len(got) == len(want) and all(
        np.allclose(g, w, rtol=1e-4, atol=1e-5 * max(1.0, float(np.max(np.abs(w)))))
        for g, w in zip(got, want))
    measured = _time(executables, inputs, repeat)
    return {"case": name, "mesh": mesh, "ops": sum(1 for _ in module.lookup("main").body.operations),
            "solver": plan.solution.status, "solve_s": round(plan.solution.seconds, 3),
            "variables": plan.solution.variables,
            "estimated_s": {"auto": auto_s, "expert": expert_s},
            "estimate_ratio": auto_s / expert_s,
            "bytes": {"auto": auto_bytes, "expert": expert_bytes},
            "measured_s": measured, "measured_ratio": measured["auto"] / measured["expert"],
            "results_equal": bool(equal),
            "arguments": [str(a) for a in plan.arguments]}


def _ok(row: dict) -> bool:
    return (row["estimate_ratio"] <= 1.05 and row["bytes"]["auto"] <= row["bytes"]["expert"]
            and row["results_equal"])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.auto_sharding_heldout",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=15, help="timed runs of each plan (default 15)")
    p.add_argument("--hardware", default="generic-cpu",
                   help="the hardware description both plans are costed on (default generic-cpu)")
    p.add_argument("--case", action="append", choices=sorted(cases()),
                   help="run only these programs (repeatable)")
    p.add_argument("--json", metavar="OUT.json", help="also write the rows as JSON")
    args = p.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    jax.config.update("jax_num_cpu_devices", DEVICES)
    rows = []
    for name in args.case or sorted(cases()):
        for mesh in MESHES:
            print(f"[{name} on {mesh}] ...", file=sys.stderr, flush=True)
            row = run_case(name, mesh, args.hardware, args.repeat)
            rows.append(row)
            est = row["estimated_s"]
            print(f"{name:12s} {mesh:8s} {row['ops']:4d} ops  solver {row['solver']} "
                  f"{row['solve_s']:.2f}s  estimate auto/expert {est['auto'] * 1e3:.3f}/"
                  f"{est['expert'] * 1e3:.3f} ms ({row['estimate_ratio']:.3f}x)  bytes "
                  f"{row['bytes']['auto']}/{row['bytes']['expert']}  measured "
                  f"{row['measured_s']['auto'] * 1e3:.2f}/{row['measured_s']['expert'] * 1e3:.2f}"
                  f" ms ({row['measured_ratio']:.3f}x)  results "
                  f"{'equal' if row['results_equal'] else 'DIFFER'}"
                  f"{'' if _ok(row) else '  <- FAILS'}", flush=True)
    load = os.getloadavg()[0]
    print(f"load average {load:.2f} on {os.cpu_count()} cores")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "load": load, "hardware": args.hardware}, f, indent=1)
    return 0 if all(_ok(r) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
