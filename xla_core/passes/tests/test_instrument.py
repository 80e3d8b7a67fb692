"""The compiler's instruments: a pipeline run inside a dumped program writes the module after
each pass (and the fusion pass its decisions); a traced run records one event per pipeline
and pass, saved as Chrome trace-event JSON."""
import json

import pytest

import stablehlo
from stablehlo.instrument import dump, trace
from xla_core.passes import PassContext, Pipeline, make_pipeline, parse_pass_list

PROGRAM = """
module @two_tanh {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.tanh %x : tensor<4xf32>
    %1 = stablehlo.tanh %0 : tensor<4xf32>
    return %1 : tensor<4xf32>
  }
}
"""


def _fusing_pipeline() -> Pipeline:
    """A pipeline with fusion in it, the shape of a backend's (the cpu backend's own is
    registered by pjrt, which xla_core's tests do not import)."""
    return Pipeline("fusing", make_pipeline("cpu-opt").passes + parse_pass_list(
        "fusion,dce,memory-schedule"))


@pytest.fixture
def dumping(tmp_path):
    dump.configure(tmp_path)
    yield tmp_path
    dump.configure(None)


@pytest.fixture
def tracing(tmp_path):
    recorder = trace.start(str(tmp_path / "trace.json"))
    yield recorder
    trace.stop()


def test_pipeline_dumps_the_module_after_every_pass_in_order(dumping):
    module = stablehlo.parse(PROGRAM)
    pipeline = _fusing_pipeline()
    with dump.program(dump.program_name(PROGRAM), PROGRAM) as program_dump:
        assert dump.current() is program_dump
        pipeline.run(module, PassContext())
    assert dump.current() is None
    files = sorted(p.name for p in (dumping / "two_tanh").iterdir())
    assert files[0] == "000.input.mlir"
    passes = [p.name for p in pipeline.passes]
    after_pass = [f.split(".", 1)[1].rsplit(".", 1)[0] for f in files if f.endswith(".mlir")]
    assert after_pass == ["input"] + [f"fusing.{name}" for name in passes]
    assert [int(f.split(".")[0]) for f in files] == list(range(len(files)))
    # The file after the fusion pass holds the fused module; the decisions come just before.
    fused = next(f for f in files if f.endswith(".fusing.fusion.mlir"))
    explain = next(f for f in files if f.endswith(".fusion.explain.txt"))
    assert int(explain.split(".")[0]) == int(fused.split(".")[0]) - 1
    assert "stablehlo.composite" in (dumping / "two_tanh" / fused).read_text()
    assert "made @fused_loop_" in (dumping / "two_tanh" / explain).read_text()
    assert (dumping / "two_tanh" / files[0]).read_text().strip() == PROGRAM.strip()


def test_a_program_text_is_named_by_its_module_line():
    module = '// a comment {\n#alias = "x"\nmodule @jit_f attributes {a = 1} {\n}\n'
    assert dump.program_name(module) == "jit_f"
    assert dump.program_name('module @"jit.g" {\n}\n') == "jit.g"
    assert dump.program_name("func.func @main() {\n  return\n}\nmodule @late {}\n") is None
    assert dump.program_name(stablehlo.parse(PROGRAM)) == "two_tanh"


def test_programs_without_a_name_get_a_hash_and_taken_names_a_suffix(dumping):
    unnamed = "func.func @main() -> () {\n  return\n}\n"
    for _ in range(2):
        with dump.program(dump.program_name(unnamed), unnamed):
            pass
    with dump.program("two_tanh", PROGRAM), dump.program("two_tanh", PROGRAM):
        pass
    names = sorted(p.name for p in dumping.iterdir())
    assert names[2:] == ["two_tanh", "two_tanh-2"]
    assert names[0].startswith("module-") and names[1] == names[0] + "-2"


def test_nothing_is_dumped_when_not_configured(tmp_path):
    dump.configure(None)
    with dump.program("two_tanh", PROGRAM) as program_dump:
        _fusing_pipeline().run(stablehlo.parse(PROGRAM), PassContext())
    assert program_dump is None and list(tmp_path.iterdir()) == []


def test_trace_has_one_complete_event_per_pipeline_and_pass(tracing, tmp_path):
    pipeline = _fusing_pipeline()
    pipeline.run(stablehlo.parse(PROGRAM), PassContext())
    with trace.span("mine", "test", answer=42) as span:
        span.set(later="yes")
    path = trace.flush()
    events = json.loads(open(path).read())["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    for e in complete:
        assert {"name", "cat", "pid", "tid", "ts", "dur"} <= set(e) and e["dur"] >= 0
    [outer] = [e for e in complete if e["name"] == "pipeline fusing"]
    passes = [e for e in complete if e["cat"] == "pass"]
    assert [e["name"] for e in passes] == [p.name for p in pipeline.passes]
    for e in passes:  # nested inside the pipeline's event
        assert outer["ts"] <= e["ts"] and e["ts"] + e["dur"] <= outer["ts"] + outer["dur"]
        assert e["args"]["pipeline"] == "fusing"
    [mine] = [e for e in complete if e["name"] == "mine"]
    assert mine["args"] == {"answer": 42, "later": "yes"}


def test_stop_writes_the_file_and_stops_recording(tmp_path):
    trace.start(str(tmp_path / "t.json"))
    with trace.span("kept", "test"):
        pass
    assert trace.stop() == str(tmp_path / "t.json")
    assert trace.span("dropped", "test") is trace.NO_SPAN
    names = [e["name"] for e in json.load(open(tmp_path / "t.json"))["traceEvents"]]
    assert "kept" in names and "dropped" not in names
