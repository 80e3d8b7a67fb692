"""Liveness and simulated peak against a brute-force simulation written here."""
from __future__ import annotations

import pytest

import stablehlo
from xla_core.buffers import BlockGraph, BuffersError, NestedPeaks
from xla_core.buffers.tests.random_dags import (
    brute_force_peak,
    random_program,
    random_topological_order,
)


@pytest.mark.parametrize("seed", range(25))
def test_peak_and_ranges_match_brute_force(seed):
    m = stablehlo.parse(random_program(seed, num_ops=14))
    block = m.lookup("main").body
    graph = BlockGraph(block, NestedPeaks(m))
    for order in (list(range(len(block.operations))),
                  random_topological_order(block.operations, seed)):
        expected_peak, expected = brute_force_peak(block.operations, order)
        assert graph.peak(order) == expected_peak
        ranges = graph.live_ranges(order)
        assert {graph.values[v]: r for v, r in enumerate(ranges)} == expected


WHILE = """
func.func public @main(%arg0: tensor<64xf32>) -> tensor<64xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.while(%i = %c0, %x = %arg0) : tensor<i32>, tensor<64xf32>
   cond {
    %c3 = stablehlo.constant dense<3> : tensor<i32>
    %1 = stablehlo.compare LT, %i, %c3, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %c1 = stablehlo.constant dense<1> : tensor<i32>
    %1 = stablehlo.broadcast_in_dim %x, dims = [0] : (tensor<64xf32>) -> tensor<64x64xf32>
    %2 = stablehlo.add %1, %1 : tensor<64x64xf32>
    %3 = stablehlo.slice %2 [0:1, 0:64] : (tensor<64x64xf32>) -> tensor<1x64xf32>
    %4 = stablehlo.reshape %3 : (tensor<1x64xf32>) -> tensor<64xf32>
    %5 = stablehlo.add %i, %c1 : tensor<i32>
    stablehlo.return %5, %4 : tensor<i32>, tensor<64xf32>
  }
  %6 = stablehlo.multiply %0#1, %arg0 : tensor<64xf32>
  return %6 : tensor<64xf32>
}
"""


def test_nested_body_peak_is_added_at_the_op_running_it():
    m = stablehlo.parse(WHILE)
    nested = NestedPeaks(m)
    graph = BlockGraph(m.lookup("main").body, nested)
    loop = next(i for i, op in enumerate(graph.ops) if op.name == "stablehlo.while")
    body = graph.ops[loop].regions[1].block
    # Body: the two 16 KiB matrices are live together at the add; its arguments are not ours.
    body_peak, _ = brute_force_peak(body.operations[1:], range(len(body.operations) - 1))
    assert graph.scratch[loop] == body_peak + 4 == 2 * 64 * 64 * 4 + 4  # + the i32 constant
    # Outside: the i32 constant, the while results (4 + 256 B) and the body peak at the while.
    assert graph.peak(range(len(graph.ops))) == 4 + (4 + 256) + graph.scratch[loop]


def test_values_used_inside_a_region_are_used_by_the_region_op():
    # %scale is read only inside the loop body: the while op is its reader.
    text = WHILE.replace("  %c0 = stablehlo.constant dense<0> : tensor<i32>\n",
                         "  %c0 = stablehlo.constant dense<0> : tensor<i32>\n"
                         "  %scale = stablehlo.negate %arg0 : tensor<64xf32>\n")
    text = text.replace("%5 = stablehlo.add %i, %c1 : tensor<i32>",
                        "%5 = stablehlo.add %i, %c1 : tensor<i32>\n"
                        "    %7 = stablehlo.multiply %4, %scale : tensor<64xf32>")
    text = text.replace("stablehlo.return %5, %4", "stablehlo.return %5, %7")
    m = stablehlo.parse(text)
    graph = BlockGraph(m.lookup("main").body, NestedPeaks(m))
    scale = graph.vid[graph.ops[1].results[0]]
    assert graph.ops[2].name == "stablehlo.while"
    assert graph.users[scale] == [2]
    assert 1 in graph.preds[2]
    assert graph.live_ranges(range(len(graph.ops)))[scale] == (1, 2)


def test_dynamic_shapes_are_refused_with_the_place():
    m = stablehlo.parse("""
func.func public @main(%arg0: tensor<?xf32>) -> tensor<?xf32> {
  %0 = stablehlo.negate %arg0 : tensor<?xf32>
  return %0 : tensor<?xf32>
}""")
    with pytest.raises(BuffersError, match="stablehlo.negate.*cannot size"):
        BlockGraph(m.lookup("main").body, NestedPeaks(m))


def test_an_async_done_takes_over_its_futures_buffer():
    # %x (an argument, not ours) gathered into a 32 KiB future (the start's region, the
    # gather, writes into it: no scratch besides); the done's result is that buffer, so at
    # the done 32 KiB are live, not 64; the peak is at the reduce (the gathered 32 KiB, the
    # zero and the 256 B row sums).
    m = stablehlo.parse("""
func.func @main(%x: tensor<64x64xf32>) -> tensor<64xf32> {
  %g = "stablehlo.all_gather"(%x) {all_gather_dim = 0 : i64,
      replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<64x64xf32>) -> tensor<128x64xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r = stablehlo.reduce(%g init: %z) applies stablehlo.add across dimensions = [0]
      : (tensor<128x64xf32>, tensor<f32>) -> tensor<64xf32>
  return %r : tensor<64xf32>
}""")
    from xla_core.passes import PassContext, make_pass
    make_pass("async-collective-creator").run(m, PassContext())
    graph = BlockGraph(m.lookup("main").body, NestedPeaks(m))
    names = [op.name for op in graph.ops]
    assert "openhlo.async_start" in names and "openhlo.async_done" in names
    size = 128 * 64 * 4
    assert graph.handover == [size if n == "openhlo.async_done" else 0 for n in names]
    assert graph.scratch[names.index("openhlo.async_start")] == 0
    reduce_body = graph.scratch[names.index("stablehlo.reduce")]
    assert graph.peak(range(len(graph.ops))) == size + 4 + 64 * 4 + reduce_body


# An attention-shaped composite and a plain call of the same decomposition: its 64 x 64 score
# matrices (16 KiB each) exist only when the decomposition itself runs.
KERNEL_COMPOSITE = """
func.func public @main(%q: tensor<64x8xf32>, %k: tensor<64x8xf32>) -> (tensor<64x8xf32>, tensor<64x8xf32>) {
  %0 = stablehlo.composite "NAME" %q, %k {decomposition = @scores} : (tensor<64x8xf32>, tensor<64x8xf32>) -> tensor<64x8xf32>
  %1 = func.call @scores(%q, %k) : (tensor<64x8xf32>, tensor<64x8xf32>) -> tensor<64x8xf32>
  return %0, %1 : tensor<64x8xf32>, tensor<64x8xf32>
}
func.func private @scores(%q: tensor<64x8xf32>, %k: tensor<64x8xf32>) -> tensor<64x8xf32> {
  %s = stablehlo.dot_general %q, %k, contracting_dims = [1] x [1] : (tensor<64x8xf32>, tensor<64x8xf32>) -> tensor<64x64xf32>
  %e = stablehlo.exponential %s : tensor<64x64xf32>
  %o = stablehlo.dot_general %e, %k, contracting_dims = [1] x [0] : (tensor<64x64xf32>, tensor<64x8xf32>) -> tensor<64x8xf32>
  return %o : tensor<64x8xf32>
}
"""


@pytest.mark.parametrize("name, one_kernel", [("openhlo.attention", True),
                                              ("openhlo.attention_grad", True),
                                              ("openhlo.weight_only_dot", True),
                                              ("example.some_composite", False)])
def test_a_composite_run_as_one_kernel_needs_no_scratch_for_its_decomposition(name, one_kernel):
    m = stablehlo.parse(KERNEL_COMPOSITE.replace("NAME", name))
    graph = BlockGraph(m.lookup("main").body, NestedPeaks(m))
    composite, call = graph.scratch[0], graph.scratch[1]
    # the decomposition's peak: both score matrices live at the exponential
    assert call == 2 * 64 * 64 * 4
    assert composite == (0 if one_kernel else call)
