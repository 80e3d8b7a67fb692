"""The cached-compile pass of ``openhlo bench``, run as its own process.

    python -m tools.bench.cached --cache-root DIR --workloads a,b --runners openhlo,xla

Compiles every workload on every runner with the compilation caches in ``DIR`` (filled by
the main run) and prints ``{workload: {runner: seconds}}`` as one JSON line on stdout. A
fresh process, so only the persistent caches help, not the main run's in-memory ones.
"""
from __future__ import annotations

import argparse
import json
import sys

from tools.bench.runners import RUNNER_CLASSES, lower, use_cache_root
from tools.bench.suite import workload_sizes
from tools.bench.workloads import WORKLOADS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.cached")
    parser.add_argument("--cache-root", required=True)
    parser.add_argument("--workloads", required=True)
    parser.add_argument("--runners", required=True)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    names = args.runners.split(",")
    use_cache_root(args.cache_root, names)
    runners = {name: RUNNER_CLASSES[name]() for name in names}
    for runner in runners.values():
        runner.setup()
    times: dict[str, dict] = {}
    for name in args.workloads.split(","):
        workload = WORKLOADS[name]
        instance = workload.instance(0, workload_sizes(workload, args.quick))
        lowered = lower(instance)
        for runner_name, runner in runners.items():
            try:
                seconds = runner.prepare(instance, lowered).compile_s
            except Exception as exc:  # noqa: BLE001 - the main run reported it; leave a gap
                print(f"{runner_name} on {name}: {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
            times.setdefault(name, {})[runner_name] = seconds
    print(json.dumps(times))
    return 0


if __name__ == "__main__":
    sys.exit(main())
