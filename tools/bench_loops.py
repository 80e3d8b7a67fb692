"""Loops as users write them in JAX: openhlo's cpu backend next to XLA:CPU, in one run.

    python -m tools.bench_loops [--loops tanh_loop,euler] [--budget 1.0] [--json OUT]

Each loop is lowered once (``jax.jit(f).lower(...)``), compiled by ``pjrt.make_client("cpu")``
(waiting for its generated kernels) and by XLA (``jax.jit``; compiles come from the usual
caches and are not timed here), checked against XLA's result, then both are timed in
alternating rounds (tools/bench/timing.py: a burst of load from elsewhere slows both). The
report gives each loop's median times, the ratio openhlo / XLA, whether openhlo ran the loop
as one generated kernel (``compiled whole``) and the machine's load average over the run,
since the figures mean little on a loaded machine.

The loops (issue 19): an elementwise ``fori_loop`` (500 steps of ``x*0.99 + 0.01*tanh(x)``
on 256 floats), a ``lax.scan`` over 12 layers of an MLP (stacked weights, each step a
dynamic slice, a dot and an epilogue), the same scan stacking a per-layer output (a
dynamic_update_slice), a 1,000-step Euler integrator of damped nonlinear oscillators, and a
sampling loop (100 steps of logits, a softmax and a mix with the step's noise, which a
dynamic slice picks).
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Loop:
    description: str
    build: Callable[[np.random.Generator], tuple]   # rng -> (jax function, numpy inputs)


def _tanh_loop(rng):
    from jax import lax
    import jax.numpy as jnp

    def f(x):
        return lax.fori_loop(0, 500, lambda i, x: x * 0.99 + 0.01 * jnp.tanh(x), x)
    return f, (rng.standard_normal(256).astype(np.float32),)


def _mlp_scan(rng):
    from jax import lax
    import jax.numpy as jnp

    def f(h, ws, bs):
        def layer(h, wb):
            w, b = wb
            return jnp.tanh(h @ w + b), None
        return lax.scan(layer, h, (ws, bs))[0]
    return f, (rng.standard_normal((8, 64)).astype(np.float32),
               (0.15 * rng.standard_normal((12, 64, 64))).astype(np.float32),
               (0.1 * rng.standard_normal((12, 64))).astype(np.float32))


def _scan_outputs(rng):
    from jax import lax
    import jax.numpy as jnp

    def f(h, ws):
        def layer(h, w):
            h = jnp.tanh(h @ w)
            return h, jnp.sum(h * h, axis=-1)
        return lax.scan(layer, h, ws)
    return f, (rng.standard_normal((8, 64)).astype(np.float32),
               (0.15 * rng.standard_normal((12, 64, 64))).astype(np.float32))


def _euler(rng):
    from jax import lax
    import jax.numpy as jnp

    def f(x, v):
        dt = 1e-3

        def step(i, s):
            x, v = s
            a = -4.0 * x - 0.1 * v + 0.5 * jnp.sin(x)
            return x + dt * v, v + dt * a
        return lax.fori_loop(0, 1000, step, (x, v))
    return f, (rng.standard_normal(1024).astype(np.float32),
               rng.standard_normal(1024).astype(np.float32))


def _sampling(rng):
    import jax
    from jax import lax
    import jax.numpy as jnp

    def f(h, w, e, noise):
        def step(t, h):
            p = jax.nn.softmax(h @ w, axis=-1)
            return jnp.tanh(p @ e + lax.dynamic_index_in_dim(noise, t, keepdims=False))
        return lax.fori_loop(0, noise.shape[0], step, h)
    return f, (rng.standard_normal((4, 64)).astype(np.float32),
               (0.3 * rng.standard_normal((64, 128))).astype(np.float32),
               (0.3 * rng.standard_normal((128, 64))).astype(np.float32),
               (0.1 * rng.standard_normal((100, 4, 64))).astype(np.float32))


LOOPS = {
    "tanh_loop": Loop("fori_loop of 500 elementwise steps on 256 floats", _tanh_loop),
    "mlp_scan": Loop("scan over 12 MLP layers, [8,64] x [64,64] each", _mlp_scan),
    "scan_outputs": Loop("the same scan, stacking each layer's row norms", _scan_outputs),
    "euler": Loop("1,000-step Euler integrator of 1024 oscillators", _euler),
    "sampling": Loop("100 sampling steps: logits, softmax, noise slice", _sampling),
}


def measure(name: str, client, budget: float) -> dict:
    """One loop: openhlo and XLA's results compared, both timed in the same rounds."""
    import jax

    from tools.bench.timing import interleaved_medians
    fn, inputs = LOOPS[name].build(np.random.default_rng(0))
    jitted = jax.jit(fn)
    exe = client.compile(jitted.lower(*inputs).as_text())
    exe.wait_optimized()
    ours = exe(*inputs)
    theirs = [np.asarray(o) for o in jax.tree_util.tree_leaves(jitted(*inputs))]
    error = max(float(np.max(np.abs(a - b))) for a, b in zip(ours, theirs))
    times = interleaved_medians(
        {"openhlo": lambda: exe(*inputs),
         "xla": lambda: [np.asarray(o) for o in jax.tree_util.tree_leaves(jitted(*inputs))]},
        budget)
    return {"loop": name, "description": LOOPS[name].description,
            "compiled_whole": bool(exe.program.compiled),
            "max_abs_diff": error,
            "openhlo_ms": times["openhlo"]["median_s"] * 1e3,
            "xla_ms": times["xla"]["median_s"] * 1e3,
            "ratio": times["openhlo"]["median_s"] / times["xla"]["median_s"]}


def report(rows: list[dict], load: tuple) -> str:
    lines = [f"{'loop':<12} {'openhlo ms':>10} {'xla ms':>8} {'ratio':>6}  compiled whole  "
             "max |diff|"]
    for r in rows:
        lines.append(f"{r['loop']:<12} {r['openhlo_ms']:>10.4f} {r['xla_ms']:>8.4f} "
                     f"{r['ratio']:>6.2f}  {'yes' if r['compiled_whole'] else 'no':<14}  "
                     f"{r['max_abs_diff']:.2e}")
    lines.append(f"load average before / after: {load[0]:.2f} / {load[1]:.2f} "
                 f"on {os.cpu_count()} cores")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", default=",".join(LOOPS),
                        help=f"comma-separated, of {', '.join(LOOPS)}")
    parser.add_argument("--budget", type=float, default=1.0,
                        help="seconds of timing per loop and contender")
    parser.add_argument("--json", help="write the rows and the load here")
    args = parser.parse_args(argv)
    names = [n for n in args.loops.split(",") if n]
    unknown = sorted(set(names) - set(LOOPS))
    if unknown:
        parser.error(f"unknown loops {unknown}; known: {sorted(LOOPS)}")
    import jax

    import pjrt
    jax.config.update("jax_platforms", "cpu")  # XLA:CPU; openhlo runs through pjrt directly
    client = pjrt.make_client("cpu")
    from tools.bench.timing import rows_under_load, write_rows_json
    rows, load = rows_under_load(lambda name: measure(name, client, args.budget), names)
    print(report(rows, load))
    write_rows_json(args.json, rows, load)
    return 0


if __name__ == "__main__":
    sys.exit(main())
