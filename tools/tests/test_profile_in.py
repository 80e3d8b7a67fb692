"""Feeding a profile back: a trace that ``openhlo run --trace`` recorded of a partitioned
program names every op of the program as it ran (keys are the user program's places, so no
key is left unmatched); the compile option ``profile`` / ``--profile-in`` gives it to the
scheduler (same results, a report that says which estimates it replaced, the profile's
content in the compilation cache key); a missing or malformed file is an error naming it."""
from __future__ import annotations

import json

import numpy as np
import pytest

import pjrt
import stablehlo
from pjrt.api import CompileOptions
from xla_core.cost.profile import ProfileError, match_profile, read_profile
from tools.tests.helpers import SHARDED_DOT_PROGRAM, run_cli


@pytest.fixture(autouse=True)
def _no_program_cache(monkeypatch):
    # The cache key leaves locations out: a hit would run (and trace) the program with the
    # places of another test's file.
    monkeypatch.setenv("OPENHLO_CPU_CACHE", "0")


@pytest.fixture
def recorded(capsys, tmp_path):
    """(program path, trace path) of one traced run on 4 devices."""
    program = tmp_path / "p.mlir"
    program.write_text(SHARDED_DOT_PROGRAM)
    trace = tmp_path / "trace.json"
    r = run_cli(capsys, "run", program, "--num-devices", "4", "--trace", trace)
    assert r.code == 0, r.err
    return program, trace


def compiled(program, options: dict | None = None):
    client = pjrt.make_client("cpu", num_devices=4)
    # parsed with its path, as ``openhlo run`` does: the places are the file's
    return client.compile(stablehlo.parse(program.read_text(), str(program)), CompileOptions(
        num_partitions=4, env_option_overrides=dict(options or {})))


def test_trace_of_a_partitioned_program_matches_every_op(recorded):
    program, trace = recorded
    module = compiled(program).optimized_module  # the per-device program that ran
    match = match_profile(module, read_profile(str(trace)))
    assert match.unmatched == [] and match.unmeasured == []
    # every key is a place of the user's program, not of the partitioner's source
    assert match.measured and all(m.key.startswith(f"{program}:") for m in match.measured)
    ops = {m.op.name for m in match.measured}
    assert {"stablehlo.dot_general", "stablehlo.all_reduce", "stablehlo.tanh"} <= ops


def test_profile_option_keeps_results_and_keys_the_cache(recorded, monkeypatch):
    program, trace = recorded
    x = np.linspace(-1, 1, 8 * 16, dtype=np.float32).reshape(8, 16)
    y = np.linspace(1, -1, 16 * 8, dtype=np.float32).reshape(16, 8)
    plain = compiled(program)
    guided = compiled(program, {"profile": str(trace)})
    np.testing.assert_array_equal(np.asarray(plain.execute_global(x, y)[0]),
                                  np.asarray(guided.execute_global(x, y)[0]))
    client = pjrt.make_client("cpu", num_devices=4)
    monkeypatch.setenv("OPENHLO_CPU_CACHE", "1")  # the persistent cache's key

    def identity(path):
        return client._compiler(CompileOptions(num_partitions=4, env_option_overrides={
            "profile": str(path)})).identity
    other = trace.with_name("other.json")
    other.write_text(trace.read_text())
    assert identity(trace) == identity(other)  # the content is keyed, not the path
    data = json.loads(trace.read_text())
    data["traceEvents"] = [e for e in data["traceEvents"] if "tanh" not in e["name"]]
    other.write_text(json.dumps(data))
    assert identity(trace) != identity(other)
    without = client._compiler(CompileOptions(num_partitions=4)).identity
    assert without not in (identity(trace), identity(other))


def test_opt_schedule_report_with_profile_in(capsys, recorded, tmp_path):
    program, trace = recorded
    report_path = tmp_path / "report.json"
    r = run_cli(capsys, "opt", program, "--pipeline=spmd", "--num-devices", "4",
                "--schedule-report", report_path, "--profile-in", trace)
    assert r.code == 0, r.err
    report = json.loads(report_path.read_text())
    assert report["estimator"] == "profile"
    measured = read_profile(str(trace))
    keys = {r["key"] for r in report["replaced"]}
    assert keys <= set(measured.keys()) and any("all_reduce" in k or "async_start" in k
                                                for k in keys)
    for entry in report["replaced"]:
        assert entry["measured_s"] == pytest.approx(measured.seconds(entry["key"]))
    r = run_cli(capsys, "opt", program, "--pipeline=spmd", "--num-devices", "4",
                "--schedule-report", report_path)
    assert json.loads(report_path.read_text())["estimator"] == "cost model"


def test_run_profile_in_runs_with_the_profile(capsys, recorded):
    program, trace = recorded
    r = run_cli(capsys, "run", program, "--num-devices", "4", "--profile-in", trace)
    assert r.code == 0, r.err and r.out.startswith("out0: tensor<8x8xf32>")


@pytest.mark.parametrize("content, message", [
    (None, "env_option_overrides\\['profile'\\]: cannot read trace .*bad.json"),
    ("[1, 2]", "env_option_overrides\\['profile'\\]: trace .*bad.json: event 0 is a int"),
])
def test_a_missing_or_malformed_profile_fails_the_compile_naming_it(tmp_path, content,
                                                                     message):
    program = tmp_path / "p.mlir"
    program.write_text(SHARDED_DOT_PROGRAM)
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    with pytest.raises(ProfileError, match=message):
        compiled(program, {"profile": str(bad)})


def test_openhlo_profile_environment_variable(monkeypatch, tmp_path):
    program = tmp_path / "p.mlir"
    program.write_text(SHARDED_DOT_PROGRAM)
    monkeypatch.setenv("OPENHLO_PROFILE", str(tmp_path / "absent.json"))
    with pytest.raises(ProfileError, match="OPENHLO_PROFILE: cannot read trace .*absent.json"):
        compiled(program)


def test_cli_profile_in_errors(capsys, tmp_path):
    program = tmp_path / "p.mlir"
    program.write_text(SHARDED_DOT_PROGRAM)
    r = run_cli(capsys, "run", program, "--num-devices", "4", "--profile-in",
                tmp_path / "absent.json")
    assert r.code != 0 and "absent.json" in r.err
    r = run_cli(capsys, "opt", program, "--profile-in", tmp_path / "absent.json")
    assert r.code != 0 and "--schedule-report" in r.err


def test_check_estimates_pairs_each_collective_with_its_estimate(tmp_path):
    from tools.check_estimates import compare, report
    from xla_core.cost import hardware
    from xla_core.scheduling import CostModelEstimator
    program = tmp_path / "p.mlir"
    program.write_text(SHARDED_DOT_PROGRAM)
    exe = compiled(program)
    inputs = [np.ones((8, 16), np.float32), np.ones((16, 8), np.float32)]
    result = compare(exe, inputs, "generic-cpu", repeat=2)
    # 4 devices on generic-cpu's 4 cores: a core each, estimates unstretched
    assert result["core_sharing"] == 1.0
    model = CostModelEstimator(hardware("generic-cpu"), exe.optimized_module)
    collectives = [op for op in exe.optimized_module.walk()
                   if op.name == "stablehlo.all_reduce"]
    assert len(result["collectives"]) == len(collectives) == 1
    entry = result["collectives"][0]
    assert entry["estimated_s"] == model.collective_seconds(collectives[0])
    assert entry["ratio"] == entry["measured_s"] / entry["estimated_s"] > 0
    assert result["step"]["measured_s"] > 0 and result["step"]["estimated_s"] > 0
    assert 0 <= entry["wait_s"] <= max(result["step"]["measured_s"], entry["measured_s"])
    assert "within a factor of 2" in report(result)


def test_rendezvous_waits_are_each_device_s_wait_for_the_last_of_its_group():
    from tools.check_estimates import rendezvous_waits
    from xla_core.cost.profile import OpEvent

    def event(name, category, device, start_us, duration_us=5):
        return OpEvent(name, category, device, 0, "", start_us * 1000, duration_us * 1000)

    run = [event("ar", "collective", 0, 10), event("ar", "collective", 1, 13),
           event("ar", "collective", 2, 11),
           # a second occurrence of the same key (a loop): device 1 is first this time
           event("ar", "collective", 0, 50), event("ar", "collective", 1, 40),
           event("ar", "collective", 2, 50),
           event("dot", "compute", 0, 0), event("dot", "compute", 1, 9)]
    waits = rendezvous_waits(run, {})
    assert set(waits) == {"ar"}
    assert sorted(waits["ar"]) == pytest.approx(sorted([3e-6, 0.0, 2e-6, 0.0, 10e-6, 0.0]))
    # in groups {0, 2} and {1}: device 0 waits for 2 only, device 1 for nobody
    waits = rendezvous_waits(run, {"ar": [[0, 2], [1]]})
    assert sorted(waits["ar"]) == pytest.approx(sorted([1e-6, 0.0, 0.0, 0.0, 0.0, 0.0]))
