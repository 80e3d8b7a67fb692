"""``openhlo bench --zoo``: ratios, the summary and the table of a zoo run (tools/bench/zoo.py)."""
from __future__ import annotations

from tools.bench.report import geomean

SLOW_RATIO = 2.0  # models slower than this x Inductor are listed in the summary


def fallbacks(entry: dict) -> list[str]:
    """The ops an openhlo run left to the interpreter or to eager PyTorch and the optimization
    pipelines it abandoned, labelled."""
    return ([f"interpreter: {op}" for op in entry.get("interpreter_fallbacks", [])]
            + [f"eager: {op}" for op in entry.get("eager_fallbacks", {})]
            + [f"unoptimized: {failure}" for failure in entry.get("pipeline_failures", [])])


def add_ratios(report: dict) -> None:
    """openhlo's time and first-call (compile) time over Inductor's and eager's, per model
    and mode, where both ran correctly."""
    for record in report["models"]:
        for mode in ("forward", "train"):
            result = record.get(mode)
            if result is None:
                continue
            ours, inductor = (result["backends"].get(b, {}) for b in ("openhlo", "inductor"))
            eager = result.get("eager", {})
            ratios = result["ratios"] = {}
            if ours.get("status") == "ok" and "median_s" in ours:
                if inductor.get("status") == "ok" and "median_s" in inductor:
                    ratios["vs_inductor"] = ours["median_s"] / inductor["median_s"]
                if "median_s" in eager:
                    ratios["vs_eager"] = ours["median_s"] / eager["median_s"]
            if "compile_s" in ours and "compile_s" in inductor:
                ratios["compile_vs_inductor"] = ours["compile_s"] / inductor["compile_s"]
                ratios["optimized_vs_inductor"] = ours["optimized_s"] / inductor["compile_s"]


def summarize(report: dict) -> dict:
    """Per mode: models run, passed per backend, models with fallbacks, geometric means and
    the models above ``SLOW_RATIO`` x Inductor; skipped models (library missing)."""
    records = report["models"]
    summary = {"models": len(records),
               "skipped": [r["name"] for r in records if r["status"] == "skipped"]}
    for mode in ("forward", "train"):
        ran = [r for r in records if mode in r]
        if not ran:
            continue
        entry = summary[mode] = {"ran": len(ran)}
        for backend in ("openhlo", "inductor"):
            entry[f"{backend}_passed"] = sum(
                r[mode]["backends"].get(backend, {}).get("status") == "ok" for r in ran)
        entry["failed"] = {r["name"]: r[mode]["backends"]["openhlo"].get("message")
                           or r[mode]["backends"]["openhlo"].get("worst")
                           for r in ran if r[mode]["backends"]["openhlo"].get("status") != "ok"}
        entry["with_fallbacks"] = {r["name"]: fallbacks(r[mode]["backends"]["openhlo"])
                                   for r in ran if fallbacks(r[mode]["backends"]["openhlo"])}
        for key in ("vs_inductor", "vs_eager", "compile_vs_inductor", "optimized_vs_inductor"):
            values = [r[mode]["ratios"][key] for r in ran if key in r[mode]["ratios"]]
            entry[key] = {"geomean": geomean(values), "max": max(values, default=None),
                          "count": len(values)}
        entry["above_2x_inductor"] = sorted(
            r["name"] for r in ran if r[mode]["ratios"].get("vs_inductor", 0) > SLOW_RATIO)
    return summary


def _ms(entry: dict) -> str:
    return f"{entry['median_s'] * 1e3:.3g}" if "median_s" in entry else "-"


def _x(value) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def _s(value) -> str:
    return f"{value:.1f}" if value is not None else "-"


def _check(entry: dict) -> str:
    status = entry.get("status", "-")
    if status == "ok":
        return "ok"
    return {"mismatch": "WRONG", "error": "ERROR"}.get(status, status)


def format_table(report: dict) -> str:
    """The per-model table and the summary, as text."""
    lines = ["held-out models (not in the zoo, never tuned for)"] if report.get("heldout") else []
    modes = ("forward", "train") if report["train"] else ("forward",)
    for mode in modes:
        lines += ["", f"{mode}: times in ms (median), compile = first call in s (cold); "
                      "openhlo compile shows first call / kernels in place",
                  f"{'model':30} {'lib':12} {'ohlo':5} {'ind':5} {'fallbacks':9} "
                  f"{'compile ohlo':>13} {'ind':>5} {'eager':>7} {'inductor':>8} "
                  f"{'openhlo':>8} {'vs ind':>7} {'vs eager':>8}"]
        for record in report["models"]:
            if record["status"] == "skipped":
                lines.append(f"{record['name']:30} {record['library']:12} skipped: "
                             f"{record['library']} not installed")
                continue
            result = record[mode]
            ours, ind = result["backends"]["openhlo"], result["backends"].get("inductor", {})
            ratios = result["ratios"]
            compile_ours = (f"{_s(ours.get('compile_s'))}/{_s(ours.get('optimized_s'))}"
                            if "compile_s" in ours else "-")
            lines.append(
                f"{record['name']:30} {record['library']:12} {_check(ours):5} {_check(ind):5} "
                f"{len(fallbacks(ours)):9d} {compile_ours:>13} {_s(ind.get('compile_s')):>5} "
                f"{_ms(result.get('eager', {})):>7} {_ms(ind):>8} {_ms(ours):>8} "
                f"{_x(ratios.get('vs_inductor')):>7} {_x(ratios.get('vs_eager')):>8}")
    summary = report["summary"]
    load = report["load_average"]
    lines += ["", f"summary ({summary['models']} models; {len(summary['skipped'])} skipped; "
                  f"load average {load['start']:.1f} at the start, {load['end']:.1f} at the "
                  f"end on {report['cores']} cores, PyTorch threads {report['torch_threads']}; tolerance: error vs float64 <= "
                  f"{report['tolerance']['factor']:g} x eager float32's + "
                  f"{report['tolerance']['floor']:g}):"]
    for mode in modes:
        e = summary.get(mode)
        if e is None:
            continue
        if report.get("accuracy"):
            lines.append(f"  {mode}: openhlo matches {e['openhlo_passed']}/{e['ran']} "
                         f"(--accuracy: Inductor not run, nothing timed); fallbacks in "
                         f"{len(e['with_fallbacks'])}")
        else:
            lines.append(
                f"  {mode}: openhlo matches {e['openhlo_passed']}/{e['ran']}, Inductor "
                f"{e['inductor_passed']}/{e['ran']}; fallbacks in {len(e['with_fallbacks'])}; "
                f"time vs Inductor geomean {_x(e['vs_inductor']['geomean'])} (max "
                f"{_x(e['vs_inductor']['max'])}), vs eager {_x(e['vs_eager']['geomean'])}; "
                f"first call vs Inductor's {_x(e['compile_vs_inductor']['geomean'])}, "
                f"kernels in place {_x(e['optimized_vs_inductor']['geomean'])}")
        if e["above_2x_inductor"]:
            lines.append(f"    above {SLOW_RATIO:g}x Inductor: {', '.join(e['above_2x_inductor'])}")
        for name, problem in e["failed"].items():
            lines.append(f"    not matching / failed: {name}: {problem}")
        for name, ops in e["with_fallbacks"].items():
            lines.append(f"    fallbacks in {name}: {', '.join(ops)}")
    if summary["skipped"]:
        lines.append(f"  skipped (library not installed): {', '.join(summary['skipped'])}")
    return "\n".join(lines)
