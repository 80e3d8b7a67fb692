"""Dispatch overhead of a cached ``jax.jit`` call: OpenHLO's PJRT plugin next to JAX's CPU.

    python3 -m tools.bench_dispatch [--calls N] [--repeats R]

Each platform runs in its own child process (JAX picks one platform per process), the same
code in both: ``jax.jit(lambda x: x + 1)`` on 3 float32s, warmed up, then ``R`` timed
rounds of ``N`` back-to-back calls each ending in ``block_until_ready``; the figure is the
median per-call time over the rounds. The ratio is what issue 5 accepts (<= 2x).
"""
import argparse
import json
import os
import subprocess
import sys
import time

_CHILD = "--child"


def _measure(calls: int, repeats: int) -> dict:
    import jax
    import numpy as np
    f = jax.jit(lambda x: x + 1)
    x = jax.device_put(np.arange(3, dtype=np.float32))
    expected = np.arange(3, dtype=np.float32) + 1
    np.testing.assert_array_equal(np.asarray(f(x)), expected)
    for _ in range(calls):  # warm: compile cache, allocator, branch predictors
        f(x)
    rounds = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            y = f(x)
        y.block_until_ready()
        rounds.append((time.perf_counter() - start) / calls)
    rounds.sort()
    return {"platform": jax.devices()[0].platform, "median_us": rounds[len(rounds) // 2] * 1e6,
            "min_us": rounds[0] * 1e6}


def _run_child(platform: str, calls: int, repeats: int) -> dict:
    env = dict(os.environ, JAX_PLATFORMS=platform)
    out = subprocess.run([sys.executable, "-m", "tools.bench_dispatch", _CHILD,
                          "--calls", str(calls), "--repeats", str(repeats)],
                         env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument(_CHILD, action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_measure(args.calls, args.repeats)))
        return 0
    ours = _run_child("openhlo", args.calls, args.repeats)
    theirs = _run_child("cpu", args.calls, args.repeats)
    for r in (ours, theirs):
        print(f"{r['platform']:>8}: median {r['median_us']:7.2f} us/call  (min {r['min_us']:.2f})")
    print(f"   ratio: {ours['median_us'] / theirs['median_us']:.2f}x JAX's CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
