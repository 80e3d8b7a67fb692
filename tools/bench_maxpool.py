"""Max pooling: openhlo's cpu backend next to eager PyTorch, in one run.

    python -m tools.bench_maxpool [--shapes 1x64x112x112,8x64x56x56] [--budget 1.0] [--json OUT]

``F.max_pool2d(x, 3, stride 2, padding 1)`` (ResNet's stem pooling; NCHW shapes) through
``torch.compile(backend="openhlo")`` against eager PyTorch, twice: with
``return_indices=True``, whose lowering is one ``stablehlo.reduce_window`` with a (value,
index) body (the native pair kernel, pjrt/plugins/cpu/native/kernels_pair_select.cc), and
without, as CNNs pool in inference, where the compiler drops the unused indices
(xla_core/passes/prune_argreduce_index.py) and the value-only kernel runs. Results are
checked bit for bit (values and indices) on random inputs and on inputs full of ties, then
timed in alternating rounds (tools/bench/timing.py). The report gives the median times, the
ratio openhlo / eager and the machine's load average over the run.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np


def _shape(text: str) -> tuple[int, ...]:
    return tuple(int(d) for d in text.split("x"))


def measure(shape: tuple[int, ...], budget: float) -> dict:
    import torch
    import torch.nn.functional as F

    from tools.bench.timing import interleaved_medians

    def pool(x):
        return F.max_pool2d(x, 3, stride=2, padding=1, return_indices=True)

    def pool_values(x):
        return F.max_pool2d(x, 3, stride=2, padding=1)

    row = {"shape": list(shape)}
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
    ties = torch.from_numpy(rng.integers(0, 3, shape).astype(np.float32))
    for kind, fn in (("indices", pool), ("values", pool_values)):
        compiled = torch.compile(fn, backend="openhlo")
        with torch.no_grad():
            for inp in (ties, x):  # the tie-breaking rule, then the timed input
                got, want = compiled(inp), fn(inp)
                same = all(torch.equal(g, w) for g, w in zip(got, want)) \
                    if kind == "indices" else torch.equal(got, want)
                if not same:
                    raise AssertionError(f"openhlo's max_pool2d ({kind}) differs from eager "
                                         f"on {shape}")
            times = interleaved_medians({"openhlo": lambda: compiled(x), "eager": lambda: fn(x)},
                                        budget)
        ours, eager = times["openhlo"]["median_s"], times["eager"]["median_s"]
        row[kind] = {"openhlo_ms": ours * 1e3, "eager_ms": eager * 1e3, "ratio": ours / eager}
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="1x64x112x112,8x64x56x56",
                        help="comma-separated NCHW shapes")
    parser.add_argument("--budget", type=float, default=1.0,
                        help="seconds of timing per shape and contender")
    parser.add_argument("--json", help="write the rows and the load here")
    args = parser.parse_args(argv)
    import frameworks.torch  # noqa: F401  (registers the "openhlo" backend)
    from tools.bench.timing import rows_under_load, write_rows_json
    rows, load = rows_under_load(lambda s: measure(_shape(s), args.budget),
                                 [s for s in args.shapes.split(",") if s])
    print(f"{'shape':<16} {'with indices: openhlo ms':>24} {'eager ms':>9} {'ratio':>6}"
          f" {'values only: openhlo ms':>24} {'eager ms':>9} {'ratio':>6}")
    for r in rows:
        cells = "".join(f" {r[k]['openhlo_ms']:>24.3f} {r[k]['eager_ms']:>9.3f} "
                        f"{r[k]['ratio']:>6.2f}" for k in ("indices", "values"))
        print(f"{'x'.join(map(str, r['shape'])):<16}{cells}")
    print(f"load average before / after: {load[0]:.2f} / {load[1]:.2f} on {os.cpu_count()} cores")
    write_rows_json(args.json, rows, load)
    return 0


if __name__ == "__main__":
    sys.exit(main())
