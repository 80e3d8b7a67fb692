"""async-collective-creator and convert-async-to-sync: where the pairs go, when they are
joined back, idempotence, and the spmd pipeline keeping programs without overlap as they were."""
from __future__ import annotations

import stablehlo
from stablehlo.text.printer import print_module
from stablehlo.verify import verify_module
from xla_core.passes import PassContext, make_pass, make_pipeline
from xla_core.testing.collective_text import SUM_OVER_PAIR as SUM, three_trip_loop

T = "tensor<4xf32>"
# the loss all-reduce, then gradient work that does not read it, then its first reader;
# the gather's only reader is the terminator
OVERLAP = f"""func.func @main(%x: {T}, %w: {T}) -> ({T}, {T}, tensor<8xf32>) {{
  %loss = "stablehlo.all_reduce"(%x) {SUM} : ({T}) -> {T}
  %g1 = stablehlo.multiply %w, %w : {T}
  %g2 = stablehlo.add %g1, %w : {T}
  %scaled = stablehlo.multiply %loss, %g2 : {T}
  %all = "stablehlo.all_gather"(%g2) {{all_gather_dim = 0 : i64,
      replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}} : ({T}) -> tensor<8xf32>
  return %scaled, %g1, %all : {T}, {T}, tensor<8xf32>
}}"""
NOTHING_BETWEEN = f"""func.func @main(%x: {T}) -> {T} {{
  %r = "stablehlo.all_reduce"(%x) {SUM} : ({T}) -> {T}
  %y = stablehlo.negate %r : {T}
  return %y : {T}
}}"""


def _run(text: str, *passes: str):
    module = stablehlo.parse(text)
    for name in passes:
        make_pass(name).run(module, PassContext())
    verify_module(module)
    return module


def _names(module) -> list:
    return [op.name for op in module.lookup("main").body.operations]


def test_creator_starts_in_place_and_is_done_before_the_first_reader():
    module = _run(OVERLAP, "async-collective-creator")
    assert _names(module) == [
        "openhlo.async_start", "stablehlo.multiply", "stablehlo.add",
        "openhlo.async_done", "stablehlo.multiply",          # the loss's first reader
        "openhlo.async_start", "openhlo.async_done",          # read by the return only
        "func.return"]
    ops = module.lookup("main").body.operations
    assert [o.name for o in ops[0].regions[0].blocks[0].operations] == [
        "stablehlo.all_reduce", "stablehlo.return"]
    assert ops[4].operands[0] is ops[3].results[0]


def test_sync_conversion_joins_only_pairs_with_nothing_between():
    module = _run(OVERLAP, "async-collective-creator", "convert-async-to-sync")
    assert _names(module) == [
        "openhlo.async_start", "stablehlo.multiply", "stablehlo.add", "openhlo.async_done",
        "stablehlo.multiply", "stablehlo.all_gather", "func.return"]
    ret = module.lookup("main").body.operations[-1]
    assert ret.operands[2].owner.name == "stablehlo.all_gather"


def test_nothing_to_overlap_round_trips_to_the_original():
    original = print_module(stablehlo.parse(NOTHING_BETWEEN))
    split = _run(NOTHING_BETWEEN, "async-collective-creator")
    assert _names(split) == ["openhlo.async_start", "openhlo.async_done", "stablehlo.negate",
                             "func.return"]
    joined = _run(NOTHING_BETWEEN, "async-collective-creator", "convert-async-to-sync")
    assert print_module(joined) == original


def test_passes_are_idempotent():
    once = print_module(_run(OVERLAP, "async-collective-creator"))
    assert print_module(_run(once, "async-collective-creator")) == once
    both = print_module(_run(OVERLAP, "async-collective-creator", "convert-async-to-sync"))
    assert print_module(_run(both, "async-collective-creator", "convert-async-to-sync")) == both
    module = stablehlo.parse(both)
    assert not make_pass("convert-async-to-sync").run(module, PassContext())
    assert not make_pass("async-collective-creator").run(stablehlo.parse(once), PassContext())


def test_collectives_in_loop_bodies_pair_within_the_body():
    text = f"""func.func @main(%x: {T}) -> {T} {{
{three_trip_loop(T)}
    %s = "stablehlo.all_reduce"(%v) {SUM} : ({T}) -> {T}
    %one = stablehlo.constant dense<1> : tensor<i32>
    %j = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %j, %s : tensor<i32>, {T}
  }}
  return %r#1 : {T}
}}"""
    module = _run(text, "async-collective-creator", "convert-async-to-sync")
    loop = module.lookup("main").body.operations[1]
    assert [o.name for o in loop.regions[1].blocks[0].operations] == [
        "openhlo.async_start", "stablehlo.constant", "stablehlo.add", "openhlo.async_done",
        "stablehlo.return"]


PARTITIONED = """module attributes {mhlo.num_partitions = 4 : i32} {
sdy.mesh @mesh = <["x"=4]>
func.func public @main(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>},
    %b: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>},
    %c: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>})
    -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] :
      (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %1 = stablehlo.dot_general %c, %c, contracting_dims = [1] x [0] :
      (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %0, %1 : tensor<8x8xf32>, tensor<8x8xf32>
}
}"""


def test_spmd_pipeline_overlaps_the_partial_sum_all_reduce_with_independent_work():
    module = stablehlo.parse(PARTITIONED)
    make_pipeline("spmd").run(module, PassContext())
    verify_module(module)
    names = _names(module)
    start, done = names.index("openhlo.async_start"), names.index("openhlo.async_done")
    assert "stablehlo.dot_general" in names[start + 1:done]  # the replicated dot overlaps
    assert "stablehlo.all_reduce" not in names


def test_memory_schedule_keeps_the_work_inside_the_async_window():
    # Sinking would move the fused work (it defines more than it frees) to its first reader,
    # past the done, leaving the all-reduce nothing to overlap (liveness.py, Note [async
    # windows]).
    text = f"""func.func @main(%x: {T}) -> ({T}, {T}) {{
  %r = "stablehlo.all_reduce"(%x) {SUM} : ({T}) -> {T}
  %y = stablehlo.multiply %x, %x : {T}
  %z = stablehlo.sine %y : {T}
  return %r, %z : {T}, {T}
}}"""
    module = _run(text, "async-collective-creator", "fusion", "memory-schedule")
    names = _names(module)
    assert names[0] == "openhlo.async_start" and names[-2:] == ["openhlo.async_done",
                                                                 "func.return"]
    assert len(names) == 4  # the fused multiply and sine in between
