"""The pass interface: pass-list parsing, options, pipelines and their instruments."""
from __future__ import annotations

import io
from dataclasses import dataclass

import pytest

import stablehlo
from stablehlo.text import print_module
from xla_core.passes import (PASSES, PIPELINES, Pass, PassContext, PassError, Pipeline,
                             make_pipeline, parse_pass_list)

PROGRAM = """
func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
  %0 = func.call @double(%arg0) : (tensor<2xf32>) -> tensor<2xf32>
  %1 = stablehlo.negate %arg0 : tensor<2xf32>
  func.return %0 : tensor<2xf32>
}
func.func private @double(%arg0: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %arg0, %arg0 : tensor<2xf32>
  func.return %0 : tensor<2xf32>
}
"""


@dataclass(frozen=True)
class _CountingPass(Pass):
    """Test pass with one option of each kind; changes nothing."""
    name = "test-counting"
    limit: int = 3
    ratio: float = 0.5
    strict: bool = False
    label: str = "x"

    def run(self, module, ctx) -> bool:
        return False


@dataclass(frozen=True)
class _BreakingPass(Pass):
    """Test pass that leaves the IR invalid: it drops @main's terminator."""
    name = "test-breaking"

    def run(self, module, ctx) -> bool:
        module.lookup("main").body.operations.pop()
        return True


@pytest.fixture
def test_passes(monkeypatch):
    monkeypatch.setattr(PASSES, "_entries", dict(PASSES._entries))
    PASSES.register("test-counting", _CountingPass)
    PASSES.register("test-breaking", _BreakingPass)


def test_parse_pass_list_with_typed_options(test_passes):
    passes = parse_pass_list("inline, test-counting{limit=7 ratio=0.25 strict=true label=abc},dce")
    assert [p.name for p in passes] == ["inline", "test-counting", "dce"]
    assert passes[1] == _CountingPass(limit=7, ratio=0.25, strict=True, label="abc")
    assert passes[1].spec() == "test-counting{limit=7 ratio=0.25 strict=true label=abc}"


@pytest.mark.parametrize("spec, message", [
    ("no-such-pass", "unknown pass 'no-such-pass'; known: "),
    ("test-counting{nope=1}", "has no option 'nope'; options: label, limit, ratio, strict"),
    ("test-counting{limit=many}", "option 'limit' expects int"),
    ("test-counting{strict=maybe}", "option 'strict' expects bool"),
    ("test-counting{limit=1", "unbalanced '{'"),
    ("inline,,dce", "empty pass name"),
    ("test-counting{limit}", "is not key=value"),
])
def test_bad_pass_lists_are_clear_errors(test_passes, spec, message):
    with pytest.raises(PassError) as err:
        parse_pass_list(spec)
    assert message in str(err.value)


def test_unknown_pass_error_lists_known_passes():
    with pytest.raises(PassError) as err:
        parse_pass_list("inlin")
    assert "dce" in str(err.value) and "inline" in str(err.value)


def test_pipeline_runs_passes_in_order_and_records_them():
    module = stablehlo.parse(PROGRAM)
    ctx = PassContext(timing=True)
    changed = Pipeline("p", parse_pass_list("inline,dce")).run(module, ctx)
    assert changed
    assert [(r.name, r.changed) for r in ctx.records] == [("inline", True), ("dce", True)]
    assert [f.name for f in module.functions()] == ["main"]
    ops = [op.name for op in module.lookup("main").body.operations]
    assert ops == ["stablehlo.add", "func.return"]
    report = ctx.timing_report()
    assert "inline" in report and "dce" in report and "total" in report


def test_disabled_pass_is_skipped():
    module = stablehlo.parse(PROGRAM)
    ctx = PassContext(disabled=frozenset({"inline"}))
    Pipeline("p", parse_pass_list("inline,dce")).run(module, ctx)
    assert [(r.name, r.skipped) for r in ctx.records] == [("inline", True), ("dce", False)]
    # dce alone removes the negate but keeps the call (and so @double).
    assert [f.name for f in module.functions()] == ["main", "double"]
    assert "stablehlo.negate" not in print_module(module)


def test_verifier_runs_after_every_pass_and_names_the_pass(test_passes):
    module = stablehlo.parse(PROGRAM)
    with pytest.raises(PassError) as err:
        Pipeline("p", parse_pass_list("test-breaking,dce")).run(module, PassContext())
    assert "test-breaking" in str(err.value)


def test_print_after_all_dumps_each_pass():
    module = stablehlo.parse(PROGRAM)
    dump = io.StringIO()
    Pipeline("p", parse_pass_list("inline,dce")).run(
        module, PassContext(print_after_all=True, dump=dump))
    text = dump.getvalue()
    assert text.index("IR Dump After inline") < text.index("IR Dump After dce")
    after_inline = text.split("IR Dump After dce")[0]
    assert "stablehlo.negate" in after_inline and "call @double" not in after_inline


def test_default_pipeline_is_registered():
    assert "default" in PIPELINES
    assert make_pipeline("default").spec() == "inline,algebraic-simplifier,constant-fold,cse,dce"
    with pytest.raises(PassError, match="unknown pipeline"):
        make_pipeline("nope")
