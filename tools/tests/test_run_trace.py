"""``openhlo run --trace``: a Chrome trace event file of one run, every instruction on every
device (one process, several devices, several processes), read back by
xla_core.cost.profile."""
from __future__ import annotations

import json
import statistics
from collections import Counter

import pytest

from pjrt.plugins.cpu.native_module import native
from stablehlo.text import parse_module
from xla_core.cost import hardware
from xla_core.cost.profile import compare_with_estimates, read_profile
from tools.tests.helpers import SHARDED_DOT_PROGRAM, run_cli

# Three ops, one per line; at --opt-level 0 each runs as its own instruction.
PROGRAM = """func.func @main(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = stablehlo.add %a, %b : tensor<4x4xf32>
  %1 = stablehlo.dot_general %0, %b, contracting_dims = [1] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %2 = stablehlo.tanh %1 : tensor<4x4xf32>
  return %2 : tensor<4x4xf32>
}
"""


def expected_names(path, text: str) -> set[str]:
    """``file:line:col: 'op'`` of each op line of ``text``, read off the text itself."""
    names = set()
    for number, line in enumerate(text.splitlines(), 1):
        if "= stablehlo." in line:
            op = line.split("= ", 1)[1].split(" ", 1)[0]
            names.add(f"{path}:{number}:{len(line) - len(line.lstrip()) + 1}: '{op}'")
    return names


def check_chrome_format(trace) -> list[dict]:
    """The complete events of ``trace`` after checking what Chrome's trace viewer needs."""
    assert isinstance(trace, dict) and isinstance(trace["traceEvents"], list)
    complete = []
    for event in trace["traceEvents"]:
        assert event["ph"] in ("X", "M"), event
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int)
        if event["ph"] == "M":
            assert event["name"] in ("process_name", "process_sort_index", "thread_name")
            continue
        assert isinstance(event["name"], str) and event["cat"] in ("compute", "collective")
        for key in ("ts", "dur"):
            assert isinstance(event[key], (int, float)) and event[key] >= 0, event
        assert isinstance(event["args"]["op"], str)
        complete.append(event)
    labelled = {e["pid"] for e in trace["traceEvents"]
                if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]) for e in trace["traceEvents"]
               if e["ph"] == "M" and e["name"] == "thread_name"}
    assert labelled == {e["pid"] for e in complete}
    assert threads == {(e["pid"], e["tid"]) for e in complete}
    return complete


def assert_no_overlap_per_thread(events: list[dict]) -> None:
    by_thread: dict = {}
    for e in events:
        by_thread.setdefault((e["pid"], e["tid"]), []).append(e)
    for runs in by_thread.values():
        runs.sort(key=lambda e: e["ts"])
        for before, after in zip(runs, runs[1:]):
            # 1 ns of slack: ts and dur are rounded to nanoseconds separately
            assert before["ts"] + before["dur"] <= after["ts"] + 1e-3, (before, after)



def test_one_device_trace_names_every_op_once(capsys, tmp_path):
    path = tmp_path / "p.mlir"
    path.write_text(PROGRAM)
    out = tmp_path / "trace.json"
    r = run_cli(capsys, "run", path, "--opt-level", "0", "--trace", out)
    assert r.code == 0, r.err
    assert r.out.startswith("out0: tensor<4x4xf32>")  # the results are still printed
    events = check_chrome_format(json.loads(out.read_text()))
    assert Counter(e["name"] for e in events) == Counter(expected_names(path, PROGRAM))
    assert {e["pid"] for e in events} == {0}
    assert {e["args"]["op"] for e in events} == {
        "stablehlo.add", "stablehlo.dot_general", "stablehlo.tanh"}
    assert all(e["args"]["results"] == ["tensor<4x4xf32>"] for e in events)
    assert_no_overlap_per_thread(events)


def test_trace_read_back_and_compared_with_estimates(capsys, tmp_path):
    path = tmp_path / "p.mlir"
    path.write_text(PROGRAM)
    out = tmp_path / "trace.json"
    r = run_cli(capsys, "run", path, "--opt-level", "0", "--trace", out, "--trace-cold")
    assert r.code == 0, r.err
    events = [e for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "X"]
    measured = read_profile(str(out))
    assert set(measured.keys()) == expected_names(path, PROGRAM)
    for e in events:
        assert measured.seconds(e["name"]) == pytest.approx(e["dur"] * 1e-6)
    module = parse_module(PROGRAM, str(path))
    comparison = compare_with_estimates(module, measured, hardware("generic-cpu"))
    assert {r.key for r in comparison.replaced} == expected_names(path, PROGRAM)
    assert comparison.unmeasured == [] and comparison.unmatched == []
    report = comparison.report()
    assert all(name in report for name in expected_names(path, PROGRAM))


def test_several_devices_each_run_every_op_and_collective(capsys, tmp_path):
    path = tmp_path / "p.mlir"
    path.write_text(SHARDED_DOT_PROGRAM)
    out = tmp_path / "trace.json"
    r = run_cli(capsys, "run", path, "--num-devices", "4", "--trace", out)
    assert r.code == 0, r.err
    events = check_chrome_format(json.loads(out.read_text()))
    assert {e["pid"] for e in events} == {0, 1, 2, 3}
    per_device = {pid: Counter(e["name"] for e in events if e["pid"] == pid)
                  for pid in range(4)}
    names = per_device[0]
    assert all(counts == names for counts in per_device.values())
    assert set(names.values()) == {1}  # each op once per device in one run
    collectives = [e for e in events if e["cat"] == "collective"]
    # The contracting dimension is sharded: the partial products are summed by a collective
    # on every device, of the 8x8 f32 partial result (256 bytes); ids exchange nothing.
    assert {e["pid"] for e in collectives} == {0, 1, 2, 3}
    assert all(e["args"]["op"] == "stablehlo.all_reduce" and e["args"]["bytes"] == 256
               for e in collectives)
    assert_no_overlap_per_thread(events)
    measured = read_profile(str(out))
    for name in names:
        durations = [e["dur"] * 1e-6 for e in events if e["name"] == name]
        assert measured.seconds(name) == pytest.approx(statistics.median(durations))


@pytest.mark.skipif(not native().HAVE_GLOO, reason="built without gloo")
def test_two_processes_merge_into_one_trace_of_four_devices(capsys, tmp_path):
    path = tmp_path / "p.mlir"
    path.write_text(SHARDED_DOT_PROGRAM)
    out = tmp_path / "trace.json"
    r = run_cli(capsys, "run", path, "--num-processes", "2", "--num-devices", "2",
                "--trace", out)
    assert r.code == 0, r.err
    trace = json.loads(out.read_text())
    events = check_chrome_format(trace)
    assert {e["pid"] for e in events} == {0, 1, 2, 3}
    labels = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
              if e["ph"] == "M" and e["name"] == "process_name"}
    assert labels == {0: "device 0 (process 0)", 1: "device 1 (process 0)",
                      2: "device 2 (process 1)", 3: "device 3 (process 1)"}
    per_device = [Counter(e["name"] for e in events if e["pid"] == pid) for pid in range(4)]
    assert all(counts == per_device[0] for counts in per_device)
    assert {e["pid"] for e in events if e["cat"] == "collective"} == {0, 1, 2, 3}
    assert_no_overlap_per_thread(events)


def test_trace_flag_errors(capsys, tmp_path):
    path = tmp_path / "p.mlir"
    path.write_text(PROGRAM)
    r = run_cli(capsys, "run", path, "--trace", tmp_path / "t.json", "--profile")
    assert r.code != 0 and "choose one" in r.err
    r = run_cli(capsys, "run", path, "--trace-cold")
    assert r.code != 0 and "--trace-cold needs --trace" in r.err
    r = run_cli(capsys, "run", path, "--trace", tmp_path / "t.json", "--backend", "interpreter")
    assert r.code != 0 and "--trace needs the cpu backend" in r.err
    r = run_cli(capsys, "run", path, "--trace", tmp_path / "missing" / "t.json")
    assert r.code != 0 and "cannot write" in r.err and "missing" in r.err
