"""Held-out JAX programs, openhlo's cpu backend against XLA:CPU in the same run.

``python -m tools.bench_heldout [--quick] [--budget S] [--json OUT] [NAME ...]``

The bench suite's workloads are what the compiler was tuned on; these are programs of the
same kinds that it was not: the suite's workloads at other shapes, and other compositions
(RMS norm with a SwiGLU feed-forward, a strided convolution net, a column softmax, a scan
over stacked layers, a causal attention with fewer heads, a GELU MLP training step with
momentum, cumulative sums). Each program is lowered once with ``jax.jit``; openhlo compiles
that StableHLO (and waits for its generated kernels), XLA compiles the same lowering; the
outputs must agree with XLA's (the suite's check, tools/bench/suite.py), then both are timed in alternating
rounds (tools/bench/timing.py). Compile times are cold (empty caches in a fresh temporary
folder): openhlo's until its generated kernels are in place. The report gives each program's openhlo/XLA time ratio, the
geometric mean and the worst program, and the machine's load average. Exit status 1 if any
result disagrees.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tools.bench.workloads import WORKLOADS, Instance, _dense_init, _normal

@dataclass(frozen=True)
class HeldOut:
    name: str
    description: str
    build: Callable[[np.random.Generator, bool], Instance]   # build(rng, quick)


def _suite_at(workload: str, sizes: dict, quick_sizes: dict):
    """A bench-suite workload at shapes the suite does not use."""
    def build(rng, quick):
        return WORKLOADS[workload].build(rng, **(quick_sizes if quick else sizes))
    return build


def _rmsnorm_swiglu(rng, quick):
    import jax
    import jax.numpy as jnp
    rows, d, hidden = (256, 256, 688) if quick else (2048, 512, 1376)
    x = _normal(rng, (rows, d))
    g = (1 + _normal(rng, (d,), 0.1)).astype(np.float32)
    w_gate, _ = _dense_init(rng, d, hidden)
    w_up, _ = _dense_init(rng, d, hidden)
    w_down, _ = _dense_init(rng, hidden, d)

    def fn(x, g, w_gate, w_up, w_down):
        h = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g
        return (x + (jax.nn.silu(h @ w_gate) * (h @ w_up)) @ w_down,)
    return Instance((x, g, w_gate, w_up, w_down), fn, None)


def _strided_convnet(rng, quick):
    import jax
    import jax.numpy as jnp
    batch, size = (2, 16) if quick else (8, 32)
    x = _normal(rng, (batch, size, size, 16))
    k1 = _normal(rng, (3, 3, 16, 32), 1 / math.sqrt(9 * 16))
    k2 = _normal(rng, (3, 3, 32, 64), 1 / math.sqrt(9 * 32))
    w, b = _dense_init(rng, 64, 10)
    dims = ("NHWC", "HWIO", "NHWC")

    def fn(x, k1, k2, w, b):
        h = jax.nn.relu(jax.lax.conv_general_dilated(x, k1, (2, 2), "SAME",
                                                     dimension_numbers=dims))
        h = jax.nn.relu(jax.lax.conv_general_dilated(h, k2, (2, 2), "SAME",
                                                     dimension_numbers=dims))
        return (jnp.mean(h, axis=(1, 2)) @ w + b,)
    return Instance((x, k1, k2, w, b), fn, None)


def _column_softmax(rng, quick):
    import jax
    rows, cols = (512, 256) if quick else (4096, 512)
    x = _normal(rng, (rows, cols), 3.0)

    def fn(x):
        return (jax.nn.softmax(x, axis=0), jax.nn.logsumexp(x, axis=0))
    return Instance((x,), fn, None)


def _layer_scan(rng, quick):
    import jax
    import jax.numpy as jnp
    layers, batch, d = (4, 16, 64) if quick else (8, 64, 256)
    ws = _normal(rng, (layers, d, d), 1 / math.sqrt(d))
    bs = _normal(rng, (layers, d), 0.01)
    x = _normal(rng, (batch, d))

    def fn(ws, bs, x):
        def layer(h, wb):
            w, b = wb
            return jnp.tanh(h @ w + b), jnp.sum(h * h)
        h, norms = jax.lax.scan(layer, x, (ws, bs))
        return h, norms
    return Instance((ws, bs, x), fn, None)


def _causal_attention(rng, quick):
    import jax
    import jax.numpy as jnp
    batch, seq, heads, dim = (1, 64, 2, 32) if quick else (4, 384, 4, 64)
    q, k, v = (_normal(rng, (batch, seq, heads, dim)) for _ in range(3))

    def fn(q, k, v):
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(dim)
        mask = jnp.tril(jnp.ones((seq, seq), bool))
        scores = jnp.where(mask, scores, -1e30)
        return (jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores, axis=-1), v),)
    return Instance((q, k, v), fn, None)


def _gelu_momentum_train(rng, quick):
    import jax
    import jax.numpy as jnp
    batch, d_in, hidden, classes = (16, 64, 96, 10) if quick else (64, 512, 768, 100)
    w1, b1 = _dense_init(rng, d_in, hidden)
    w2, b2 = _dense_init(rng, hidden, classes)
    params = (w1, b1, w2, b2)
    velocity = tuple(np.zeros_like(p) for p in params)
    x = _normal(rng, (batch, d_in))
    labels = rng.integers(0, classes, batch).astype(np.int32)

    def loss(params, x, labels):
        w1, b1, w2, b2 = params
        logits = jax.nn.gelu(x @ w1 + b1) @ w2 + b2
        picked = jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], axis=1)
        return -jnp.mean(picked)

    def fn(w1, b1, w2, b2, v1, c1, v2, c2, x, labels):
        params, vel = (w1, b1, w2, b2), (v1, c1, v2, c2)
        value, grads = jax.value_and_grad(loss)(params, x, labels)
        vel = tuple(0.9 * v + g for v, g in zip(vel, grads))
        return (value,) + tuple(p - 0.01 * v for p, v in zip(params, vel)) + vel
    return Instance(params + velocity + (x, labels), fn, None)


def _cumulative(rng, quick):
    import jax.numpy as jnp
    rows, cols = (64, 128) if quick else (1024, 1024)
    x = _normal(rng, (rows, cols))

    def fn(x):
        return (jnp.cumsum(x, axis=1), jnp.max(x, axis=0) - jnp.min(x, axis=0))
    return Instance((x,), fn, None)


PROGRAMS: dict[str, HeldOut] = {p.name: p for p in (
    HeldOut("mlp_train_wide", "the suite's MLP step at 256-512-2048-100, batch 256",
            _suite_at("mlp_train", {"batch": 256, "d_in": 512, "hidden": 2048, "classes": 100},
                      {"batch": 16, "d_in": 32, "hidden": 64, "classes": 10})),
    HeldOut("gpt_block_small", "the suite's GPT block at d=512 h=8 seq=128 batch=4",
            _suite_at("gpt_block_fwd", {"batch": 4, "seq": 128, "d": 512, "heads": 8},
                      {"batch": 1, "seq": 16, "d": 64, "heads": 2})),
    HeldOut("gpt_block_train_small", "its training step, d=384 h=6 seq=128 batch=2",
            _suite_at("gpt_block_train", {"batch": 2, "seq": 128, "d": 384, "heads": 6},
                      {"batch": 1, "seq": 16, "d": 64, "heads": 2})),
    HeldOut("layernorm_gelu_tall", "the suite's layer norm + GELU at x[2048,3072]",
            _suite_at("layernorm_gelu", {"rows": 2048, "cols": 3072}, {"rows": 64, "cols": 96})),
    HeldOut("softmax_xent_gpt2", "the suite's softmax cross-entropy at logits[64,50257]",
            _suite_at("softmax_xent", {"rows": 64, "vocab": 50257}, {"rows": 4, "vocab": 1000})),
    HeldOut("conv_block_deep", "the suite's conv block at NHWC 8x28x28x128",
            _suite_at("conv_block", {"batch": 8, "height": 28, "width": 28, "channels": 128},
                      {"batch": 2, "height": 8, "width": 8, "channels": 8})),
    HeldOut("rmsnorm_swiglu", "RMS norm + SwiGLU feed-forward, x[2048,512], hidden 1376",
            _rmsnorm_swiglu),
    HeldOut("strided_convnet", "2 x (3x3 stride-2 conv, ReLU), mean pool, dense; 8x32x32x16",
            _strided_convnet),
    HeldOut("column_softmax", "softmax and logsumexp over axis 0 of x[4096,512]",
            _column_softmax),
    HeldOut("layer_scan", "lax.scan over 8 stacked tanh layers, d=256, batch 64",
            _layer_scan),
    HeldOut("causal_attention", "causal attention b=4 seq=384 h=4 d=64 (einsum spelling)",
            _causal_attention),
    HeldOut("gelu_momentum_train", "GELU MLP 512-768-100 step with SGD momentum, batch 64",
            _gelu_momentum_train),
    HeldOut("cumulative", "cumsum along rows and column ranges of x[1024,1024]",
            _cumulative),
)}


def run(names: list[str], quick: bool, budget: float, progress=print,
        cache_root: str | None = None) -> dict:
    """Compile, check and time each named program; the figures as a dict. ``cache_root``: an
    empty folder for every compilation cache, so compile times are cold ones."""
    from tools.bench.runners import OpenHLORunner, XlaRunner, lower, use_cache_root
    from tools.bench.suite import check_outputs
    from tools.bench.timing import interleaved_medians
    if cache_root is not None:
        use_cache_root(cache_root)
    ours, xla = OpenHLORunner(), XlaRunner()
    ours.setup()
    xla.setup()
    results = []
    for index, name in enumerate(names, 1):
        program = PROGRAMS[name]
        instance = program.build(np.random.default_rng(0), quick)
        lowered = lower(instance)
        mine, theirs = ours.prepare(instance, lowered), xla.prepare(instance, lowered)
        problem = check_outputs(mine.call(), [np.asarray(o) for o in theirs.call()])
        row = {"name": name, "description": program.description,
               "compile_s": {"openhlo": mine.optimized_s, "xla": theirs.compile_s},
               "agrees": problem is None, "problem": problem}
        if problem is None:
            times = interleaved_medians({"openhlo": mine.call, "xla": theirs.call}, budget)
            row["median_s"] = {k: v["median_s"] for k, v in times.items()}
            row["ratio"] = times["openhlo"]["median_s"] / times["xla"]["median_s"]
        results.append(row)
        shown = f"{row['ratio']:.2f}x XLA" if problem is None else f"WRONG: {problem}"
        progress(f"[{index}/{len(names)}] {name}: {shown}")
    ratios = [r["ratio"] for r in results if "ratio" in r]
    summary = {"geomean": math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None,
               "worst": max(results, key=lambda r: r.get("ratio", 0.0))["name"] if ratios else None,
               "wrong": [r["name"] for r in results if not r["agrees"]],
               "load_average": os.getloadavg(), "cores": os.cpu_count(), "quick": quick}
    return {"programs": results, "summary": summary}


def format_report(figures: dict) -> str:
    lines = [f"{'program':<24} {'openhlo':>10} {'XLA':>10} {'ratio':>7}  compile (ours/XLA)"]
    for r in figures["programs"]:
        if "ratio" not in r:
            lines.append(f"{r['name']:<24} WRONG: {r['problem']}")
            continue
        ms = r["median_s"]
        lines.append(f"{r['name']:<24} {ms['openhlo'] * 1e3:>8.3f}ms {ms['xla'] * 1e3:>8.3f}ms "
                     f"{r['ratio']:>6.2f}x  {r['compile_s']['openhlo']:.2f}s / "
                     f"{r['compile_s']['xla']:.2f}s")
    s = figures["summary"]
    if s["geomean"] is not None:
        lines.append(f"geometric mean {s['geomean']:.2f}x XLA; worst {s['worst']}")
    load = ", ".join(f"{v:.1f}" for v in s["load_average"])
    lines.append(f"load average {load} on {s['cores']} cores"
                 + ("; quick shapes" if s["quick"] else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_heldout",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"programs to run (default all): {', '.join(PROGRAMS)}")
    parser.add_argument("--quick", action="store_true", help="small shapes: a smoke run")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds of timing per program and contender (default 1, quick 0.1)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in PROGRAMS]
    if unknown:
        parser.error(f"unknown program {', '.join(unknown)}; known: {', '.join(PROGRAMS)}")
    budget = args.budget if args.budget is not None else (0.1 if args.quick else 1.0)
    with tempfile.TemporaryDirectory(prefix="openhlo-heldout-") as caches:
        figures = run(args.names or list(PROGRAMS), args.quick, budget,
                      progress=lambda line: print(line, file=sys.stderr, flush=True),
                      cache_root=caches)
    print(format_report(figures))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)
    return 1 if figures["summary"]["wrong"] else 0


if __name__ == "__main__":
    sys.exit(main())
