"""The report of ``openhlo bench``: ratios, the summary, the table.

Works on the JSON-ready dict of ``suite.run_suite`` (so a saved ``--json`` file can be
reported again). A runner's ratio to XLA is its median time over ``xla``'s on the same
workload; its ratio to the best peer is its time over the fastest *other* runner's. Only
runners whose results matched count; a mismatch or an error is listed as a failure.
``jax_plugin`` is ``openhlo`` reached through JAX: it is no peer of ``openhlo`` (nor the
reverse), and its ratio to ``openhlo`` (``vs_openhlo``) is the plugin's overhead.
"""
from __future__ import annotations

import math

PEER_LABEL = "best peer"
# A runner that is another one's runtime reached another way -> that runner: not its peer,
# and its ratio to it is reported (the issue 5 bar: the plugin within 10% of the runtime).
SAME_RUNTIME = {"jax_plugin": "openhlo"}
PLUGIN_BAR = 1.10


def geomean(values) -> float | None:
    values = list(values)
    if not values:
        return None
    if any(v <= 0 for v in values):
        raise ValueError(f"geometric mean of non-positive values: {values}")
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _ok_times(record: dict) -> dict[str, float]:
    return {name: r["median_s"] for name, r in record["results"].items()
            if r["status"] == "ok" and "median_s" in r}


def add_ratios(report: dict) -> None:
    """Fill ``vs_xla``, ``vs_best_peer``, ``gflops``, ``gbps`` of every timed result, and
    ``vs_openhlo`` of ``jax_plugin``'s (see SAME_RUNTIME)."""
    for record in report["workloads"]:
        times = _ok_times(record)
        for name, seconds in times.items():
            result = record["results"][name]
            if "xla" in times:
                result["vs_xla"] = seconds / times["xla"]
            runtime = SAME_RUNTIME.get(name, name)
            if runtime != name and runtime in times:
                result[f"vs_{runtime}"] = seconds / times[runtime]
            peers = [t for other, t in times.items()
                     if SAME_RUNTIME.get(other, other) != runtime]
            if peers:
                result["vs_best_peer"] = seconds / min(peers)
            result["gflops"] = record["flops"] / seconds / 1e9
            result["gbps"] = record["bytes"] / seconds / 1e9


def summarize(report: dict) -> dict:
    """Per runner: geometric mean and max of its ratio to XLA and to its best peer."""
    summary: dict = {"runners": {}, "failures": []}
    for runner in report["runners"]:
        entry = {}
        for key in ("vs_xla", "vs_best_peer", *_same_runtime_keys(runner)):
            pairs = [(r["results"][runner][key], r["name"]) for r in report["workloads"]
                     if key in r["results"].get(runner, {})]
            if pairs:
                worst = max(pairs)
                entry[key] = {"geomean": geomean(v for v, _ in pairs), "max": worst[0],
                              "max_workload": worst[1], "count": len(pairs)}
        summary["runners"][runner] = entry
    for record in report["workloads"]:
        for runner, result in record["results"].items():
            if result["status"] != "ok":
                summary["failures"].append({"workload": record["name"], "runner": runner,
                                            "status": result["status"],
                                            "message": result["message"]})
    return summary


def _same_runtime_keys(runner: str) -> tuple[str, ...]:
    return (f"vs_{SAME_RUNTIME[runner]}",) if runner in SAME_RUNTIME else ()


def _ms(seconds) -> str:
    if seconds is None:
        return "-"
    ms = seconds * 1e3
    return f"{ms:.3g}" if ms < 100 else f"{ms:.0f}"


def _ratio(value) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _mb(n) -> str:
    return "n/a" if n is None else f"{n / 2**20:.3g}"


def format_report(report: dict) -> str:
    machine = report["machine"]
    peak, bandwidth = machine["peak_flops"], machine["memory_bandwidth"]
    lines = [(f"machine: {machine['cores']} cores, matmul peak {peak / 1e9:.1f} GFLOP/s, "
              f"memory bandwidth {bandwidth / 1e9:.1f} GB/s (xla_core.cost.hardware('cpu'))")]
    if "load_average" in report:
        load = report["load_average"]
        lines.append(f"load average (1 min) {load['start']:.1f} at the start, {load['end']:.1f} "
                     f"at the end (other work on the machine slows every runner)")
    lines.append("")
    header = ("workload", "runner", "median ms", "vs xla", f"vs {PEER_LABEL}", "GFLOP/s",
              "%peak", "GB/s", "%bw", "cold ms", "cached ms", "peak MB", "status")
    rows = [header]
    for record in report["workloads"]:
        for i, (runner, r) in enumerate(record["results"].items()):
            timed = "median_s" in r
            rows.append((
                record["name"] if i == 0 else "", runner,
                _ms(r.get("median_s")), _ratio(r.get("vs_xla")), _ratio(r.get("vs_best_peer")),
                f"{r['gflops']:.3g}" if timed else "-",
                f"{100 * r['gflops'] * 1e9 / peak:.0f}" if timed else "-",
                f"{r['gbps']:.3g}" if timed else "-",
                f"{100 * r['gbps'] * 1e9 / bandwidth:.0f}" if timed else "-",
                _ms(r.get("compile_cold_s")), _ms(r.get("compile_cached_s")),
                _mb(r.get("peak_bytes")), r["status"].upper() if r["status"] != "ok" else "ok"))
    widths = [max(len(row[c]) for row in rows) for c in range(len(header))]
    for row in rows:
        lines.append("  ".join(cell.ljust(w) if c < 2 else cell.rjust(w)
                               for c, (cell, w) in enumerate(zip(row, widths))).rstrip())
    lines += ["", ("GFLOP/s, GB/s: flops and bytes of xla_core.cost.module_cost of the lowered "
                   "StableHLO (the same for every runner); the bytes are unfused traffic, so "
                   "fused code can pass 100% of the bandwidth"),
              "cold: fresh empty compilation caches; cached: a second process on them",
              *_kernels_ready(report),
              *_peak_memory_notes(report),
              "", "summary (time ratios; geometric mean over the workloads that ran correctly):"]
    summary = report["summary"]
    for runner, entry in summary["runners"].items():
        parts = []
        keys = (("vs_xla", "vs xla"), ("vs_best_peer", f"vs {PEER_LABEL}"),
                *((k, k.replace("_", " ")) for k in _same_runtime_keys(runner)))
        for key, label in keys:
            if key in entry and not (runner == "xla" and key == "vs_xla"):
                e = entry[key]
                parts.append(f"{label}: geomean {e['geomean']:.2f}x, max {e['max']:.2f}x "
                             f"({e['max_workload']}), n={e['count']}")
        lines.append(f"  {runner:<12} " + ("; ".join(parts) if parts else "no timings"))
    lines += _same_runtime_lines(report)
    if summary["failures"]:
        lines += ["", (f"FAILURES ({len(summary['failures'])}): wrong results are failures, "
                       "not times")]
        lines += [f"  {f['status'].upper()} {f['runner']} on {f['workload']}: {f['message']}"
                  for f in summary["failures"]]
    lines.append(f"\nwall time {report['wall_s']:.0f} s")
    return "\n".join(lines)


def _peak_memory_notes(report: dict) -> list[str]:
    """What the peak MB column means for each runner in the report (runner.peak_memory)."""
    from tools.bench.runners import RUNNER_CLASSES
    runners = list(dict.fromkeys(runner for record in report["workloads"]
                                 for runner in record["results"]))
    return ["peak MB:", *(f"  {runner}: {RUNNER_CLASSES[runner].peak_memory}"
                          for runner in runners if runner in RUNNER_CLASSES)]


def _kernels_ready(report: dict) -> list[str]:
    """The openhlo footnote: compile returns before its generated kernels are built."""
    ready = [(record["name"], record["results"]["openhlo"]["optimized_cold_s"])
             for record in report["workloads"]
             if "optimized_cold_s" in record["results"].get("openhlo", {})]
    if not ready:
        return []
    return [("openhlo cold: compile returns a runnable program (fusions op by op on native "
             "kernels) and builds the generated kernels in the background; times are measured "
             "after they are in place, which was (ms from the compile call): "
             + ", ".join(f"{name} {seconds * 1e3:.0f}" for name, seconds in ready))]


def _same_runtime_lines(report: dict) -> list[str]:
    """Per workload, each SAME_RUNTIME runner's time over its runtime's direct call."""
    lines = []
    for runner, runtime in SAME_RUNTIME.items():
        key = f"vs_{runtime}"
        pairs = [(record["name"], record["results"][runner][key])
                 for record in report["workloads"] if key in record["results"].get(runner, {})]
        if not pairs:
            continue
        over = [name for name, ratio in pairs if ratio > PLUGIN_BAR]
        lines += ["", f"{runner} over {runtime} (the same runtime, called through JAX; "
                      f"bar {PLUGIN_BAR:.2f}x): "
                      + ", ".join(f"{name} {ratio:.2f}x" for name, ratio in pairs)
                      + f"; geomean {geomean(r for _, r in pairs):.2f}x"
                      + (f"; over the bar: {', '.join(over)}" if over else "")]
    return lines
