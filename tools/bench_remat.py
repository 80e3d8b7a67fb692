"""Training steps under a memory limit: what recomputation (the ``remat`` pass) costs.

    python -m tools.bench_remat [--steps mlp,transformer] [--fraction 0.5] [--budget 1.0]
                                [--json OUT]

Each step is a JAX training step (loss, gradients by ``jax.value_and_grad``, an SGD update),
lowered once (``jax.jit(f).lower(...)``) and compiled twice by ``pjrt.make_client("cpu")``
(waiting for the generated kernels): as is, and with the compile option
``env_option_overrides={"memory_limit": fraction x the first one's peak}``. Peaks are
``exe.memory_stats()["peak_bytes"]`` (arguments + the packed heap of the program as it
runs) and, measured, what one run held (``run_peak_bytes``: the arguments plus the cpu
runtime's high-water mark of live arrays during the run, "(ran)" in the report); the limited
one also gives its peak before recomputation (its fusion forms no multi-output fusions) and
the ops it recomputed. Under the limit means both its peaks are. Both run on the same
inputs, their results are compared bit for bit, and they are timed in alternating rounds
(tools/bench/timing.py). The report gives the peaks, the limit, the time ratio limited / as
is (issue 21's target: at most 1.4) and the machine's load average, since times mean little
on a loaded machine.

The steps: ``mlp``, 16 tanh layers of width 128 on a batch of 2,048 (activations dominate);
``transformer``, 2 pre-norm blocks (4 attention heads of 32, a GELU MLP of 512) on 8
sequences of 128 tokens, mean-squared loss against a target.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Step:
    description: str
    build: Callable[[np.random.Generator], tuple]   # rng -> (jax function, numpy inputs)


def _sgd(loss):
    import jax

    def step(params, *data):
        value, grads = jax.value_and_grad(loss)(params, *data)
        return value, jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)
    return step


def mlp_step(rng, depth: int = 16, width: int = 128, batch: int = 2048):
    """A deep tanh MLP's training step and its inputs."""
    import jax.numpy as jnp

    def loss(params, x, y):
        h = x
        for w, b in params:
            h = jnp.tanh(h @ w + b)
        return jnp.mean((h - y) ** 2)
    params = [((rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32),
               (0.1 * rng.standard_normal(width)).astype(np.float32)) for _ in range(depth)]
    x = rng.standard_normal((batch, width)).astype(np.float32)
    y = rng.standard_normal((batch, width)).astype(np.float32)
    return _sgd(loss), (params, x, y)


def transformer_step(rng, layers: int = 2, batch: int = 8, seq: int = 128, dim: int = 128,
                     heads: int = 4, hidden: int = 512):
    """A small pre-norm transformer's training step and its inputs."""
    import jax
    import jax.numpy as jnp

    def norm(x):
        mean = x.mean(-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(((x - mean) ** 2).mean(-1, keepdims=True) + 1e-5)

    def block(p, x):
        b, s, d = x.shape
        h = norm(x)
        q, k, v = (jnp.reshape(h @ p[name], (b, s, heads, d // heads)) for name in "qkv")
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(d // heads)
        attention = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(scores, axis=-1), v)
        x = x + jnp.reshape(attention, (b, s, d)) @ p["o"]
        return x + jax.nn.gelu(norm(x) @ p["up"]) @ p["down"]

    def loss(params, x, y):
        for p in params:
            x = block(p, x)
        return jnp.mean((x - y) ** 2)

    def weight(*shape):
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)
    params = [{"q": weight(dim, dim), "k": weight(dim, dim), "v": weight(dim, dim),
               "o": weight(dim, dim), "up": weight(dim, hidden), "down": weight(hidden, dim)}
              for _ in range(layers)]
    x = rng.standard_normal((batch, seq, dim)).astype(np.float32)
    y = rng.standard_normal((batch, seq, dim)).astype(np.float32)
    return _sgd(loss), (params, x, y)


STEPS = {
    "mlp": Step("16 tanh layers, width 128, batch 2048", mlp_step),
    "transformer": Step("2 transformer blocks, 8 x 128 tokens of 128", transformer_step),
}


def lowered(build, seed: int = 0) -> tuple[str, list]:
    """``(StableHLO text, flat numpy arguments)`` of the step ``build`` makes."""
    import jax
    fn, args = build(np.random.default_rng(seed))
    text = jax.jit(fn).lower(*args).as_text()
    return text, [np.asarray(a) for a in jax.tree_util.tree_leaves(args)]


def compile_step(client, text: str, memory_limit: int = 0, wait: bool = True,
                 fused_attention: bool = True):
    """The step compiled, with a memory limit when one is given; ``wait``: with its
    generated kernels in place (both tiers give the same bits)."""
    from pjrt.api import CompileOptions
    overrides = {"memory_limit": memory_limit} if memory_limit else {}
    if not fused_attention:
        overrides["fused_attention"] = False
    exe = client.compile(text, CompileOptions(env_option_overrides=overrides))
    if wait:
        exe.wait_optimized()
    return exe


def run_peak_bytes(exe, args: list) -> tuple[int, list]:
    """``(bytes, results)`` of one run of ``exe`` on the numpy ``args``: the arguments' bytes
    plus how far the run raised the cpu runtime's high-water mark of live arrays over what
    was live before it (numpy arguments are borrowed, not copied: had they been copied, they
    would count twice, never too little). Background compiles are waited for first: their
    lowering allocates too."""
    from pjrt.plugins.cpu import tiering
    from pjrt.plugins.cpu.native_module import native
    tiering.wait_all()
    runtime = native()
    before = runtime.live_storage_bytes()
    runtime.reset_peak_storage_bytes()
    results = exe(*args)
    grown = runtime.peak_storage_bytes() - before
    return sum(np.asarray(a).nbytes for a in args) + grown, results


def measure(name: str, fraction: float, budget: float) -> dict:
    import pjrt
    from tools.bench.timing import interleaved_medians
    text, args = lowered(STEPS[name].build)
    client = pjrt.make_client("cpu")
    plain = compile_step(client, text)
    peak = plain.memory_stats()["peak_bytes"]
    limit = int(fraction * peak)
    limited = compile_step(client, text, limit)
    stats = limited.memory_stats()
    run_peak, plain_results = run_peak_bytes(plain, args)
    limited_run_peak, limited_results = run_peak_bytes(limited, args)
    identical = all(np.array_equal(a, b, equal_nan=True)
                    for a, b in zip(plain_results, limited_results))
    times = interleaved_medians({"as is": lambda: plain(*args),
                                 "limited": lambda: limited(*args)}, budget)
    return {"step": name, "description": STEPS[name].description, "peak_bytes": peak,
            "run_peak_bytes": run_peak, "limit_bytes": limit,
            "limited_peak_bytes": stats["peak_bytes"], "limited_run_peak_bytes": limited_run_peak,
            "limited_peak_without_remat_bytes": stats["peak_bytes_without_remat"],
            "recomputed_ops": stats["recomputed_ops"], "identical": identical,
            "under_limit": max(stats["peak_bytes"], limited_run_peak) <= limit,
            "seconds": times["as is"]["median_s"],
            "limited_seconds": times["limited"]["median_s"],
            "time_ratio": times["limited"]["median_s"] / times["as is"]["median_s"]}


def _mib(n: int) -> str:
    return f"{n / 2**20:7.2f} MiB"


def report(rows: list) -> str:
    lines = [f"{'step':<12} {'peak':>11} {'(ran)':>11} {'limit':>11} {'limited':>11} "
             f"{'(ran)':>11} {'pre-remat':>11} {'recomputed':>10} {'time ratio':>10}  identical"]
    for r in rows:
        lines.append(f"{r['step']:<12} {_mib(r['peak_bytes'])} {_mib(r['run_peak_bytes'])} "
                     f"{_mib(r['limit_bytes'])} {_mib(r['limited_peak_bytes'])} "
                     f"{_mib(r['limited_run_peak_bytes'])} "
                     f"{_mib(r['limited_peak_without_remat_bytes'])} "
                     f"{r['recomputed_ops']:>10} {r['time_ratio']:>10.2f}  {r['identical']}")
    lines.append(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_remat", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", default=",".join(STEPS),
                        help=f"comma-separated steps (known: {', '.join(STEPS)})")
    parser.add_argument("--fraction", type=float, default=0.5,
                        help="the memory limit as a fraction of the step's peak (default 0.5)")
    parser.add_argument("--budget", type=float, default=1.0,
                        help="seconds of timing per contender and step (default 1)")
    parser.add_argument("--json", metavar="OUT", help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    names = [n for n in args.steps.split(",") if n]
    unknown = [n for n in names if n not in STEPS]
    if unknown:
        parser.error(f"unknown steps {', '.join(unknown)}; known: {', '.join(STEPS)}")
    if not 0 < args.fraction <= 1:
        parser.error(f"--fraction must be in (0, 1], got {args.fraction}")
    rows = [measure(n, args.fraction, args.budget) for n in names]
    print(report(rows))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
