"""The prepared GPU run, checked without a GPU: its plan (--dry-run), its shell scripts'
syntax, and that every step the plan names exists in device_steps.py."""
import json
import os
import subprocess

import pytest

from tools.gpu import device_checks, device_steps

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_dry_run_plans_every_step_within_the_budget(tmp_path, capsys):
    assert device_checks.main(["--dry-run", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert [p["name"] for p in results["plan"]] == [s.name for s in device_checks.STEPS]
    assert sum(p["timeout_s"] for p in results["plan"]) <= device_checks.DEFAULT_BUDGET_S
    assert results["steps"] == [] and results["dry_run"]
    assert "planned 6 step(s)" in capsys.readouterr().out


def test_every_step_has_a_function_and_a_command():
    assert set(device_steps.STEP_FUNCTIONS) == {s.name for s in device_checks.STEPS}
    command = device_checks.STEPS[0].command("/tmp/out", "/suites", 50)
    assert command[1:4] == ["-m", "tools.gpu.device_steps", "probe"]
    assert command[-2:] == ["--conformance", "/suites"]


def test_plan_refuses_unknown_steps_and_an_overfull_budget(tmp_path):
    with pytest.raises(SystemExit, match="unknown step"):
        device_checks.main(["--dry-run", "--out", str(tmp_path), "--only", "probe,warp"])
    with pytest.raises(SystemExit, match="over the budget of 60"):
        device_checks.main(["--dry-run", "--out", str(tmp_path), "--budget", "60"])


def test_a_failing_step_is_recorded_and_the_next_one_runs(tmp_path, monkeypatch):
    """Without a GPU, probe fails (no driver) and the dry plan's next step still runs."""
    monkeypatch.setenv("OPENHLO_CUDA_DRIVER", "/nonexistent/libcuda.so.1")
    monkeypatch.setattr(device_checks, "STEPS", (
        device_checks.Step("probe", 60, "probe"),
        device_checks.Step("conformance", 60, "no suites given: fails at once")))
    monkeypatch.setattr(device_checks, "conformance_dir", lambda: None)
    assert device_checks.main(["--out", str(tmp_path), "--budget", "120"]) == 1
    results = json.loads((tmp_path / "results.json").read_text())
    assert [(s["name"], s["status"]) for s in results["steps"]] == [
        ("probe", "failed"), ("conformance", "failed")]
    assert "versions" in results["steps"][0]["result"]  # what it measured before failing
    log = (tmp_path / "steps.log").read_text()
    assert "no CUDA driver: /nonexistent/libcuda.so.1 not found" in log
    assert "no conformance suites" in log


@pytest.mark.parametrize("script", ["device_run.sh", "fetch_wheels.sh"])
def test_shell_scripts_parse(script):
    subprocess.run(["bash", "-n", os.path.join(HERE, script)], check=True)
