"""Timing loops shared by ``openhlo bench`` and ``openhlo bench-runtime``.

Runtimes in one process disturb each other: XLA's, OpenBLAS's and PyTorch's worker
threads spin for a while after their last task, so a short pause before each timed batch
lets them sleep. The machine is shared, so ``interleaved_medians`` alternates the
contenders in rounds: a burst of load from elsewhere slows all of them, not one.
"""
from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable

# a pause that lets other runtimes' spinning worker threads go to sleep
SETTLE_SECONDS = 0.05


def median_seconds(fn: Callable[[], object], repeats: int, inner: int = 1,
                   settle: float = 0.2) -> float:
    """Median over ``repeats`` samples of ``inner`` calls each, after one warm-up call."""
    time.sleep(settle)
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - start) / inner)
    return statistics.median(samples)


def _one_call(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def plan_samples(seconds_per_call: float, budget: float, *, min_samples: int = 5,
                 max_samples: int = 200, min_sample_seconds: float = 1e-3) -> tuple[int, int]:
    """(samples, calls per sample) for a contender taking ``seconds_per_call``.

    Fast calls are batched so a sample lasts at least ``min_sample_seconds`` (the timer's
    own cost stays negligible); the sample count fills ``budget`` within
    [min_samples, max_samples], so a slow workload still gets ``min_samples``.
    """
    per_call = max(seconds_per_call, 1e-9)
    inner = max(1, math.ceil(min_sample_seconds / per_call * (1 - 1e-9)))  # 1e-3/1e-6: 1000
    samples = int(budget / (per_call * inner))
    return max(min_samples, min(max_samples, samples)), inner


def interleaved_medians(fns: dict[str, Callable[[], object]], budget: float, *,
                        rounds: int = 5, min_samples: int = 5) -> dict[str, dict]:
    """Median seconds per call of each function, measured in alternating rounds.

    ``budget`` is the time to spend on each function (bounded below by ``min_samples``
    samples). Returns ``{name: {"median_s", "min_s", "max_s", "samples", "inner"}}`` (the
    spread says how noisy the machine was).
    """
    plans = {}
    for name, fn in fns.items():
        time.sleep(SETTLE_SECONDS)
        estimate = min(_one_call(fn) for _ in range(2))  # the first is also the warm-up
        plans[name] = plan_samples(estimate, budget, min_samples=min_samples)
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for r in range(rounds):
        for name, fn in fns.items():
            total, inner = plans[name]
            # spread ``total`` samples over the rounds; every round takes at least one
            count = max(1, total * (r + 1) // rounds - total * r // rounds)
            time.sleep(SETTLE_SECONDS)
            for _ in range(count):
                start = time.perf_counter()
                for _ in range(inner):
                    fn()
                samples[name].append((time.perf_counter() - start) / inner)
    return {name: {"median_s": statistics.median(values), "min_s": min(values),
                   "max_s": max(values), "samples": len(values), "inner": plans[name][1]}
            for name, values in samples.items()}


def rows_under_load(measure: Callable[[object], dict], items) -> tuple[list, tuple]:
    """``measure(item)`` for each item, and the 1-minute load average before and after:
    the figures mean little on a loaded machine, so every bench script reports it."""
    import os
    before = os.getloadavg()[0]
    rows = [measure(item) for item in items]
    return rows, (before, os.getloadavg()[0])


def write_rows_json(path: str | None, rows: list, load: tuple) -> None:
    """The bench scripts' ``--json``: rows, load average and core count (nothing if no path)."""
    if not path:
        return
    import json
    import os
    with open(path, "w") as f:
        json.dump({"rows": rows, "load_average": load, "cores": os.cpu_count()}, f, indent=1)
