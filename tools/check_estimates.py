"""Measured against estimated: a traced run of the 8-device FSDP step next to the
latency-hiding scheduler's estimates of its collectives and of the whole step.

``python -m tools.check_estimates [--repeat N] [--hardware NAME] [--trace OUT.json]
[--lowered DIR]`` lowers the step of ``tools.fsdp_step_jax`` (as ``tools.bench_lhs`` does;
``--lowered``: takes it from DIR, where no JAX is installed), compiles it for 8
partitions on the cpu backend, records ``N`` runs after a warm-up (the Chrome trace of
``openhlo run --trace``; ``--trace`` keeps it) and prints, for every collective of the
per-device program, its estimated time (``CostModelEstimator.collective_seconds`` on the
hardware description) and its measured median (its communication-thread events, or a
synchronous collective's own; xla_core.cost.profile.match_profile), their ratio, and the
same for the step: the simulated makespan of the program's order (xla_core.scheduling
timeline) against the measured span of one run on a device (median over devices and runs).
The issue's acceptance is agreement within a factor of 2; the verdict is printed, never
asserted (the machine may be shared).
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys


def measure(exe, inputs: list, repeat: int) -> dict:
    """The Chrome trace of ``repeat`` runs of ``exe`` (a partitioned cpu executable) after
    one warm-up, and the span of each run on each device (seconds)."""
    from pjrt.plugins.cpu.profiler import device_names, timeline, timeline_events
    from xla_core.cost.profile import chrome_trace
    exe.wait_optimized()
    exe.execute_global(*inputs)
    spans = []
    events = []
    for _ in range(repeat):
        with timeline() as intervals:
            exe.execute_global(*inputs)
        run = timeline_events(exe, intervals)
        events += run
        for device in {e.device for e in run}:
            mine = [e for e in run if e.device == device]
            spans.append((max(e.start_ns + e.duration_ns for e in mine) -
                          min(e.start_ns for e in mine)) * 1e-9)
    return {"trace": chrome_trace(events, device_names(exe)), "spans": spans}


def compare(exe, inputs: list, hardware_name: str = "cpu", repeat: int = 5) -> dict:
    """Per collective and for the step: estimated and measured seconds and their ratio."""
    from xla_core.cost import hardware
    from xla_core.cost.profile import match_profile, profile_from_trace
    from xla_core.scheduling import CostModelEstimator, simulate
    measured = measure(exe, inputs, repeat)
    module = exe.optimized_module
    estimator = CostModelEstimator(hardware(hardware_name), module)
    match = match_profile(module, profile_from_trace(measured["trace"], "the traced runs"))
    collectives = []
    for m in match.measured:
        if m.communication:
            estimated = estimator.collective_seconds(m.op)
            collectives.append({"key": m.key, "op": m.op.name, "estimated_s": estimated,
                                "measured_s": m.seconds, "ratio": m.seconds / estimated})
    step_estimate = simulate(module.lookup("main").body.operations, estimator).now
    step_measured = statistics.median(measured["spans"])
    return {"collectives": collectives, "trace": measured["trace"],
            "step": {"estimated_s": step_estimate, "measured_s": step_measured,
                     "ratio": step_measured / step_estimate}}


def within_factor(ratio: float, factor: float = 2.0) -> bool:
    return 1 / factor <= ratio <= factor


def report(result: dict) -> str:
    lines = [f"{'estimated':>11} {'measured':>11} {'ratio':>6}  collective"]
    for c in result["collectives"]:
        lines.append(f"{c['estimated_s']:11.3e} {c['measured_s']:11.3e} {c['ratio']:6.2f}  "
                     f"{c['key']}")
    ratios = [c["ratio"] for c in result["collectives"]]
    step = result["step"]
    if ratios:
        geomean = math.exp(statistics.mean(math.log(r) for r in ratios))
        inside = sum(within_factor(r) for r in ratios)
        total = (sum(c["measured_s"] for c in result["collectives"]) /
                 sum(c["estimated_s"] for c in result["collectives"]))
        lines.append(f"collectives: {inside}/{len(ratios)} within a factor of 2, "
                     f"geometric mean ratio {geomean:.2f}, total measured/estimated "
                     f"{total:.2f}")
    lines.append(f"step: estimated {step['estimated_s'] * 1e3:.3f} ms, measured "
                 f"{step['measured_s'] * 1e3:.3f} ms, ratio {step['ratio']:.2f} "
                 f"({'within' if within_factor(step['ratio']) else 'NOT within'} a factor of 2)")
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
