"""``openhlo bench-runtime``: the cpu backend's runtime, side by side with JAX and numpy.

Measures, in one process:

* ``dispatch``: x + 1 on 16 float32, numpy in and numpy out: our ``executable(x)`` against
  ``np.asarray(jax.jit(f)(x))`` and numpy's own ``x + 1``;
* ``matmul``: float32 1024x1024 @ 1024x1024: GFLOP/s of ours, of numpy (its OpenBLAS), of
  JAX; the ratio to numpy is the figure of merit;
* ``fori_loop``: ``lax.fori_loop`` of 1000 small elementwise iterations (the JAX function
  lowered to StableHLO and compiled by us: a generated kernel) against ``jax.jit`` of the
  same function; ``fori_loop_matvec``: 1000 iterations of tanh(W @ v + 0.1), W 64x64, which
  the executor runs step by step (BLAS for the dot);
* ``memory``: resident set size before and after 10,000 executions.

The programs for us are the JAX functions' own StableHLO (``jax.jit(f).lower(...)``), so
both sides run the same computation. Medians after warm-up. A measurement tool, not a
test: nothing fails on slowness (``--json`` writes the figures).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from tools.bench.timing import median_seconds


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "bench-runtime", help="measure dispatch, matmul, loop and memory of a backend vs JAX",
        description="Runtime microbenchmarks of an OpenHLO backend against jax.jit and numpy.")
    p.add_argument("--backend", default="cpu", help="backend to measure (default: cpu)")
    p.add_argument("--json", metavar="OUT", help="also write the figures as JSON")
    p.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run)")
    p.set_defaults(handler=bench_command)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def bench_dispatch(client, jax, np, repeats: int) -> dict:
    f = jax.jit(lambda x: x + 1)
    x = np.arange(16, dtype=np.float32)
    exe = client.compile(f.lower(x).as_text())
    assert np.array_equal(exe(x)[0], x + 1)
    for _ in range(200):
        exe(x), np.asarray(f(x))
    ours = median_seconds(lambda: exe(x), repeats, 100)
    theirs = median_seconds(lambda: np.asarray(f(x)), repeats, 100)
    numpy = median_seconds(lambda: x + 1, repeats, 100)
    return {"ours_us": ours * 1e6, "jax_us": theirs * 1e6, "numpy_us": numpy * 1e6,
            "target_us": 15.0}


def bench_matmul(client, jax, np, repeats: int) -> dict:
    n = 1024
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    f = jax.jit(lambda a, b: a @ b)
    exe = client.compile(f.lower(a, b).as_text())
    np.testing.assert_allclose(exe(a, b)[0], a @ b, rtol=1e-3, atol=1e-3)
    flops = 2.0 * n ** 3
    for _ in range(5):  # warm-up for all three: first-touch pages, BLAS buffers, threads
        exe(a, b), a @ b, np.asarray(f(a, b))
    ours = median_seconds(lambda: exe(a, b), repeats)
    numpy = median_seconds(lambda: a @ b, repeats)
    theirs = median_seconds(lambda: np.asarray(f(a, b)), repeats)
    return {"ours_gflops": flops / ours / 1e9, "numpy_gflops": flops / numpy / 1e9,
            "jax_gflops": flops / theirs / 1e9, "ratio_to_numpy": numpy / ours,
            "target_ratio": 0.85}


def bench_fori_loop(client, jax, np, repeats: int) -> dict:
    from jax import lax

    def loop(x):
        return lax.fori_loop(0, 1000, lambda i, v: v * 0.999 + 0.001, x)
    f = jax.jit(loop)
    x = np.ones(8, dtype=np.float32)
    exe = client.compile(f.lower(x).as_text())
    np.testing.assert_allclose(exe(x)[0], np.asarray(f(x)), rtol=1e-5)
    ours = median_seconds(lambda: exe(x), repeats)
    theirs = median_seconds(lambda: np.asarray(f(x)), repeats)
    return {"ours_ms": ours * 1e3, "jax_ms": theirs * 1e3, "ratio_to_jax": ours / theirs,
            "target_ratio": 2.0}


def bench_fori_loop_matvec(client, jax, np, repeats: int) -> dict:
    """A loop the generator does not take (a dot in the body): the executor runs it."""
    from jax import lax
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((64, 64)) / 8).astype(np.float32)

    def loop(v, w):
        return lax.fori_loop(0, 1000, lambda i, v: jax.numpy.tanh(w @ v + 0.1), v)
    f = jax.jit(loop)
    x = np.ones(64, dtype=np.float32)
    exe = client.compile(f.lower(x, w).as_text())
    np.testing.assert_allclose(exe(x, w)[0], np.asarray(f(x, w)), rtol=1e-4, atol=1e-5)
    ours = median_seconds(lambda: exe(x, w), repeats)
    theirs = median_seconds(lambda: np.asarray(f(x, w)), repeats)
    return {"ours_ms": ours * 1e3, "jax_ms": theirs * 1e3, "ratio_to_jax": ours / theirs}


def bench_memory(client, jax, np, executions: int) -> dict:
    f = jax.jit(lambda x: (x * 2.0 + 1.0).sum())
    x = np.ones((256,), dtype=np.float32)
    exe = client.compile(f.lower(x).as_text())
    for _ in range(1000):
        exe(x)
    before = _rss_bytes()
    for _ in range(executions):
        exe(x)
    middle = _rss_bytes()
    for _ in range(executions):
        exe.execute([x])[0].to_numpy()
    after = _rss_bytes()
    return {"executions": executions, "rss_before_mb": before / 2**20,
            "rss_after_sync_mb": middle / 2**20, "rss_after_async_mb": after / 2**20,
            "growth_kb": (after - before) / 1024}


def run_benchmarks(backend: str = "cpu", quick: bool = False, out=sys.stdout) -> dict:
    import jax
    import numpy as np
    jax.config.update("jax_platforms", "cpu")
    from pjrt import make_client
    client = make_client(backend)
    repeats = 5 if quick else 21
    results = {"backend": backend, "jax": jax.__version__}
    steps = [("dispatch", lambda: bench_dispatch(client, jax, np, repeats)),
             ("matmul", lambda: bench_matmul(client, jax, np, repeats)),
             ("fori_loop", lambda: bench_fori_loop(client, jax, np, repeats)),
             ("fori_loop_matvec", lambda: bench_fori_loop_matvec(client, jax, np, repeats)),
             ("memory", lambda: bench_memory(client, jax, np, 1000 if quick else 10000))]
    for name, step in steps:
        print(f"[{name}] ...", file=out, flush=True)
        results[name] = step()
        print("  " + ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                               for k, v in results[name].items()), file=out, flush=True)
    return results


def bench_command(args: argparse.Namespace) -> int:
    results = run_benchmarks(args.backend, args.quick)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0
