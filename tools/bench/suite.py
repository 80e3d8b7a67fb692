"""Running the benchmark: every workload on every runner, checked, timed, compiled twice.

``run_suite`` does, in this process, with all compilation caches in a fresh folder:
set up each runner (its one-time costs: imports, toolchain warm-up), then per workload
lower the JAX function once (its StableHLO feeds openhlo, xla and the flop/byte count),
compile on every runner (the cold compile time), check every runner's outputs against
``jax.jit``'s, and time the runners that agree, interleaved. A second process
(``tools.bench.cached``) then compiles everything again on the now-filled caches: the
cached compile time, free of this process's in-memory caches.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tools.bench.runners import RUNNER_CLASSES, lower, use_cache_root
from tools.bench.timing import interleaved_medians
from tools.bench.workloads import WORKLOADS, Workload

RTOL = 1e-3
ATOL_SCALE = 1e-4   # absolute tolerance = this x the largest |reference| of the output
REPO_ROOT = Path(__file__).resolve().parents[2]


def workload_sizes(workload: Workload, quick: bool) -> dict:
    return workload.quick_sizes if quick and workload.quick_sizes else workload.sizes


def check_outputs(outputs, reference) -> str | None:
    """None if ``outputs`` match ``reference`` (rtol 1e-3, atol 1e-4 x max|ref|), else why."""
    outputs = [np.asarray(o) for o in outputs]
    if len(outputs) != len(reference):
        return f"{len(outputs)} outputs, expected {len(reference)}"
    for i, (got, want) in enumerate(zip(outputs, reference)):
        if got.shape != want.shape:
            return f"output {i}: shape {got.shape}, expected {want.shape}"
        if got.dtype != want.dtype and not (got.dtype.kind == want.dtype.kind == "f"):
            return f"output {i}: dtype {got.dtype}, expected {want.dtype}"
        if want.size == 0:
            continue
        if want.dtype.kind == "f":
            atol = ATOL_SCALE * float(np.max(np.abs(want), initial=0.0, where=np.isfinite(want)))
            close = np.isclose(got, want, rtol=RTOL, atol=atol, equal_nan=True)
        else:
            close = got == want
        if not close.all():
            where = np.unravel_index(int(np.argmin(close)), want.shape)
            return (f"output {i}: {int(close.size - close.sum())} of {close.size} elements "
                    f"differ; at index {tuple(int(k) for k in where)}: got {got[where]!r}, "
                    f"expected {want[where]!r}")
    return None


def _module_cost(lowered) -> dict:
    import stablehlo
    from xla_core.cost import module_cost
    cost = module_cost(stablehlo.parse(lowered.as_text()))
    return {"flops": cost.flops, "bytes": cost.bytes_accessed}


def bench_workload(workload: Workload, runners: dict, *, quick: bool, budget: float,
                   log: Callable[[str], None]) -> dict:
    """One workload on every runner: compile (cold), check, time. A JSON-ready record."""
    import jax
    sizes = workload_sizes(workload, quick)
    instance = workload.instance(0, sizes)
    lowered = lower(instance)
    record = {"name": workload.name, "description": workload.description, "sizes": sizes,
              **_module_cost(lowered), "results": {}}
    prepared = {}
    for name, runner in runners.items():
        result = record["results"][name] = {"status": "ok"}
        try:
            prepared[name] = runner.prepare(instance, lowered)
            result["compile_cold_s"] = prepared[name].compile_s
            if prepared[name].optimized_s is not None:
                result["optimized_cold_s"] = prepared[name].optimized_s
        except Exception as exc:  # noqa: BLE001 - a runner that cannot run a workload is a result
            result.update(status="error", message=f"{type(exc).__name__}: {exc}")
            log(f"  ERROR {name} on {workload.name}: {result['message']}")
    # after the runners' compiles, so that the xla one is cold (jax caches in memory)
    reference = [np.asarray(o) for o in jax.jit(instance.jax_fn)(*instance.inputs)]
    calls = {}
    for name, ready in prepared.items():
        result = record["results"][name]
        try:
            problem = check_outputs(ready.call(), reference)
            result["peak_bytes"] = ready.peak_bytes()
        except Exception as exc:  # noqa: BLE001 - as above
            result.update(status="error", message=f"{type(exc).__name__}: {exc}")
            log(f"  ERROR {name} on {workload.name}: {result['message']}")
            continue
        if problem is not None:
            result.update(status="mismatch", message=problem)
            log(f"  MISMATCH {name} on {workload.name} (against jax.jit): {problem}")
            continue
        calls[name] = ready.call
    timings = interleaved_medians(calls, budget, min_samples=3 if quick else 5)
    for name, timing in timings.items():
        record["results"][name].update(timing)
    log("  " + ", ".join(f"{name} {t['median_s'] * 1e3:.3g} ms" for name, t in timings.items()))
    return record


def cached_compile_times(cache_root: str, workloads: list[str], runners: list[str],
                         quick: bool, log: Callable[[str], None]) -> dict:
    """{workload: {runner: seconds}} from a second process on the filled caches."""
    command = [sys.executable, "-m", "tools.bench.cached", "--cache-root", cache_root,
               "--workloads", ",".join(workloads), "--runners", ",".join(runners)]
    if quick:
        command.append("--quick")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO_ROOT,
                          timeout=900, check=False)
    if proc.returncode != 0:
        log(f"  ERROR: the cached-compile process failed (exit {proc.returncode}):\n"
            + proc.stderr[-2000:])
        return {}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_suite(workloads: list[str], runners: list[str], *, quick: bool = False,
              budget: float | None = None, cached: bool = True,
              log: Callable[[str], None] = lambda line: print(line, file=sys.stderr,
                                                              flush=True)) -> dict:
    """Everything ``openhlo bench`` measures, as one JSON-ready dict (see tools/README.md)."""
    from xla_core.cost import hardware
    started = time.perf_counter()
    load_before = os.getloadavg()[0]  # the machine is shared: say how busy it was
    machine = hardware("cpu")  # measured (or read) before the caches move to a fresh folder
    budget = budget if budget is not None else (0.2 if quick else 2.0)
    cache_root = tempfile.mkdtemp(prefix="openhlo-bench-")
    try:
        use_cache_root(cache_root, runners)
        active = {}
        for name in runners:
            step = time.perf_counter()
            active[name] = RUNNER_CLASSES[name]()
            active[name].setup()
            log(f"[setup] {name} ({time.perf_counter() - step:.1f} s)")
        records = []
        for i, name in enumerate(workloads, 1):
            log(f"[{i}/{len(workloads)}] {name}")
            step = time.perf_counter()
            records.append(bench_workload(WORKLOADS[name], active, quick=quick, budget=budget,
                                          log=log))
            log(f"  ({time.perf_counter() - step:.1f} s)")
        compiling = [r for r in runners if RUNNER_CLASSES[r].compiles]
        if cached and compiling:
            log("[cached compile] a second process on the filled caches")
            step = time.perf_counter()
            times = cached_compile_times(cache_root, workloads, compiling, quick, log)
            log(f"  ({time.perf_counter() - step:.1f} s)")
            for record in records:
                for runner, seconds in times.get(record["name"], {}).items():
                    record["results"][runner]["compile_cached_s"] = seconds
    finally:
        shutil.rmtree(cache_root, ignore_errors=True)
    import jax
    versions = {"python": sys.version.split()[0], "jax": jax.__version__}
    if any(name in ("torch_eager", "inductor") for name in runners):  # torch only if used
        import torch
        versions["torch"] = torch.__version__
    return {"machine": {"name": machine.name, "peak_flops": machine.peak_flops,
                        "memory_bandwidth": machine.memory_bandwidth, "cores": machine.cores},
            "versions": versions,
            "load_average": {"start": load_before, "end": os.getloadavg()[0]},
            "quick": quick, "budget_s": budget, "runners": runners, "workloads": records,
            "wall_s": time.perf_counter() - started}
