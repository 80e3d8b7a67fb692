"""The compile driver with a backend made of hooks: what runs, in which order, on what copy,
and what comes back (the runtime's use of it is tested through pjrt's contract tests)."""
import logging
from dataclasses import dataclass
from typing import ClassVar

import pytest

import stablehlo
from stablehlo.errors import VerificationError
from stablehlo.text import print_module
from xla_core.compile import (Backend, CompileRequest, ShardingError, cache_key,
                              compile_module, entry_shardings, load_compiled)
from xla_core.passes import PIPELINES, Pass, Pipeline, parse_pass_list

# Constant folding turns the add into one constant: the pipeline visibly ran.
FOLDABLE = """
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %a = stablehlo.constant dense<1.0> : tensor<2xf32>
  %b = stablehlo.add %a, %a : tensor<2xf32>
  %c = stablehlo.multiply %x, %b : tensor<2xf32>
  return %c : tensor<2xf32>
}
"""

# Two pieces over "x": each device holds half of the argument and of the result.
SHARDED = """
sdy.mesh @mesh = <["x"=2]>
func.func public @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>})
    -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) {
  %0 = stablehlo.negate %arg0 : tensor<8xf32>
  return %0 : tensor<8xf32>
}
"""


@dataclass
class Options:
    """The fields of the runtime's CompileOptions that the cache key reads."""
    entry: str = None
    num_replicas: int = 1
    num_partitions: int = 1
    env_option_overrides: dict = None

    def __post_init__(self):
        self.env_option_overrides = self.env_option_overrides or {}


def _request(num_partitions: int = 1) -> CompileRequest:
    return CompileRequest(Options(num_partitions=num_partitions), "main", 1, num_partitions)


def _ops(module) -> list:
    return [op.name for op in module.lookup("main").body.operations]


@dataclass(frozen=True)
class _FailingPass(Pass):
    name: ClassVar[str] = "failing"

    def run(self, module, ctx) -> bool:
        raise RuntimeError("a compiler bug")


@pytest.fixture
def broken_pipeline(monkeypatch):
    """A registered pipeline whose second pass raises (gone from the registry afterwards)."""
    monkeypatch.setitem(PIPELINES._entries, "test-broken",
                        lambda: Pipeline("test-broken", parse_pass_list("dce") + [_FailingPass()]))
    return "test-broken"


def test_the_pipeline_runs_on_a_copy_and_generate_sees_its_output():
    module = stablehlo.parse(FOLDABLE)
    before = print_module(module)
    seen = []
    backend = Backend("test", pipeline="default",
                      generate=lambda m, request: seen.append((m, request)) or "payload")
    compiled = compile_module(module, _request(), backend)
    assert print_module(module) == before and compiled.module is module
    assert _ops(compiled.optimized) == ["stablehlo.constant", "stablehlo.multiply",
                                        "func.return"]
    assert seen == [(compiled.optimized, _request())] and compiled.payload == "payload"
    assert [name for name, _ in compiled.pass_seconds] == [
        p.name for p in PIPELINES.get("default")().passes]
    assert compiled.cache_key is None and not compiled.cache_hit


def test_without_hooks_the_program_is_the_payload():
    module = stablehlo.parse(FOLDABLE)
    compiled = compile_module(module, _request(), Backend("test"))
    assert compiled.payload is module and compiled.optimized is module


def test_a_failing_pipeline_generates_the_unoptimized_program(broken_pipeline, caplog):
    module = stablehlo.parse(FOLDABLE)
    with caplog.at_level(logging.WARNING, "openhlo.compile"):
        compiled = compile_module(module, _request(), Backend("test", pipeline=broken_pipeline,
                                                              generate=lambda m, r: m))
    assert compiled.payload is module
    assert compiled.pipeline_failure == "failing: a compiler bug"
    assert "failed in pass failing" in caplog.text


def test_whole_program_checks_run_before_the_backend():
    declared = """
func.func private @helper(%x: tensor<f32>) -> tensor<f32>
func.func @main(%x: tensor<f32>) -> tensor<f32> {
  %0 = func.call @helper(%x) : (tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}
"""
    generated = []
    with pytest.raises(VerificationError, match="helper"):
        compile_module(stablehlo.parse(declared), _request(),
                       Backend("test", generate=lambda m, r: generated.append(m)))
    assert generated == []


def test_partitioned_programs_reach_the_backend_per_device():
    module = stablehlo.parse(SHARDED)
    before = print_module(module)
    compiled = compile_module(module, _request(2), Backend("test"))
    assert print_module(module) == before  # the caller's module is not rewritten
    assert [t.shape for t in compiled.module.lookup("main").type.inputs] == [(4,)]
    with pytest.raises(ShardingError):
        compile_module(stablehlo.parse(SHARDED.replace('"x"=2', '"x"=3')), _request(2),
                       Backend("test"))


def test_the_cache_is_asked_by_key_and_a_hit_skips_the_compiler():
    module = stablehlo.parse(FOLDABLE)
    asked = []

    def load_cached(key):
        asked.append(key)
        return (module, "cached payload") if len(asked) > 1 else None
    backend = Backend("test", generate=lambda m, r: "fresh", load_cached=load_cached)
    assert load_compiled(FOLDABLE, Options(), backend) is None
    fresh = compile_module(module, _request(), backend, text=FOLDABLE)
    assert fresh.payload == "fresh" and fresh.cache_key == asked[0]  # text: asked once
    hit = compile_module(stablehlo.parse(FOLDABLE), _request(), backend)
    assert hit.cache_hit and hit.payload == "cached payload" and hit.module is module
    assert asked[1] == cache_key(module, Options(), "test") != asked[0]


def test_cache_keys_follow_the_program_the_options_and_the_backend():
    module = stablehlo.parse(FOLDABLE)
    key = cache_key(module, Options(), "cpu 1")
    assert key == cache_key(stablehlo.parse(FOLDABLE), Options(), "cpu 1")
    assert len({key, cache_key(module, Options(num_partitions=2), "cpu 1"),
                cache_key(module, Options(env_option_overrides={"opt_level": 0}), "cpu 1"),
                cache_key(module, Options(), "cpu 0"),
                cache_key(FOLDABLE, Options(), "cpu 1"),
                cache_key(FOLDABLE + " ", Options(), "cpu 1")}) == 6


def test_the_partitioned_entry_says_how_its_pieces_are_laid_out():
    compiled = compile_module(stablehlo.parse(SHARDED), _request(2), Backend("test"))
    (param,), (result,) = entry_shardings(compiled.module, "main")
    for tiles in (param, result):  # halves of the global value, device 0 holding the first
        assert not tiles.replicated
        assert tiles.tile_dims == (2,)
        assert tiles.devices.tolist() == [0, 1]


PRODUCT = """
func.func @main(%x: tensor<2x3xf32>, %w: tensor<3x4xf32>) -> tensor<2x4xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}
"""


def _dot_operand_types(module) -> list:
    return [str(v.type.element_type) for op in module.lookup("main").body.operations
            if op.name == "stablehlo.dot_general" for v in op.operands]


@pytest.mark.parametrize("low_precision, force, autocast", [
    (frozenset({"bf16"}), False, True), (frozenset(), False, False), (frozenset(), True, True)])
def test_autocast_applies_where_the_backend_computes_bf16_natively_or_when_forced(
        low_precision, force, autocast, caplog):
    module = stablehlo.parse(PRODUCT)
    options = Options(env_option_overrides={"autocast": "bf16", "autocast_force": force})
    backend = Backend(f"test {low_precision} {force}", pipeline="default",
                      low_precision=low_precision)
    with caplog.at_level(logging.WARNING, "openhlo.compile"):
        compiled = compile_module(module, CompileRequest(options, "main"), backend)
    assert _dot_operand_types(compiled.optimized) == (["bf16"] * 2 if autocast else ["f32"] * 2)
    assert _dot_operand_types(compiled.module) == ["f32", "f32"]  # the given program
    assert ("autocast to bf16 skipped" in caplog.text) == (not autocast)


def test_autocast_runs_without_a_pipeline_too():
    options = Options(env_option_overrides={"autocast": "bf16"})
    compiled = compile_module(stablehlo.parse(PRODUCT), CompileRequest(options, "main"),
                              Backend("test", low_precision=frozenset({"bf16"})))
    assert _dot_operand_types(compiled.payload) == ["bf16", "bf16"]


@pytest.mark.parametrize("overrides, message", [
    ({"autocast": True}, "env_option_overrides\\['autocast'\\] must be a type name"),
    ({"autocast": "f8"}, "option 'dtype' must be one of \\['bf16'\\]"),
    ({"autocast": "bf16", "autocast_force": "yes"}, "'autocast_force'\\] must be a bool")])
def test_bad_autocast_options_are_the_users_errors(overrides, message):
    from xla_core.passes import PassError
    with pytest.raises(PassError, match=message):
        compile_module(stablehlo.parse(PRODUCT), CompileRequest(Options(
            env_option_overrides=overrides), "main"), Backend("test"))
