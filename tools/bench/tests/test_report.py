"""Ratios, geometric means, the tolerance check and the table, on synthetic numbers."""
import math

import numpy as np
import pytest

from tools.bench.report import add_ratios, format_report, geomean, summarize
from tools.bench.suite import check_outputs
from tools.bench.timing import interleaved_medians, plan_samples


def _report(times: dict[str, dict[str, float]], failures=()) -> dict:
    """A run_suite-shaped dict: times[workload][runner] = median seconds."""
    workloads = []
    for name, per_runner in times.items():
        results = {r: {"status": "ok", "median_s": t, "compile_cold_s": 0.01,
                       "compile_cached_s": 0.002, "peak_bytes": 2**20}
                   for r, t in per_runner.items()}
        workloads.append({"name": name, "description": "", "sizes": {}, "flops": 2e9,
                          "bytes": 1e9, "results": results})
    for workload, runner, status in failures:
        rec = next(w for w in workloads if w["name"] == workload)
        rec["results"][runner] = {"status": status, "message": "output 0 differs"}
    runners = list(next(iter(times.values())))
    return {"machine": {"name": "cpu", "peak_flops": 1e11, "memory_bandwidth": 1e10,
                        "cores": 2}, "runners": runners, "workloads": workloads, "wall_s": 1.0}


def test_geomean():
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([0.5, 2.0, 1.0]) == pytest.approx(1.0)
    assert geomean([]) is None
    with pytest.raises(ValueError):
        geomean([1.0, 0.0])


def test_ratios_and_summary():
    report = _report({"a": {"openhlo": 2.0, "xla": 1.0, "torch_eager": 4.0},
                      "b": {"openhlo": 1.0, "xla": 2.0, "torch_eager": 0.5}})
    add_ratios(report)
    a, b = (w["results"] for w in report["workloads"])
    assert a["openhlo"]["vs_xla"] == 2.0 and b["openhlo"]["vs_xla"] == 0.5
    assert a["openhlo"]["vs_best_peer"] == 2.0        # best other: xla at 1.0
    assert b["openhlo"]["vs_best_peer"] == 2.0        # best other: torch_eager at 0.5
    assert a["xla"]["vs_best_peer"] == 0.5
    assert a["openhlo"]["gflops"] == pytest.approx(1.0)   # 2e9 flops in 2 s
    assert a["openhlo"]["gbps"] == pytest.approx(0.5)
    summary = summarize(report)
    opened = summary["runners"]["openhlo"]
    assert opened["vs_xla"]["geomean"] == pytest.approx(1.0)
    assert opened["vs_xla"]["max"] == 2.0 and opened["vs_xla"]["max_workload"] == "a"
    assert opened["vs_best_peer"]["geomean"] == pytest.approx(2.0)
    eager = summary["runners"]["torch_eager"]["vs_xla"]
    assert eager["geomean"] == pytest.approx(math.sqrt(4.0 * 0.25))
    assert summary["failures"] == []


def test_jax_plugin_is_openhlo_again_not_its_peer():
    report = _report({"a": {"openhlo": 1.0, "jax_plugin": 1.2, "xla": 2.0},
                      "b": {"openhlo": 1.0, "jax_plugin": 1.05, "xla": 0.5}})
    add_ratios(report)
    a, b = (w["results"] for w in report["workloads"])
    assert a["jax_plugin"]["vs_openhlo"] == pytest.approx(1.2)
    assert "vs_openhlo" not in a["openhlo"] and "vs_openhlo" not in a["xla"]
    assert a["openhlo"]["vs_best_peer"] == 0.5        # xla; not jax_plugin (the same runtime)
    assert a["jax_plugin"]["vs_best_peer"] == pytest.approx(0.6)
    assert b["xla"]["vs_best_peer"] == 0.5            # both openhlo runners count for xla
    report["summary"] = summary = summarize(report)
    plugin = summary["runners"]["jax_plugin"]["vs_openhlo"]
    assert plugin["geomean"] == pytest.approx(math.sqrt(1.2 * 1.05))
    assert plugin["max"] == pytest.approx(1.2) and plugin["max_workload"] == "a"
    text = format_report(report)
    assert "jax_plugin over openhlo" in text and "a 1.20x, b 1.05x" in text
    assert "over the bar: a" in text


def test_failures_do_not_count_as_times():
    report = _report({"a": {"openhlo": 2.0, "xla": 1.0}, "b": {"openhlo": 3.0, "xla": 1.0}},
                     failures=[("b", "openhlo", "mismatch")])
    add_ratios(report)
    report["summary"] = summary = summarize(report)
    assert summary["runners"]["openhlo"]["vs_xla"]["count"] == 1
    assert summary["runners"]["openhlo"]["vs_xla"]["geomean"] == pytest.approx(2.0)
    assert summary["failures"] == [{"workload": "b", "runner": "openhlo",
                                    "status": "mismatch", "message": "output 0 differs"}]
    text = format_report(report)
    assert "MISMATCH openhlo on b: output 0 differs" in text
    assert "FAILURES (1)" in text


def test_table_lists_every_runner():
    report = _report({"w": {"openhlo": 3e-3, "xla": 1e-3}})
    add_ratios(report)
    report["summary"] = summarize(report)
    text = format_report(report)
    row = next(line for line in text.splitlines() if line.startswith("w "))
    assert "openhlo" in row and "3.00x" in row and "3" in row
    assert "geomean 3.00x, max 3.00x (w)" in text


def test_check_outputs():
    ref = [np.array([1.0, -2.0, 1000.0], np.float32), np.array([1, 2], np.int32)]
    assert check_outputs([r.copy() for r in ref], ref) is None
    # atol scales with the largest |reference|: 0.05 off on 1.0 is within 1e-4 x 1000
    assert check_outputs([ref[0] + np.float32(0.05), ref[1]], ref) is None
    assert "output 0" in check_outputs([ref[0] * 1.01, ref[1]], ref)
    assert "output 1" in check_outputs([ref[0], ref[1] + 1], ref)
    assert "shape" in check_outputs([ref[0][:2], ref[1]], ref)
    assert "1 outputs, expected 2" in check_outputs([ref[0]], ref)
    nan = [np.array([np.nan, 1.0], np.float32)]
    assert check_outputs([nan[0].copy()], nan) is None
    assert check_outputs([np.array([0.0, 1.0], np.float32)], nan) is not None


def test_plan_samples():
    assert plan_samples(1.0, 2.0) == (5, 1)              # slow: at least 5 samples
    samples, inner = plan_samples(1e-6, 1.0)              # fast: batched, capped
    assert inner == 1000 and samples == 200
    assert plan_samples(0.01, 1.0) == (100, 1)


def test_interleaved_medians_orders_by_cost():
    import time
    result = interleaved_medians({"fast": lambda: None,
                                  "slow": lambda: time.sleep(0.002)}, 0.02, rounds=2)
    assert result["slow"]["median_s"] >= 0.002
    assert result["fast"]["median_s"] < result["slow"]["median_s"]
    assert result["slow"]["samples"] >= 5


def test_peak_memory_footnote_says_what_each_runner_reports():
    report = _report({"w": {"openhlo": 3e-3, "xla": 1e-3, "jax_plugin": 4e-3}})
    report["workloads"][0]["results"]["jax_plugin"]["peak_bytes"] = None
    add_ratios(report)
    report["summary"] = summarize(report)
    lines = format_report(report).splitlines()
    row = next(line for line in lines if line.split()[:1] == ["w"])
    assert row.split()[-2] == "1"  # openhlo's 1 MiB: a real number
    notes = lines[lines.index("peak MB:") + 1:lines.index("peak MB:") + 4]
    assert notes[0].startswith("  openhlo: exe.memory_stats()") and "n/a" not in notes[0]
    assert notes[1].startswith("  xla: memory_analysis()")
    assert notes[2] == "  jax_plugin: n/a (the plugin reports no memory figure)"
    jax_row = next(line for line in lines if line.split()[:1] == ["jax_plugin"])
    assert jax_row.split()[-2] == "n/a"
