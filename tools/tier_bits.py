"""Compares the two tiers of the cpu backend bit for bit over many programs.

    python -m tools.tier_bits [--conformance DIR] [--limit N] [--filter TEXT]

For every JAX-like fused program (pjrt/plugins/cpu/tests/tier_bits.py: FUSED) and every
StableHLO testdata file under DIR (default: the shared suite's testdata folder), it
runs the program op by op (the first tier) and on its generated kernels, each program with a
cold kernel cache of its own, and prints the programs whose results differ (with the largest
distance in ULP) and the counts.
"""
from __future__ import annotations

import argparse
import glob
import os
import sys
import tempfile



def _programs(testdata: str, pattern: str, limit: int):
    from pjrt.plugins.cpu.tests import tier_bits
    for name, text in tier_bits.FUSED.items():
        if pattern in name:
            yield name, lambda text=text: (text, tier_bits.fused_inputs(text))
    files = sorted(glob.glob(os.path.join(testdata, "*.mlir")))
    files = [f for f in files if pattern in os.path.basename(f)][:limit or None]
    for path in files:
        def load(path=path):
            with open(path) as f:
                return tier_bits.conformance_case(f.read())
        yield os.path.basename(path), load


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    from xla_core.testing.conformance import conformance_dir
    parser.add_argument("--conformance", default=str(conformance_dir("testdata") or ""))
    parser.add_argument("--limit", type=int, default=0, help="testdata files at most (0: all)")
    parser.add_argument("--filter", default="", help="only programs whose name contains this")
    options = parser.parse_args(argv)
    import pjrt
    from pjrt.plugins.cpu.tests import tier_bits
    client = pjrt.make_client("cpu")
    counts = {"same": 0, "differ": 0, "no kernels": 0, "not run": 0}
    for name, load in _programs(options.conformance, options.filter, options.limit):
        with tempfile.TemporaryDirectory() as cache:
            os.environ["OPENHLO_CACHE_DIR"] = cache  # a cold kernel cache per program
            try:
                case = load()
                if case is None:
                    counts["not run"] += 1
                    continue
                first, optimized, _ = tier_bits.run_tiers(case[0], case[1], client)
            except tier_bits.NoFirstTier:
                counts["no kernels"] += 1
                continue
            except Exception as exc:  # noqa: BLE001 - a program we cannot run is counted
                counts["not run"] += 1
                print(f"not run  {name}: {type(exc).__name__}: {str(exc)[:120]}")
                continue
        differ = [i for i, (a, b) in enumerate(zip(first, optimized))
                  if not tier_bits.same_bits(a, b)]
        if differ:
            counts["differ"] += 1
            ulps = max(tier_bits.max_ulps(first[i], optimized[i]) for i in differ)
            print(f"DIFFER   {name}: results {differ}, up to {ulps} ulp")
        else:
            counts["same"] += 1
    print(", ".join(f"{v} {k}" for k, v in counts.items()))
    return 1 if counts["differ"] else 0


if __name__ == "__main__":
    sys.exit(main())
