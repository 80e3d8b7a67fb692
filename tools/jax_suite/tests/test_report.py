"""The comparison, the table and the JSON on synthetic outcomes."""
from __future__ import annotations

import json

from tools.jax_suite.outcomes import CRASHED, FAILED, NOT_RUN, PASSED, SKIPPED, Outcome
from tools.jax_suite.report import FileResult, read_baseline, table, totals, write_json


def _file() -> FileResult:
    result = FileResult("lax_test.py")
    for i in range(10):
        result.baseline[f"L::t{i}"] = Outcome(PASSED)
    result.baseline["L::broken"] = Outcome(FAILED, "ValueError: x")
    result.baseline["L::gpu_only"] = Outcome(SKIPPED, "Skipped: gpu")
    for i in range(6):
        result.platform[f"L::t{i}"] = Outcome(PASSED)
    result.platform["L::t6"] = Outcome(FAILED, "NotImplementedError: op sort on 3 dims")
    result.platform["L::t7"] = Outcome(FAILED, "NotImplementedError: op sort on 4 dims")
    result.platform["L::t8"] = Outcome(CRASHED, "process killed by SIGSEGV")
    # L::t9 never reached; the platform passing a baseline failure does not count
    result.platform["L::broken"] = Outcome(PASSED)
    result.seconds = {"baseline": 12.0, "platform": 20.0}
    return result


def test_figures_count_only_baseline_passes():
    fig = _file().figures()
    assert fig["baseline_passed"] == 10
    assert fig["platform_passed"] == 6
    assert fig["ratio"] == 0.6
    assert fig["baseline"] == {"passed": 10, "failed": 1, "skipped": 1}
    assert fig["platform"] == {"passed": 6, "failed": 2, "crashed": 1, "not_run": 1}
    causes = {c["cause"]: c["count"] for c in fig["causes"]}
    assert causes == {"failed: NotImplementedError: op sort on N dims": 2,
                      "crashed: process killed by SIGSEGV": 1, "not_run": 1}
    assert fig["causes"][0]["examples"] == ["L::t6", "L::t7"]


def test_platform_error_gives_ratio_zero():
    result = _file()
    result.platform = {}
    result.platform_error = "RuntimeError: Unable to initialize backend 'openhlo'"
    fig = result.figures()
    assert fig["ratio"] == 0.0
    assert fig["platform"] == {"not_run": 10}
    text = table([fig], totals([fig]), "cpu", "openhlo")
    assert "platform run failed: RuntimeError: Unable to initialize backend" in text


def test_table_rows_and_total():
    other = FileResult("random_test.py", baseline={"R::a": Outcome(PASSED)},
                       platform={"R::a": Outcome(PASSED)}, seconds={"baseline": 1.0})
    figures = [_file().figures(), other.figures()]
    total = totals(figures)
    assert total["baseline_passed"] == 11 and total["platform_passed"] == 7
    assert total["seconds"] == {"baseline": 13.0, "platform": 20.0}
    lines = table(figures, total, "cpu", "openhlo").splitlines()
    assert lines[0].split()[:4] == ["file", "cpu", "passed", "of"]
    row = lines[2].split()
    assert row == ["lax_test.py", "10", "6", "60.0%", "1/1", "12/20"]
    assert lines[3].split()[:4] == ["random_test.py", "1", "1", "100.0%"]
    assert lines[5].split()[:4] == ["total", "11", "7", "63.6%"]
    assert "       2  failed: NotImplementedError: op sort on N dims" in lines


def test_json_round_trips_the_baseline(tmp_path):
    result = _file()
    fig = result.figures()
    path = tmp_path / "out.json"
    write_json(str(path), [result], [fig], totals([fig]), {"platform_name": "openhlo"})
    data = json.loads(path.read_text())
    assert data["platform_name"] == "openhlo"
    entry = data["files"][0]
    assert entry["ratio"] == 0.6
    tests = {t["id"]: t for t in entry["tests"]}
    assert tests["L::t8"] == {"id": "L::t8", "baseline": "passed", "platform": "crashed",
                              "message": "process killed by SIGSEGV"}
    assert tests["L::t9"]["platform"] == NOT_RUN
    assert "platform" not in tests["L::broken"]
    reread = read_baseline(str(path))["lax_test.py"]
    assert {k: o.status for k, o in reread.items()} == \
        {k: o.status for k, o in result.baseline.items()}
