"""Sweep PyTorch's OpInfo database through OpenHLO (float32 samples) and report per op.

    python -m tools.torch_opinfo [--ops add,mul] [--max-samples N] [--json OUT]

Each sample is traced to core ATen (the graph torch.compile gives our backend), run by
OpenHLO and compared with eager (rtol 1e-4, atol 1e-5). An op *passes* when every sample
matches with no eager fallback. The pytest suite checks the ops we claim on a few samples
each; this is the full sweep.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", help="comma-separated OpInfo names (default: all)")
    parser.add_argument("--max-samples", type=int, default=None)
    parser.add_argument("--json", help="write per-op results here")
    args = parser.parse_args(argv)
    logging.getLogger("openhlo").setLevel(logging.ERROR)  # fallbacks are counted, not logged
    from torch.testing._internal.common_methods_invocations import op_db

    from frameworks.torch.testing import check_opinfo
    wanted = set(args.ops.split(",")) if args.ops else None
    report, start = {}, time.time()
    for opinfo in op_db:
        name = opinfo.name + (f".{opinfo.variant_test_name}" if opinfo.variant_test_name else "")
        if wanted and opinfo.name not in wanted and name not in wanted:
            continue
        report[name] = check_opinfo(opinfo, args.max_samples)
        r = report[name]
        status = "PASS" if r["pass"] and not (r["fail"] or r["fallback"] or r["error"]) else \
            ("skip" if not any(r[k] for k in ("pass", "fail", "fallback", "error")) else "----")
        print(f"{status} {name:40s} pass {r['pass']:3d} fail {r['fail']:3d} "
              f"fallback {r['fallback']:3d} error {r['error']:3d} "
              f"{next(iter(r['problems'].values()), '')[:150]}", flush=True)
    ran = {k: v for k, v in report.items() if any(v[c] for c in ("pass", "fail", "fallback",
                                                                "error"))}
    full = [k for k, v in ran.items() if v["pass"] and not (v["fail"] or v["fallback"]
                                                            or v["error"])]
    samples = {c: sum(v[c] for v in ran.values()) for c in ("pass", "fail", "fallback", "error")}
    print(f"\n{len(full)}/{len(ran)} OpInfo entries pass every float32 sample; samples: "
          f"{samples} ({time.time() - start:.0f} s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
