"""Passes keep programs' meaning: the interpreter gives the same results before
and after, on conformance programs whose own checks must keep passing."""
from __future__ import annotations

import numpy as np
import pytest

import stablehlo
from stablehlo.errors import OpenHLOError
from stablehlo.interpreter import evaluate
from stablehlo.text import split_input_file
from xla_core.passes import PIPELINES, PassContext, Pipeline, make_pipeline, parse_pass_list
from xla_core.testing.conformance import conformance_dir

TESTDATA = conformance_dir("testdata")
INTERPRET = conformance_dir("interpret")
pytestmark = pytest.mark.skipif(TESTDATA is None or INTERPRET is None,
                                reason="conformance suites not found")


def _multi_function_programs(count: int) -> list:
    """The smallest testdata programs with helper functions beyond inputs/expected."""
    if TESTDATA is None:
        return []
    found = [p for p in TESTDATA.glob("*.mlir")
             if p.read_text().count("func.func private") >= 3
             and "RUN-DISABLED" not in p.read_text()]
    found.sort(key=lambda p: (p.stat().st_size, p.name))
    return found[:count]


def _pipeline(spec: str) -> Pipeline:
    """Comma-separated registered pipelines and passes, run in order."""
    passes = []
    for item in spec.split(","):
        passes += make_pipeline(item).passes if item in PIPELINES.names() \
            else parse_pass_list(item)
    return Pipeline("t", passes)


# The shape of the cpu backend's pipeline (pjrt/plugins/cpu/optimize.py), from xla_core's parts.
_FUSING = "cpu-opt,fusion,dce,memory-schedule"


def _same(a, b) -> bool:
    return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
            and a.shape == b.shape and a.tobytes() == b.tobytes())


@pytest.mark.parametrize("path", _multi_function_programs(8), ids=lambda p: p.name)
@pytest.mark.parametrize("passes", ["inline", "dce", "inline,dce",
                                    "inline,algebraic-simplifier,constant-fold,cse,dce",
                                    "cpu-opt", _FUSING])
def test_testdata_results_unchanged(path, passes):
    text = path.read_text()
    try:
        before = evaluate(stablehlo.parse(text, str(path)))
    except OpenHLOError as exc:  # an interpreter gap, not a pass bug: nothing to compare
        pytest.skip(f"the interpreter cannot run the original program: {exc}")
    module = stablehlo.parse(text, str(path))
    _pipeline(passes).run(module, PassContext())
    after = evaluate(module)  # the program's check custom_calls run again here
    assert len(before) == len(after)
    assert all(_same(a, b) for a, b in zip(before, after))
    if "inline" in passes:
        assert [f.name for f in module.functions()] == ["main"]
        assert not any(op.name == "func.call" for op in module.walk())


# Side effects (infeed, outfeed, send/recv, collectives) must survive every pass; the rest
# exercise regions, control flow and constants.
_SUITES = ["infeed.mlir", "outfeed.mlir", "send_recv.mlir", "all_reduce.mlir", "while.mlir",
           "if.mlir", "case.mlir", "reduce.mlir", "sort.mlir", "map.mlir", "constant.mlir",
           "reduce_window.mlir", "scatter.mlir", "select_and_scatter.mlir"]


@pytest.mark.parametrize("name", _SUITES)
@pytest.mark.parametrize("passes", ["inline,dce", "cse", "inline,cse",
                                    "inline,algebraic-simplifier,constant-fold,cse,dce",
                                    "cpu-opt", _FUSING])
def test_interpreter_suite_checks_still_pass_after_passes(name, passes):
    chunks = [c for _, _, c in split_input_file((INTERPRET / name).read_text())
              if "func.func" in c]
    assert chunks
    ran = 0
    for chunk in chunks:
        try:
            evaluate(stablehlo.parse(chunk, name))
        except OpenHLOError:
            continue  # an interpreter gap, not a pass bug: nothing to compare
        module = stablehlo.parse(chunk, name)
        _pipeline(passes).run(module, PassContext())
        evaluate(module)  # raises CheckFailure if a check op saw a changed value
        ran += 1
    if not ran:
        pytest.skip(f"the interpreter runs no case of {name} yet")
