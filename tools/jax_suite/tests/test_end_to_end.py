"""``openhlo jax-suite`` end to end on a tiny test file written here (not JAX's).

Both runs use JAX's cpu platform; the tests behave differently on their second run (the
platform run) through marker files, so one run shows every kind of outcome: a failure, a
crash (the process exits) and a hang (killed at the per-test timeout), each costing only
its own test.
"""
from __future__ import annotations

import json
import textwrap

from tools.tests.helpers import run_cli

TINY = '''
import os
import pathlib
import time

import pytest


def _second_run(name):
    marker = pathlib.Path(__file__).with_name("seen_" + name)
    if marker.exists():
        return True
    marker.touch()
    return False


def test_pass():
    pass


def test_fails_always():
    assert 1 == 2


def test_skipped():
    pytest.skip("not here")


def test_value_error_on_platform():
    if _second_run("value"):
        raise ValueError("bad value 3\\nsecond line")


def test_crash_on_platform():
    if _second_run("crash"):
        os._exit(7)


def test_hang_on_platform():
    if _second_run("hang"):
        time.sleep(120)


def test_last():
    pass
'''


def _src(tmp_path):
    tests = tmp_path / "src" / "tests"
    tests.mkdir(parents=True)
    (tests / "tiny_test.py").write_text(textwrap.dedent(TINY))
    return tmp_path / "src"


def test_outcomes_crash_and_timeout_isolated(tmp_path, capsys):
    out = tmp_path / "out.json"
    result = run_cli(capsys, "jax-suite", "--jax-src", _src(tmp_path), "--files",
                     "tiny_test.py", "--platform", "cpu", "--jobs", "1", "--timeout", "8",
                     "--json", out)
    assert result.code == 1, result.err  # 2 of 5 is below --min-ratio
    data = json.loads(out.read_text())
    entry = data["files"][0]
    assert entry["baseline"] == {"passed": 5, "failed": 1, "skipped": 1}
    assert entry["platform"] == {"passed": 2, "failed": 1, "crashed": 1, "timeout": 1}
    assert entry["ratio"] == 0.4
    causes = {c["cause"]: c["examples"] for c in entry["causes"]}
    assert causes == {"failed: ValueError: bad value N": ["test_value_error_on_platform"],
                      "crashed: process exited with status N during the test":
                          ["test_crash_on_platform"],
                      "timeout: ran over N s": ["test_hang_on_platform"]}
    assert entry["restarts"] == {"baseline": 0, "platform": 2}
    row = next(ln for ln in result.out.splitlines() if ln.startswith("tiny_test.py"))
    assert row.split()[1:5] == ["5", "2", "40.0%", "1/1"]


def test_absent_platform_is_reported_with_ratio_zero(tmp_path, capsys):
    result = run_cli(capsys, "jax-suite", "--jax-src", _src(tmp_path), "--files",
                     "tiny_test.py", "--platform", "no_such_platform", "--jobs", "2",
                     "--sample", "3")
    assert result.code == 1
    assert "platform 'no_such_platform' does not start" in result.err
    row = next(ln for ln in result.out.splitlines() if ln.startswith("tiny_test.py"))
    fields = row.split()
    assert fields[3] == "0.0%" and int(fields[1]) > 0 and fields[2] == "0"
    assert "platform run failed" in result.out


def test_missing_sources_and_files_are_usage_errors(tmp_path, capsys):
    result = run_cli(capsys, "jax-suite", "--jax-src", tmp_path)
    assert result.code == 1 and "no jax test sources" in result.err
    result = run_cli(capsys, "jax-suite", "--jax-src", _src(tmp_path), "--files", "nope.py")
    assert result.code == 1 and "no test file nope.py" in result.err


def test_selected_tests_missing_from_collection_are_not_run(tmp_path):
    from tools.jax_suite.outcomes import NOT_RUN, PASSED
    from tools.jax_suite.runner import Job, run_job
    job = Job(_src(tmp_path), "tests/tiny_test.py", "cpu", 1, 60,
              select=["test_pass", "test_renamed_elsewhere"])
    result = run_job(job)
    assert result.error is None and result.restarts == 0
    assert result.outcomes["test_pass"].status == PASSED
    assert result.outcomes["test_renamed_elsewhere"].status == NOT_RUN
    assert set(result.outcomes) == {"test_pass", "test_renamed_elsewhere"}


def test_file_that_does_not_import_is_an_error(tmp_path):
    from tools.jax_suite.runner import Job, run_job
    src = _src(tmp_path)
    (src / "tests" / "broken_test.py").write_text("import no_such_module_here\n")
    result = run_job(Job(src, "tests/broken_test.py", "cpu", 1, 60))
    assert result.outcomes == {} and result.restarts == 0
    assert "no_such_module_here" in result.error


GATED = '''
from jax._src import test_util as jtu


class Gated(jtu.JaxTestCase):
    @jtu.run_on_devices("tpu")
    def test_tpu_only(self):
        pass

    def test_reports_dut(self):
        assert jtu.device_under_test() == "tpu", jtu.device_under_test()
'''


def test_test_dut_reaches_jax_device_gates(tmp_path):
    """``--test-dut`` sets JAX's jax_test_dut: a test gated to that kind runs (on cpu it is
    skipped), and device_under_test() reports it."""
    from tools.jax_suite.outcomes import PASSED, SKIPPED
    from tools.jax_suite.runner import Job, run_job
    src = _src(tmp_path)
    (src / "tests" / "gated_test.py").write_text(textwrap.dedent(GATED))
    plain = run_job(Job(src, "tests/gated_test.py", "cpu", 1, 120))
    assert plain.outcomes["Gated::test_tpu_only"].status == SKIPPED
    told = run_job(Job(src, "tests/gated_test.py", "cpu", 1, 120, test_dut="tpu"))
    assert {k: o.status for k, o in told.outcomes.items()} == {
        "Gated::test_tpu_only": PASSED, "Gated::test_reports_dut": PASSED}
