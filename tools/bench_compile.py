"""Compile latency of the cpu backend against XLA's compile, in one run.

    python -m tools.bench_compile [--workloads gpt_block_train,mlp_train,softmax_xent]
                                  [--quick] [--json OUT]

For each workload of the bench suite (tools/bench/workloads.py; ``--quick``: its small sizes)
the JAX function is lowered once (``jax.jit(f).lower(...)``) and compiled cold, every
persistent cache in a fresh folder (tools/bench/runners.py ``use_cache_root``), after each
side's one-time warm-up on an unrelated program:

* ``xla``: ``lowered.compile()``;
* ``openhlo``: ``pjrt.make_client("cpu").compile(text)`` until it returns (a program that runs
  at once, fusions op by op) and until its generated kernels are in place
  (``exe.wait_optimized()``, the figure set against XLA's), broken down from the compile's
  trace (stablehlo/instrument/trace.py): until compile returns, the cpu pipeline and its
  three costliest passes, code generation and the rest (parsing, checks, lowering); then, in
  the background, the C++ compiler (the library: every unit's compiler process, in
  parallel, and the link; each unit's own time) and the rest (the compile worker's queue,
  lowering again with the kernels).

Beside each wall time the CPU time it took (this process's threads, and the compiler
processes for openhlo): on a machine shared with other work the wall times stretch with the
load, CPU times much less. Warm start: a second process on the filled folder compiles every
workload again (``--warm``; each side warmed up as before) and reports until openhlo's kernels
are in place (the program cache and the kernel cache hit: nothing is generated or compiled)
and XLA's compile (its persistent cache). openhlo's results are checked against XLA's (the
bench suite's tolerance). The machine's load average is reported: figures mean little on a
loaded machine.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

import numpy as np

DEFAULT_WORKLOADS = ("gpt_block_train", "mlp_train", "softmax_xent")


def _cpu_s(children: bool) -> float:
    """CPU seconds so far of this process (all threads), and of its finished child processes
    when ``children``."""
    total = time.process_time()
    if children:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        total += usage.ru_utime + usage.ru_stime
    return total


def _breakdown(events: list[dict]) -> dict:
    """Milliseconds per part of one openhlo compile, from its trace events."""
    spans = defaultdict(float)
    passes = defaultdict(float)
    units = []
    for event in events:
        ms = event["dur"] / 1e3
        if event["cat"] == "pass":
            passes[event["name"]] += ms
        elif event["name"] == "kernel unit compile":
            units.append(round(ms, 1))
        else:
            spans[event["name"]] += ms
    costliest = sorted(passes.items(), key=lambda item: -item[1])[:3]
    return {"pipeline_ms": spans["pipeline cpu"], "codegen_ms": spans["codegen"],
            "costliest_passes_ms": {name: round(ms, 1) for name, ms in costliest},
            "kernel_compile_ms": spans["kernel compile"], "unit_compile_ms": units}


def _openhlo_compile(client, text: str) -> tuple[object, dict]:
    from pjrt.plugins.cpu.codegen import build
    from stablehlo.instrument import trace
    recorder = trace.start(os.devnull)
    compiles = len(build.COMPILE_TIMES)
    cpu = _cpu_s(children=True)
    start = time.perf_counter()
    try:
        exe = client.compile(text)
        returned = time.perf_counter() - start
        exe.wait_optimized()
        in_place = time.perf_counter() - start
        cpu = _cpu_s(children=True) - cpu
        events = recorder.events()
    finally:
        trace.stop()
    parts = _breakdown(events)
    # The rest of compile: parsing, checks, lowering the first tier. The rest of the
    # background: the worker's queue, lowering again with the kernels (clamped: the worker
    # may start the compiler just before compile returns).
    parts["compile_other_ms"] = max(
        0.0, returned * 1e3 - parts["pipeline_ms"] - parts["codegen_ms"])
    parts["background_other_ms"] = max(
        0.0, (in_place - returned) * 1e3 - parts["kernel_compile_ms"])
    return exe, {"returns_ms": returned * 1e3, "in_place_ms": in_place * 1e3,
                 "cpu_ms": cpu * 1e3, "libraries_compiled": len(build.COMPILE_TIMES) - compiles,
                 "deferred": bool(exe.program.deferred), **parts}


def _xla_compile(lowered) -> tuple[object, dict]:
    cpu = _cpu_s(children=False)
    start = time.perf_counter()
    compiled = lowered.compile()
    seconds = time.perf_counter() - start
    return compiled, {"ms": seconds * 1e3, "cpu_ms": (_cpu_s(children=False) - cpu) * 1e3}


def measure(names: list[str], quick: bool, check: bool) -> list[dict]:
    """Compile every workload on both sides (caches as the environment left them)."""
    import pjrt
    from tools.bench.runners import warm_up_program, lower
    from tools.bench.suite import check_outputs, workload_sizes
    from tools.bench.workloads import WORKLOADS
    client = pjrt.make_client("cpu")
    client.compile(warm_up_program().as_text()).wait_optimized()
    warm_up_program().compile()
    rows = []
    for name in names:
        workload = WORKLOADS[name]
        instance = workload.instance(0, workload_sizes(workload, quick))
        lowered = lower(instance)
        compiled, xla = _xla_compile(lowered)
        exe, ours = _openhlo_compile(client, lowered.as_text())
        row = {"workload": name, "xla": xla, "openhlo": ours}
        if check:
            reference = [np.asarray(o) for o in compiled(*instance.inputs)]
            row["mismatch"] = check_outputs(exe(*instance.inputs), reference)
        rows.append(row)
    return rows


def _warm(root: str, names: list[str], quick: bool) -> list[dict]:
    """The warm-start rows: a second process on the cache folder ``root``."""
    command = [sys.executable, "-m", "tools.bench_compile", "--warm", "--cache-root", root,
               "--workloads", ",".join(names)] + (["--quick"] if quick else [])
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def report(cold: list[dict], warm: list[dict], load: tuple) -> str:
    lines = [f"{'workload':<16} {'xla ms':>8} {'(cpu)':>7} {'returns':>8} {'in place':>9} "
             f"{'(cpu)':>7} {'in/xla':>7} {'warm ms':>8} {'xla warm':>8}  check"]
    warm_by_name = {row["workload"]: row for row in warm}
    for row in cold:
        x, o = row["xla"], row["openhlo"]
        w = warm_by_name.get(row["workload"])
        lines.append(
            f"{row['workload']:<16} {x['ms']:>8.0f} {x['cpu_ms']:>7.0f} {o['returns_ms']:>8.0f} "
            f"{o['in_place_ms']:>9.0f} {o['cpu_ms']:>7.0f} {o['in_place_ms'] / x['ms']:>7.2f} "
            f"{w['openhlo']['in_place_ms'] if w else float('nan'):>8.1f} "
            f"{w['xla']['ms'] if w else float('nan'):>8.1f}  "
            f"{'ok' if row.get('mismatch') is None else row['mismatch']}")
    lines.append("openhlo's cold compile, ms (wall):")
    for row in cold:
        o = row["openhlo"]
        passes = ", ".join(f"{name} {ms:.0f}" for name, ms in o["costliest_passes_ms"].items())
        lines.append(
            f"  {row['workload']}: pipeline {o['pipeline_ms']:.0f} ({passes}), codegen "
            f"{o['codegen_ms']:.0f}, other {o['compile_other_ms']:.0f}; in the background: "
            f"C++ compiler {o['kernel_compile_ms']:.0f} "
            f"(units {o['unit_compile_ms']}), other background {o['background_other_ms']:.0f}")
    lines.append(f"load average before / after: {load[0]:.2f} / {load[1]:.2f} "
                 f"on {os.cpu_count()} cores")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(DEFAULT_WORKLOADS),
                        help="comma-separated names of tools/bench/workloads.py")
    parser.add_argument("--quick", action="store_true", help="the workloads' small sizes")
    parser.add_argument("--json", help="write the rows and the load here")
    parser.add_argument("--warm", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cache-root", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    from tools.bench.runners import use_cache_root
    from tools.bench.workloads import WORKLOADS
    names = [n for n in args.workloads.split(",") if n]
    unknown = sorted(set(names) - set(WORKLOADS))
    if unknown:
        parser.error(f"unknown workloads {unknown}; known: {sorted(WORKLOADS)}")
    if args.warm:  # the second process: one JSON line
        use_cache_root(args.cache_root, ["openhlo", "xla"])
        print(json.dumps(measure(names, args.quick, check=False)))
        return 0
    root = args.cache_root or tempfile.mkdtemp(prefix="openhlo-bench-compile-")
    use_cache_root(root, ["openhlo", "xla"])
    before = os.getloadavg()[0]
    cold = measure(names, args.quick, check=True)
    warm = _warm(root, names, args.quick)
    load = (before, os.getloadavg()[0])
    print(report(cold, warm, load))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cold": cold, "warm": warm, "load_average": load,
                       "cores": os.cpu_count(), "cache_root": root}, f, indent=1)
    return 0 if all(row.get("mismatch") is None for row in cold) else 1


if __name__ == "__main__":
    sys.exit(main())
