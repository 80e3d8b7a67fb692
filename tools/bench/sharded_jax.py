"""The JAX side of ``tools.bench.sharded``: one process per stack, 8 devices.

``python -m tools.bench.sharded_jax OUT.json [--steps N] [--quick]`` runs each sharded workload
under ``jax.jit`` with ``NamedSharding`` inputs on the platform ``JAX_PLATFORMS`` names
(``cpu``: XLA with ``--xla_force_host_platform_device_count=8``; ``openhlo``: our plugin with
``OPENHLO_JAX_NUM_DEVICES=8``) and writes, per workload: the median step time, the results
(``OUT.json.NAME.npz``, to compare the stacks), and on XLA the lowered StableHLO, the
collectives of XLA's final compiled program (``tools.spmd_heldout_jax.parse_collectives``)
and the unsharded results (the function jitted on one device).
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time

import numpy as np

SIZES = {"full": {"batch": 256, "d": 512, "hidden": 2048},
         "quick": {"batch": 64, "d": 128, "hidden": 256}}


def workloads(batch: int, d: int, hidden: int):
    """``{name: (description, fn, inputs, in specs, out specs, mesh shape, axis names)}``."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    rng = np.random.default_rng(0)

    def normal(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def megatron(x, w1, w2):
        return jax.nn.relu(x @ w1) @ w2

    def loss(params, x, y):
        w1, w2 = params
        return jnp.mean((jax.nn.relu(x @ w1) @ w2 - y) ** 2)

    def dp_step(w1, w2, x, y):
        value, (g1, g2) = jax.value_and_grad(loss)((w1, w2), x, y)
        return value, w1 - 0.01 * g1, w2 - 0.01 * g2

    s1, s2 = 1.0 / np.sqrt(d), 1.0 / np.sqrt(hidden)
    return {
        "megatron_mlp": (
            f"x[{batch},{d}] @ w1[{d},{hidden}] (columns split) -> relu -> @ w2 (rows split)",
            megatron, (normal(batch, d), normal(d, hidden, scale=s1), normal(hidden, d, scale=s2)),
            (P(), P(None, "model"), P("model", None)), P(), (8,), ("model",)),
        "dp_train_step": (
            f"MLP {d}-{hidden}-{d}, batch {batch} split over 8 devices: loss, grads, SGD",
            dp_step, (normal(d, hidden, scale=s1), normal(hidden, d, scale=s2),
                      normal(batch, d), normal(batch, d)),
            (P(), P(), P("data", None), P("data", None)), (P(), P(), P()), (8,), ("data",)),
    }


def run(out_path: str, steps: int, quick: bool) -> None:
    import jax
    from jax.sharding import Mesh, NamedSharding

    platform = jax.devices()[0].platform
    report = {"platform": platform, "devices": jax.device_count(), "workloads": {}}
    for name, (desc, fn, inputs, in_specs, out_specs, shape, axes) in \
            workloads(**SIZES["quick" if quick else "full"]).items():
        mesh = Mesh(np.array(jax.devices()[:8]).reshape(shape), axes)

        def named(spec, mesh=mesh):
            return NamedSharding(mesh, spec)
        in_sh = tuple(named(s) for s in in_specs)
        out_sh = jax.tree_util.tree_map(named, out_specs,
                                        is_leaf=lambda s: not isinstance(s, tuple))
        jitted = jax.jit(fn, in_shardings=in_sh, out_shardings=out_sh)
        args = [jax.device_put(a, s) for a, s in zip(inputs, in_sh)]
        lowered = jitted.lower(*args)
        start = time.perf_counter()
        compiled = lowered.compile()
        compile_s = time.perf_counter() - start
        result = jax.block_until_ready(compiled(*args))  # warm up
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            jax.block_until_ready(compiled(*args))
            times.append(time.perf_counter() - start)
        leaves = jax.tree_util.tree_leaves(result)
        entry = {"description": desc, "compile_s": compile_s,
                 "step_s": statistics.median(times), "results": f"{out_path}.{name}.npz"}
        np.savez(entry["results"], *[np.asarray(r) for r in leaves])
        if platform == "cpu":
            from tools.spmd_heldout_jax import parse_collectives
            entry["stablehlo"] = lowered.as_text()
            entry["collectives"] = parse_collectives(compiled.as_text())
            # the unsharded reference: the same function on one device
            ref = jax.jit(fn)(*[jax.device_put(a, jax.devices()[0]) for a in inputs])
            entry["reference"] = f"{out_path}.{name}.ref.npz"
            np.savez(entry["reference"], *[np.asarray(r) for r in jax.tree_util.tree_leaves(ref)])
        report["workloads"][name] = entry
    with open(out_path, "w") as f:
        json.dump(report, f)


def main(argv=None) -> int:
    from tools.bench.sharded import worker_args
    opts = worker_args(argv)
    if os.environ.get("JAX_PLATFORMS") == "openhlo":
        import frameworks.jax.plugin as plugin
        plugin.initialize()
    run(opts.out, opts.steps, opts.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
