"""Fusion around async collective pairs (legality.py, Note [fusion around async pairs]):
programs where priority or multi-output fusion would move work out of a collective's
overlap window (below its done, or the start below the work it reads); the fused program
verifies, computes the same bits on the reference interpreter, and the schedule report
still shows the work overlapping the collective."""
from __future__ import annotations

import numpy as np

import stablehlo
from stablehlo.text.names import printed_names
from stablehlo.verify import verify_module
from xla_core.cost import hardware
from xla_core.fusion import Explain, fuse_module
from xla_core.passes import PassContext, make_pass
from xla_core.scheduling import CostModelEstimator, schedule_report

T = "tensor<64x64xf32>"
# one device, so the reference interpreter runs the program as it is
SUM_ALONE = """({
    ^bb0(%p: tensor<f32>, %q: tensor<f32>):
      %s = stablehlo.add %p, %q : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0]]> : tensor<1x1xi64>}"""

# %e and %m overlap the all-reduce (the creator puts its done just above %z); %z reads
# both the done and %m, so fusing %m into %z (its only consumer) would run them after the
# done, with nothing left to overlap.
READER_OF_THE_DONE = f"""func.func @main(%x: {T}, %y: {T}) -> {T} {{
  %r = "stablehlo.all_reduce"(%x) {SUM_ALONE} : ({T}) -> {T}
  %e = stablehlo.exponential %y : {T}
  %m = stablehlo.multiply %e, %e : {T}
  %z = stablehlo.add %r, %m : {T}
  return %z : {T}
}}"""

# %p feeds the all-reduce and %q in its window: multi-output fusion would put %p into
# %q's fusion (returning %p too), placed in the window, so the start would have to wait
# for it below the work it should overlap.
FEEDER_OF_THE_START = f"""func.func @main(%x: {T}, %y: {T}) -> ({T}, {T}) {{
  %p = stablehlo.exponential %x : {T}
  %r = "stablehlo.all_reduce"(%p) {SUM_ALONE} : ({T}) -> {T}
  %q = stablehlo.add %p, %y : {T}
  %s = stablehlo.multiply %q, %q : {T}
  %z = stablehlo.add %r, %x : {T}
  return %z, %s : {T}, {T}
}}"""


def split_and_fuse(text: str):
    """(program with async pairs, the same fused, fusion's explanation)."""
    module = stablehlo.parse(text, "test.mlir")
    make_pass("async-collective-creator").run(module, PassContext())
    verify_module(module)
    fused = stablehlo.parse(text, "test.mlir")
    make_pass("async-collective-creator").run(fused, PassContext())
    explain = fuse_module(fused, hardware="generic-cpu", explain=Explain(True))
    verify_module(fused)
    return module, fused, explain


def main_ops(module) -> list:
    return list(module.lookup("main").body.operations)


def kinds(module) -> list:
    return ["fusion" if op.name == "stablehlo.composite" else op.name.split(".")[-1]
            for op in main_ops(module)]


def same_bits(before, after, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    args = [rng.uniform(0.5, 2.0, (64, 64)).astype(np.float32) for _ in range(2)]
    for want, got in zip(stablehlo.evaluate(before, args), stablehlo.evaluate(after, args)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def overlapped(module) -> list:
    """The names of the ops the report says overlap the (only) collective."""
    report = schedule_report(module, CostModelEstimator(hardware("generic-cpu"), module))
    (collective,) = report["collectives"]
    assert collective["exposed_s"] < collective["estimated_s"]
    return collective["overlaps"]


def test_work_that_overlaps_a_collective_does_not_fuse_into_a_reader_of_its_done():
    module, fused, explain = split_and_fuse(READER_OF_THE_DONE)
    # the window's two ops are one fusion, still inside the window; the add stays below
    assert kinds(fused) == ["async_start", "fusion", "async_done", "add", "return"]
    assert explain.counters["fusions"] == 1
    assert "below the async done" in "\n".join(explain.lines)
    same_bits(module, fused)
    names = printed_names(fused.op)
    fusion = next(op for op in main_ops(fused) if op.name == "stablehlo.composite")
    assert overlapped(fused) == [names[fusion.results[0]].split("#")[0]]


def test_what_a_start_reads_stays_above_it():
    module, fused, explain = split_and_fuse(FEEDER_OF_THE_START)
    order = kinds(fused)
    # the exponential (read by the start) stays above it; the window's add and multiply
    # still overlap the collective, fused
    assert order.index("exponential") < order.index("async_start") < \
        order.index("fusion") < order.index("async_done")
    assert "below the async start it feeds" in "\n".join(explain.lines)
    same_bits(module, fused)
    assert len(overlapped(fused)) == 1
