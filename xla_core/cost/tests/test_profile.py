"""xla_core.cost.profile: keys of instructions, Chrome traces written, merged and read back,
malformed traces refused with the file and entry named, and measured times set against the
cost model's estimates."""
from __future__ import annotations

import json

import pytest

from stablehlo.text import parse_module
from xla_core.cost import hardware, op_cost, roofline_seconds
from xla_core.cost.profile import (
    MeasuredProfile,
    OpEvent,
    ProfileError,
    chrome_trace,
    compare_with_estimates,
    merge_chrome_traces,
    op_keys,
    profile_from_trace,
    profile_keys,
    read_profile,
)

# A callee is inlined; the two multiplies get one place (parse_program), as ops a pass built
# do.
PROGRAM = """func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %a : tensor<4xf32>
  %1 = stablehlo.multiply %0, %0 : tensor<4xf32>
  %2 = stablehlo.multiply %1, %1 : tensor<4xf32>
  %3 = func.call @twice(%2) : (tensor<4xf32>) -> tensor<4xf32>
  return %3 : tensor<4xf32>
}
func.func private @twice(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %x, %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


def parse_program():
    module = parse_module(PROGRAM, "p.mlir")
    for op in module.lookup("main").body.operations[1:3]:
        op.location = "f.py:7:1"
    return module


def test_profile_keys_number_shared_places_in_order():
    assert profile_keys(["a", "b", "a", "c", "a"]) == ["a #1", "b", "a #2", "c", "a #3"]
    assert profile_keys([]) == []


def test_op_keys_follow_calls_and_number_shared_places():
    module = parse_program()
    keys = op_keys(module, "main")
    assert list(keys) == ["p.mlir:2:3: 'stablehlo.add'",
                          "f.py:7:1: 'stablehlo.multiply' #1",
                          "f.py:7:1: 'stablehlo.multiply' #2",
                          "p.mlir:9:3: 'stablehlo.add'"]
    assert [op.name for op in keys.values()] == [
        "stablehlo.add", "stablehlo.multiply", "stablehlo.multiply", "stablehlo.add"]


def event(name, device, start_ns, duration_ns, category="compute"):
    return OpEvent(name, category, device, device, "executor", start_ns, duration_ns,
                   {"op": "stablehlo.add"})


def test_merged_traces_share_one_time_axis():
    # Process 1's part starts 5 us after process 0's: its events keep that distance.
    first = chrome_trace([event("x", 0, 1_000_000, 2000)], {0: "device 0"})
    second = chrome_trace([event("x", 1, 1_005_000, 3000)], {1: "device 1"})
    merged = merge_chrome_traces([second, first])
    complete = {e["pid"]: e for e in merged["traceEvents"] if e["ph"] == "X"}
    assert complete[0]["ts"] == 0.0 and complete[1]["ts"] == 5.0
    assert complete[0]["dur"] == 2.0 and complete[1]["dur"] == 3.0
    assert merged["otherData"]["origin_ns"] == 1_000_000


def test_reader_takes_medians_and_skips_other_events(tmp_path):
    trace = chrome_trace([event("x", 0, 0, 1000), event("x", 1, 0, 3000),
                          event("x", 2, 0, 8000), event("ar", 0, 9000, 500, "collective")],
                         {0: "d0", 1: "d1", 2: "d2"})
    # Other tools' events: a Python span, an instant event, a counter.
    trace["traceEvents"] += [{"name": "span", "cat": "python", "ph": "X", "ts": 0, "dur": 9},
                             {"name": "mark", "ph": "i", "ts": 3, "pid": 0, "tid": 0},
                             {"name": "mem", "ph": "C", "ts": 3, "pid": 0, "args": {"v": 1}}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(trace))
    measured = read_profile(str(path))
    assert measured.keys() == ["x", "ar"]
    assert measured.seconds("x") == pytest.approx(3e-6)
    assert measured.seconds("ar") == pytest.approx(0.5e-6)
    assert measured.categories == {"x": "compute", "ar": "collective"}
    assert measured.seconds("missing") is None
    # The JSON-array form reads the same.
    array = profile_from_trace(trace["traceEvents"], "array")
    assert array.durations == measured.durations


@pytest.mark.parametrize("content, message", [
    ("{not json", "is not JSON"),
    ('{"events": []}', "'traceEvents' array"),
    ('[3]', "event 0 is a int"),
    ('[{"ph": "X", "cat": "compute", "ts": 0, "dur": 1}]', "event 0 has no name"),
    ('[{"ph": "M", "name": "m"}, {"name": "a", "ph": "X", "cat": "compute", "ts": "0", '
     '"dur": 1}]', "event 1 (a): 'ts' must be a number"),
    ('[{"name": "a", "ph": "X", "cat": "compute", "ts": 0, "dur": -1}]',
     "event 0 (a): negative duration"),
    ('[{"name": "a", "ph": "X", "cat": "compute", "ts": 0, "dur": 1}, '
     '{"name": "a", "ph": "X", "cat": "collective", "ts": 2, "dur": 1}]',
     "event 1 (a) is 'collective'"),
])
def test_malformed_traces_are_refused_naming_file_and_entry(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ProfileError) as info:
        read_profile(str(path))
    assert str(path) in str(info.value) and message in str(info.value)


def test_missing_trace_file_is_named(tmp_path):
    with pytest.raises(ProfileError, match="cannot read trace .*nothing.json"):
        read_profile(str(tmp_path / "nothing.json"))


def test_comparison_names_replaced_unmeasured_and_unmatched_ops():
    module = parse_program()
    keys = list(op_keys(module, "main"))
    measured = MeasuredProfile("handmade", {keys[0]: [2e-3, 4e-3, 9e-3],
                                            keys[2]: [1e-6],
                                            "elsewhere.mlir:1:1: 'stablehlo.tanh'": [1.0]})
    hw = hardware("generic-cpu")
    comparison = compare_with_estimates(module, measured, hw)
    assert [r.key for r in comparison.replaced] == [keys[0], keys[2]]
    add = comparison.replaced[0]
    expected = roofline_seconds(op_cost(module.lookup("main").body.operations[0]), hw)
    assert add.op == "stablehlo.add" and add.measured_s == 4e-3
    assert add.estimated_s == pytest.approx(expected)
    assert add.ratio == pytest.approx(4e-3 / expected)
    assert comparison.unmeasured == [keys[1], keys[3]]
    assert comparison.unmatched == ["elsewhere.mlir:1:1: 'stablehlo.tanh'"]
    report = comparison.report()
    assert keys[0] in report and "not measured" in report and "elsewhere.mlir" in report
    # A scheduler's own estimator is used as given.
    custom = compare_with_estimates(module, measured, hw, estimate=lambda op: 1e-3)
    assert [r.ratio for r in custom.replaced] == pytest.approx([4.0, 1e-3])
