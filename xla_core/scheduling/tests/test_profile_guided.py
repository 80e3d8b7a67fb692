"""Profile-guided latency estimation, as XLA's profile_guided_latency_estimator_test: two
collectives and compute; the cost model says collective A takes longer, a profile of a run
says B does. The scheduler (generic-cpu) hides more compute under A without the profile and
under B with it, and the report lists the replaced estimates.
Also: option errors name the file."""
from __future__ import annotations

import json

import pytest

import stablehlo
from xla_core.cost import hardware
from xla_core.cost.profile import ProfileError, read_profile
from xla_core.passes import PassContext, parse_pass_list
from xla_core.scheduling import CostModelEstimator, MeasuredEstimator, schedule_report
from xla_core.testing.collective_text import SUM_OVER_PAIR as SUM

M, SMALL = "tensor<64x64xf32>", "tensor<4xf32>"
DOT = "contracting_dims = [1] x [0]"

# A (16 KiB) needs nothing; B (16 bytes) needs the tanh; the dots %0-%2 need neither, %d
# needs A. Collectives of one kind run one at a time (max-in-flight 1): B starts once A is
# done, so the compute before A's done hides A and the compute after B's start hides B.
PROGRAM = f"""func.func @main(%x: {M}, %y: {SMALL}, %w: {M}) -> ({M}, {SMALL}, {M}) {{
  %a = "stablehlo.all_reduce"(%x) {SUM} : ({M}) -> {M}
  %0 = stablehlo.dot_general %w, %w, {DOT} : ({M}, {M}) -> {M}
  %1 = stablehlo.dot_general %0, %w, {DOT} : ({M}, {M}) -> {M}
  %2 = stablehlo.dot_general %1, %w, {DOT} : ({M}, {M}) -> {M}
  %s = stablehlo.tanh %y : {SMALL}
  %b = "stablehlo.all_reduce"(%s) {SUM} : ({SMALL}) -> {SMALL}
  %d = stablehlo.dot_general %a, %w, {DOT} : ({M}, {M}) -> {M}
  %e = stablehlo.add %b, %b : {SMALL}
  return %d, %e, %2 : {M}, {SMALL}, {M}
}}"""


def write_trace(path, seconds: dict) -> None:
    """A Chrome trace with one run of each key of ``seconds`` on device 0 (as ``openhlo run
    --trace`` of the program as written would record: synchronous collectives)."""
    events, at = [], 0.0
    for key, s in seconds.items():
        category = "collective" if "all_reduce" in key else "compute"
        events.append({"name": key, "cat": category, "ph": "X", "ts": at, "dur": s * 1e6,
                       "pid": 0, "tid": 1, "args": {}})
        at += s * 1e6
    path.write_text(json.dumps({"traceEvents": events}))


def source_ops() -> list:
    return stablehlo.parse(PROGRAM, "pgle.mlir").lookup("main").body.operations[:-1]


def collectives() -> tuple:
    """(A, B): the source program's all-reduces."""
    a, b = [op for op in source_ops() if op.name == "stablehlo.all_reduce"]
    return a, b


def scheduled(profile: str = ""):
    """The program's async pairs scheduled (generic-cpu; a memory limit that never binds,
    as XLA's scheduler tests leave memory out)."""
    module = stablehlo.parse(PROGRAM, "pgle.mlir")
    given = f" profile={profile}" if profile else ""
    for p in parse_pass_list(f"async-collective-creator,latency-hiding-scheduler"
                             f"{{hardware=generic-cpu memory-limit=100000000{given}}}"):
        p.run(module, PassContext())
    return module


def dots_between(module, line: int) -> int:
    """How many dot_generals run between the start and the done of the collective written
    on ``line``."""
    ops = module.lookup("main").body.operations
    at = [i for i, op in enumerate(ops) if op.name.startswith("openhlo.async")
          and op.location.line == line]
    return sum(op.name == "stablehlo.dot_general" for op in ops[at[0] + 1:at[1]])


@pytest.fixture
def profile_path(tmp_path):
    a, b = collectives()
    path = tmp_path / "trace.json"
    # measured: A 1 ms, B 10 ms, every compute op 2 ms
    write_trace(path, {a.where(): 1e-3, b.where(): 10e-3,
                       **{op.where(): 2e-3 for op in source_ops()
                          if op.name != "stablehlo.all_reduce"}})
    return path


def test_cost_model_and_profile_disagree_on_which_collective_is_longer(profile_path):
    module = stablehlo.parse(PROGRAM, "pgle.mlir")
    a, b = [op for op in module.walk() if op.name == "stablehlo.all_reduce"]
    model = CostModelEstimator(hardware("generic-cpu"), module)
    assert model.collective_seconds(a) > model.collective_seconds(b)
    profile = read_profile(str(profile_path))
    assert profile.seconds(a.where()) < profile.seconds(b.where())


def test_without_profile_the_dots_hide_the_collective_the_model_thinks_longer():
    module = scheduled()
    a, b = collectives()
    # with the model's times two dots run before A's done; B starts after them and hides
    # the other two
    assert (dots_between(module, a.location.line), dots_between(module, b.location.line)) \
        == (2, 2)
    report = schedule_report(module, CostModelEstimator(hardware("generic-cpu"), module))
    assert report["estimator"] == "cost model" and "replaced" not in report


def test_with_profile_the_dots_hide_the_collective_measured_longer(profile_path):
    module = scheduled(str(profile_path))
    a, b = collectives()
    # A (1 ms) ends under the tanh (2 ms): B starts at once and all four dots hide it
    assert (dots_between(module, a.location.line), dots_between(module, b.location.line)) \
        == (0, 4)
    estimator = MeasuredEstimator.from_profile(
        CostModelEstimator(hardware("generic-cpu"), module), module,
        read_profile(str(profile_path)))
    report = json.loads(json.dumps(schedule_report(module, estimator)))
    assert report["estimator"] == "profile"
    second = report["collectives"][1]
    assert second["estimated_s"] == pytest.approx(10e-3)
    assert second["exposed_s"] == pytest.approx(10e-3 - 4 * 2e-3)
    replaced = {r["key"]: r for r in report["replaced"]}
    assert set(replaced) == {op.where() for op in source_ops()}
    assert replaced[a.where()]["measured_s"] == pytest.approx(1e-3)
    assert replaced[b.where()]["measured_s"] == pytest.approx(10e-3)
    assert replaced[a.where()]["estimated_s"] > replaced[b.where()]["estimated_s"]


def test_unmeasured_ops_keep_their_estimates(tmp_path):
    module = stablehlo.parse(PROGRAM, "pgle.mlir")
    dot, other = [op for op in module.walk() if op.name == "stablehlo.dot_general"][:2]
    path = tmp_path / "trace.json"
    write_trace(path, {dot.where(): 5e-3})
    model = CostModelEstimator(hardware("generic-cpu"), module)
    estimator = MeasuredEstimator.from_profile(model, module, read_profile(str(path)))
    assert estimator.op_seconds(dot) == 5e-3
    assert estimator.op_seconds(other) == model.op_seconds(other)


@pytest.mark.parametrize("content, message", [
    (None, "cannot read trace .*missing.json"),
    ("{not json", "trace .*missing.json is not JSON"),
    ('{"traceEvents": [{"ph": "X", "cat": "compute", "name": "k", "ts": 0, "dur": "x"}]}',
     "missing.json: event 0 \\(k\\): 'dur' must be a number"),
])
def test_a_missing_or_malformed_profile_is_an_error_naming_it(tmp_path, content, message):
    path = tmp_path / "missing.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ProfileError, match=message):
        scheduled(str(path))
