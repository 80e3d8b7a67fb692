"""Measured against estimated: a traced run of the 8-device FSDP step next to the
latency-hiding scheduler's estimates of its collectives and of the whole step.

``python -m tools.check_estimates [--repeat N] [--hardware NAME] [--trace OUT.json]
[--lowered DIR]`` lowers the step of ``tools.fsdp_step_jax`` (as ``tools.bench_lhs`` does;
``--lowered``: takes it from DIR, where no JAX is installed), compiles it for 8
partitions on the cpu backend, records ``N`` runs after a warm-up (the Chrome trace of
``openhlo run --trace``; ``--trace`` keeps it) and prints, for every collective of the
per-device program, its estimated time (``CostModelEstimator.collective_seconds`` on the
hardware description shared by the executable's devices, ``HardwareDescription.shared_by``)
and its measured median (its communication-thread events, or a synchronous collective's
own; xla_core.cost.profile.match_profile), their ratio, the part of it spent waiting at the
rendezvous for the last device of its group to arrive (``wait``: median over devices and
runs; the cost model does not describe it), and the same for the step: the simulated
makespan of the program's order (xla_core.scheduling timeline), or where the devices
oversubscribe the cores the device's busy time if longer (``Clock.busy``), against the
measured span of one run on a device (median over devices and runs).
The issue's acceptance is agreement within a factor of 2; the verdict is printed, never
asserted (the machine may be shared).
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys


def measure(exe, inputs: list, repeat: int) -> dict:
    """The Chrome trace of ``repeat`` runs of ``exe`` (a partitioned cpu executable) after
    one warm-up, each run's events, and the span of each run on each device (seconds)."""
    from pjrt.plugins.cpu.profiler import device_names, timeline, timeline_events
    from xla_core.cost.profile import chrome_trace
    exe.wait_optimized()
    exe.execute_global(*inputs)
    spans = []
    runs = []
    for _ in range(repeat):
        with timeline() as intervals:
            exe.execute_global(*inputs)
        run = timeline_events(exe, intervals)
        runs.append(run)
        for device in {e.device for e in run}:
            mine = [e for e in run if e.device == device]
            spans.append((max(e.start_ns + e.duration_ns for e in mine) -
                          min(e.start_ns for e in mine)) * 1e-9)
    return {"trace": chrome_trace([e for run in runs for e in run], device_names(exe)),
            "runs": runs, "spans": spans}


def rendezvous_waits(run: list, groups: dict[str, list[list[int]]]) -> dict[str, list[float]]:
    """Per collective key of one run's events: each device's wait for the last device of its
    group (``groups[key]``: device ids; one group of every device if absent) to begin the
    same (n-th) occurrence, in seconds; the collective cannot proceed before."""
    from xla_core.cost.profile import COLLECTIVE_CATEGORY
    begins: dict[str, dict[int, list[int]]] = {}
    for e in sorted(run, key=lambda e: e.start_ns):
        if e.category == COLLECTIVE_CATEGORY:
            begins.setdefault(e.name, {}).setdefault(e.device, []).append(e.start_ns)
    waits: dict[str, list[float]] = {}
    for key, per_device in begins.items():
        for group in groups.get(key, [list(per_device)]):
            members = [per_device[d] for d in group if d in per_device]
            for n in range(min((len(m) for m in members), default=0)):
                last = max(m[n] for m in members)
                waits.setdefault(key, []).extend((last - m[n]) * 1e-9 for m in members)
    return waits


def device_groups(exe, collective) -> list[list[int]] | None:
    """The device ids of each of ``collective``'s groups (its ``replica_groups``, which in a
    program of one replica name partitions), or None where that does not say them."""
    import numpy as np
    from stablehlo.ir.attributes import attr_to_python
    groups = collective.attributes.get("replica_groups")
    if groups is None or exe.num_replicas != 1:
        return None
    devices = [d.id for d in exe.device_assignment[0]]
    return [[devices[int(p)] for p in row] for row in np.asarray(attr_to_python(groups))]


def compare(exe, inputs: list, hardware_name: str = "cpu", repeat: int = 5) -> dict:
    """Per collective and for the step: estimated and measured seconds and their ratio."""
    from xla_core.cost import hardware
    from xla_core.cost.profile import match_profile, profile_from_trace
    from xla_core.scheduling import CostModelEstimator, simulate
    measured = measure(exe, inputs, repeat)
    module = exe.optimized_module
    # the devices that run this program at once share the host's cores
    described = hardware(hardware_name).shared_by(len(exe.addressable_devices()))
    estimator = CostModelEstimator(described, module)
    match = match_profile(module, profile_from_trace(measured["trace"], "the traced runs"))
    communicating = [m for m in match.measured if m.communication]
    groups = {m.key: g for m in communicating if (g := device_groups(exe, m.op)) is not None}
    waits: dict[str, list[float]] = {}
    for run in measured["runs"]:
        for key, seconds in rendezvous_waits(run, groups).items():
            waits.setdefault(key, []).extend(seconds)
    collectives = []
    for m in communicating:
        estimated = estimator.collective_seconds(m.op)
        collectives.append({"key": m.key, "op": m.op.name, "estimated_s": estimated,
                            "measured_s": m.seconds, "ratio": m.seconds / estimated,
                            "wait_s": statistics.median(waits.get(m.key, [0.0]))})
    clock = simulate(module.lookup("main").body.operations, estimator)
    # oversubscribed cores run the communication threads' copies between the compute, not
    # beside it (xla_core/scheduling/timeline.py)
    step_estimate = max(clock.now, clock.busy) if described.core_sharing > 1 else clock.now
    step_measured = statistics.median(measured["spans"])
    return {"collectives": collectives, "trace": measured["trace"],
            "core_sharing": described.core_sharing, "makespan_s": clock.now,
            "busy_s": clock.busy,
            "step": {"estimated_s": step_estimate, "measured_s": step_measured,
                     "ratio": step_measured / step_estimate}}


def within_factor(ratio: float, factor: float = 2.0) -> bool:
    return 1 / factor <= ratio <= factor


def report(result: dict) -> str:
    lines = [f"{'estimated':>11} {'measured':>11} {'ratio':>6} {'wait':>11}  collective"]
    for c in result["collectives"]:
        lines.append(f"{c['estimated_s']:11.3e} {c['measured_s']:11.3e} {c['ratio']:6.2f} "
                     f"{c['wait_s']:11.3e}  {c['key']}")
    ratios = [c["ratio"] for c in result["collectives"]]
    step = result["step"]
    if ratios:
        geomean = math.exp(statistics.mean(math.log(r) for r in ratios))
        inside = sum(within_factor(r) for r in ratios)
        total = (sum(c["measured_s"] for c in result["collectives"]) /
                 sum(c["estimated_s"] for c in result["collectives"]))
        waited = (sum(c["wait_s"] for c in result["collectives"]) /
                  sum(c["measured_s"] for c in result["collectives"]))
        lines.append(f"collectives: {inside}/{len(ratios)} within a factor of 2, "
                     f"geometric mean ratio {geomean:.2f}, total measured/estimated "
                     f"{total:.2f}, {waited:.0%} of it waiting for the last peer")
    lines.append(f"step: estimated {step['estimated_s'] * 1e3:.3f} ms, measured "
                 f"{step['measured_s'] * 1e3:.3f} ms, ratio {step['ratio']:.2f} "
                 f"({'within' if within_factor(step['ratio']) else 'NOT within'} a factor of 2)")
    lines.append(f"  simulated makespan {result['makespan_s'] * 1e3:.3f} ms, busy "
                 f"{result['busy_s'] * 1e3:.3f} ms; core sharing {result['core_sharing']:g}; "
                 f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    return "\n".join(lines)


def main(argv=None) -> int:
    import json
    import pjrt
    import stablehlo
    from tools.bench_lhs import add_lowered_argument, compile_step, load_step
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--hardware", default="cpu")
    parser.add_argument("--trace", metavar="OUT.json", help="keep the recorded trace here")
    add_lowered_argument(parser)
    args = parser.parse_args(argv)
    text, inputs = load_step(args.lowered)
    client = pjrt.make_client("cpu", num_devices=8)
    # parsed with a name, so the keys read fsdp_step.mlir:LINE:COL
    module = stablehlo.parse(text, "fsdp_step.mlir")
    result = compare(compile_step(client, module, True), inputs, args.hardware, args.repeat)
    if args.trace:
        with open(args.trace, "w", encoding="utf-8") as f:
            json.dump(result["trace"], f)
    print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
