"""The fusion pass on hand-written programs: numerics, explanations, options, idempotence.

Structure (which op lands in which fusion) is checked by the golden file
xla_core/passes/tests/fusion.mlir; here every chunk of that file also runs
through the reference interpreter before and after fusion.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import stablehlo
from stablehlo.text import split_input_file
from stablehlo.verify import verify_module
from xla_core.cost import fusion_cost, hardware, roofline_seconds
from xla_core.fusion import Explain, fuse_module
from xla_core.fusion.graph import FusionGraph
from xla_core.fusion.legality import why_not_fusible
from xla_core.fusion.priority import CostCache
from xla_core.passes import PassError, Pipeline, parse_pass_list

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "xla_core" / "passes" / "tests" / "fusion.mlir"
CHUNKS = [chunk for _, _, chunk in split_input_file(GOLDEN.read_text())]


def random_args(module, seed=0):
    rng = np.random.default_rng(seed)
    args = []
    for a in module.lookup("main").body.arguments:
        t = a.type
        if str(t.element_type).startswith("f"):
            args.append(rng.uniform(0.5, 2.0, t.shape).astype(np.float32))
        else:
            args.append(rng.integers(0, t.shape[-1] if t.shape else 3, t.shape).astype(np.int32))
    return args


def fuse_text(text, **options):
    module = stablehlo.parse(text, "test.mlir")
    explain = fuse_module(module, hardware="generic-cpu", explain=Explain(True), **options)
    verify_module(module)
    return module, explain


@pytest.mark.parametrize("index", range(len(CHUNKS)))
def test_golden_chunks_keep_their_values(index):
    before = stablehlo.parse(CHUNKS[index], "fusion.mlir")
    args = random_args(before)
    if index == len(CHUNKS) - 1:      # the while loop: a small trip count
        args[1] = np.int32(3)
    expected = stablehlo.evaluate(before, args)
    after, explain = fuse_text(CHUNKS[index])
    assert explain.counters["fusions"] >= 1
    for want, got in zip(expected, stablehlo.evaluate(after, args)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_explain_lines_name_ops_places_and_reasons():
    _, explain = fuse_text(CHUNKS[7])
    text = "\n".join(explain.lines)
    assert "refused %0 (stablehlo.exponential @ test.mlir:" in text
    assert "it would duplicate expensive stablehlo.exponential into 2 consumers" in text
    assert "it would recompute expensive stablehlo.log 4x through %4 = broadcast_in_dim" in text
    assert "(sibling multi-output)" in text
    fused = [line for line in explain.lines if line.startswith("fused ")]
    assert fused and all(line.endswith(" us") and ": saves " in line for line in fused)
    assert "no multi-output fusion: the dot's operands must be fusion parameters" in text
    assert explain.counters["refused"] == 4


def test_a_dot_never_takes_a_prologue():
    text = """
    func.func public @main(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
      %0 = stablehlo.negate %x : tensor<4x4xf32>
      %1 = stablehlo.dot_general %0, %w, contracting_dims = [1] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
      %2 = stablehlo.abs %1 : tensor<4x4xf32>
      func.return %2 : tensor<4x4xf32>
    }"""
    module, explain = fuse_text(text)
    assert "the dot's operands must be fusion parameters (%0 would be computed inside)" in \
        "\n".join(explain.lines)
    main = module.lookup("main").body.operations
    assert [op.name for op in main] == ["stablehlo.negate", "stablehlo.composite", "func.return"]


def test_reductions_over_different_dims_stay_apart():
    text = """
    func.func public @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %z = stablehlo.constant dense<0.0> : tensor<f32>
      %0 = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
      %1 = stablehlo.broadcast_in_dim %0, dims = [0] : (tensor<4xf32>) -> tensor<4x8xf32>
      %2 = stablehlo.multiply %x, %1 : tensor<4x8xf32>
      %3 = stablehlo.reduce(%2 init: %z) applies stablehlo.add across dimensions = [0] : (tensor<4x8xf32>, tensor<f32>) -> tensor<8xf32>
      %4 = stablehlo.broadcast_in_dim %3, dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>
      %5 = stablehlo.add %2, %4 : tensor<4x8xf32>
      func.return %5 : tensor<4x8xf32>
    }"""
    module, explain = fuse_text(text)
    assert "reductions of different shapes or dims cannot share a fusion ([4,8] over [1] vs " \
           "[4,8] over [0])" in "\n".join(explain.lines)
    # the row reduction stays a lone op; the column one takes the rest
    assert explain.counters["fusions_reduction"] == 1
    main = module.lookup("main").body.operations
    assert [op.name for op in main][1:3] == ["stablehlo.reduce", "stablehlo.composite"]


def test_max_operands_refuses_wide_fusions():
    args = ", ".join(f"%a{i}: tensor<8xf32>" for i in range(6))
    body = "\n".join(f"%s{i} = stablehlo.add %s{i - 1}, %a{i} : tensor<8xf32>" for i in range(1, 6))
    text = f"""func.func public @main({args}) -> tensor<8xf32> {{
      %s0 = stablehlo.negate %a0 : tensor<8xf32>
      {body}
      func.return %s5 : tensor<8xf32>
    }}"""
    _, wide = fuse_text(text)
    assert wide.counters["fusions"] == 1 and wide.counters["refused"] == 0
    _, narrow = fuse_text(text, max_operands=4)
    assert "operands and results (max 4)" in "\n".join(narrow.lines)


def test_fusing_twice_keeps_fusions_valid():
    text = GOLDEN.read_text().split("// -----")[3]      # layer norm, multi-output
    module, _ = fuse_text(text)
    args = random_args(module)
    once = stablehlo.evaluate(module, args)
    printed = str(module)
    Pipeline("again", parse_pass_list("fusion{hardware=generic-cpu}")).run(module)
    assert str(module) == printed
    for a, b in zip(once, stablehlo.evaluate(module, args)):
        np.testing.assert_array_equal(a, b)


def test_cached_costs_match_fusion_cost():
    module = stablehlo.parse(CHUNKS[2], "softmax.mlir")
    block = module.lookup("main").body
    costs = CostCache(hardware("generic-cpu"))
    graph = FusionGraph(block, why_not_fusible, costs.flops)
    ops = [op for op in block.operations if op.name not in ("func.return", "stablehlo.constant")]
    nodes = [graph.nodes[block.operations.index(op)] for op in ops]
    merged = nodes[0]
    for node in nodes[1:]:
        merged = graph.merge(merged, node)
    want = roofline_seconds(fusion_cost(ops, None, [ops[-1].results[0]]), hardware("generic-cpu"))
    assert costs.seconds(merged) == pytest.approx(want)


def test_unknown_option_is_a_clear_error():
    with pytest.raises(PassError, match="no option 'max-ops'"):
        parse_pass_list("fusion{max-ops=3}")


def test_cli_explains_on_stderr_and_prints_ir_on_stdout(tmp_path):
    path = tmp_path / "softmax.mlir"
    path.write_text(CHUNKS[2])
    done = subprocess.run(
        [sys.executable, "-m", "tools", "opt", str(path), "--passes=fusion{hardware=generic-cpu}",
         "--explain-fusion"], capture_output=True, text=True, cwd=ROOT, check=True)
    assert 'stablehlo.composite "openhlo.fusion"' in done.stdout
    assert "fused " not in done.stdout
    assert "made @fused_reduction_0 (reduction): 9 ops, 1 operands, 1 results" in done.stderr
    assert f"fused %0 (stablehlo.reduce @ {path}:" in done.stderr


def test_multi_output_never_creates_a_cycle():
    # exp feeds the add directly and through a custom call: exp joining the add's
    # fusion would make that fusion both feed and read the custom call
    text = """
    func.func public @main(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
      %0 = stablehlo.exponential %x : tensor<4x4xf32>
      %1 = stablehlo.custom_call @foo(%0) : (tensor<4x4xf32>) -> tensor<4x4xf32>
      %2 = stablehlo.add %0, %1 : tensor<4x4xf32>
      %3 = stablehlo.negate %2 : tensor<4x4xf32>
      func.return %3 : tensor<4x4xf32>
    }"""
    module, explain = fuse_text(text)
    lines = "\n".join(explain.lines)
    assert "refused %0 (stablehlo.exponential @ test.mlir:3) into %1 (stablehlo.custom_call " \
           "@ test.mlir:4): consumer %1 (stablehlo.custom_call @ test.mlir:4) is not fusible: " \
           "stablehlo.custom_call is not in the fusible set" in lines
    assert "into %3 (stablehlo.negate @ test.mlir:6, 2 ops): no multi-output fusion: it would " \
           "create a cycle" in lines
    names = [op.name for op in module.lookup("main").body.operations]
    assert names == ["stablehlo.exponential", "stablehlo.custom_call", "stablehlo.composite",
                     "func.return"]


def test_sibling_merge_through_a_wide_fusion_is_refused():
    # Reduced from ShuffleNet v2's training forward (two batch norms' statistics). The
    # splat constants make siblings: first %15's fusion (divide, add) merges with the
    # rsqrt's, one node holding %0 and %15, which feeds %3 -> conv -> reduce -> %7 and
    # reads %12 <- %8. Merging %8 with %7 would close a cycle; the path from %8 to %7
    # enters that node at its late op (%13) and leaves at its early one (%1), so a search
    # pruned by "a node whose ops all come after %7 cannot feed it" missed it, and
    # outlining failed on a cyclic block.
    text = """
    func.func public @main(%var: tensor<1x8x1x1xf32>, %x: tensor<2x8x4x4xf32>,
                           %w: tensor<8x1x3x3xf32>, %sum: tensor<1x8x1x1xf32>,
                           %y: tensor<2x8x4x4xf32>) -> (tensor<1x8x1x1xf32>, tensor<1x8x1x1xf32>) {
      %eps = stablehlo.constant dense<1.0e-5> : tensor<1x8x1x1xf32>
      %n = stablehlo.constant dense<32.0> : tensor<1x8x1x1xf32>
      %zero = stablehlo.constant dense<0.0> : tensor<f32>
      %0 = stablehlo.add %var, %eps : tensor<1x8x1x1xf32>
      %1 = stablehlo.rsqrt %0 : tensor<1x8x1x1xf32>
      %2 = stablehlo.broadcast_in_dim %1, dims = [0, 1, 2, 3] : (tensor<1x8x1x1xf32>) -> tensor<2x8x4x4xf32>
      %3 = stablehlo.multiply %x, %2 : tensor<2x8x4x4xf32>
      %4 = stablehlo.convolution(%3, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1],
          window = {stride = [1, 1], pad = [[1, 1], [1, 1]], rhs_dilate = [1, 1]}
          {batch_group_count = 1 : i64, feature_group_count = 8 : i64}
          : (tensor<2x8x4x4xf32>, tensor<8x1x3x3xf32>) -> tensor<2x8x4x4xf32>
      %5 = stablehlo.reduce(%4 init: %zero) applies stablehlo.add across dimensions = [0, 2, 3] : (tensor<2x8x4x4xf32>, tensor<f32>) -> tensor<8xf32>
      %6 = stablehlo.reshape %5 : (tensor<8xf32>) -> tensor<1x8x1x1xf32>
      %7 = stablehlo.divide %6, %n : tensor<1x8x1x1xf32>
      %8 = stablehlo.divide %sum, %n : tensor<1x8x1x1xf32>
      %9 = stablehlo.broadcast_in_dim %8, dims = [0, 1, 2, 3] : (tensor<1x8x1x1xf32>) -> tensor<2x8x4x4xf32>
      %10 = stablehlo.subtract %y, %9 : tensor<2x8x4x4xf32>
      %11 = stablehlo.multiply %10, %10 : tensor<2x8x4x4xf32>
      %12 = stablehlo.reduce(%11 init: %zero) applies stablehlo.add across dimensions = [0, 2, 3] : (tensor<2x8x4x4xf32>, tensor<f32>) -> tensor<8xf32>
      %13 = stablehlo.reshape %12 : (tensor<8xf32>) -> tensor<1x8x1x1xf32>
      %14 = stablehlo.divide %13, %n : tensor<1x8x1x1xf32>
      %15 = stablehlo.add %14, %eps : tensor<1x8x1x1xf32>
      func.return %7, %15 : tensor<1x8x1x1xf32>, tensor<1x8x1x1xf32>
    }"""
    before = stablehlo.parse(text, "test.mlir")
    args = random_args(before)
    expected = stablehlo.evaluate(before, args)
    module, explain = fuse_text(text)
    assert "merged %15 (stablehlo.add @ test.mlir:26, 3 ops) with %1 (stablehlo.rsqrt " \
           "@ test.mlir:9, 2 ops) (sibling multi-output)" in "\n".join(explain.lines)
    for want, got in zip(expected, stablehlo.evaluate(module, args)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_dot_epilogues_keep_shape_and_dots_stay_apart():
    text = """
    func.func public @main(%x: tensor<4x8xf32>, %w: tensor<8x4xf32>) -> (tensor<4x2xf32>, tensor<4x4xf32>) {
      %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
      %1 = stablehlo.slice %0 [0:4, 0:2] : (tensor<4x4xf32>) -> tensor<4x2xf32>
      %2 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
      %3 = stablehlo.dot_general %2, %2, contracting_dims = [1] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
      func.return %1, %3 : tensor<4x2xf32>, tensor<4x4xf32>
    }"""
    _, explain = fuse_text(text)
    lines = "\n".join(explain.lines)
    assert "refused %0 (stablehlo.dot_general @ test.mlir:3) into %1 (stablehlo.slice @ " \
           "test.mlir:4): a dot epilogue must keep the dot's shape [4,4] (would hold [4,2])" in lines
    assert "refused %2 (stablehlo.dot_general @ test.mlir:5) into %3 (stablehlo.dot_general @ " \
           "test.mlir:6): two dots cannot share a fusion" in lines
    assert explain.counters["fusions"] == 0


def test_side_effects_and_opaque_ops_are_explained():
    text = """
    func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
      %0 = stablehlo.negate %x : tensor<4xf32>
      %t = stablehlo.create_token : !stablehlo.token
      %1 = "stablehlo.outfeed"(%0, %t) : (tensor<4xf32>, !stablehlo.token) -> !stablehlo.token
      %2 = stablehlo.sqrt %0 : tensor<4xf32>
      func.return %2 : tensor<4xf32>
    }"""
    _, explain = fuse_text(text)
    lines = "\n".join(explain.lines)
    # values are named as the printer numbers them: the token is %1, so the outfeed is %2
    assert "refused %0 (stablehlo.negate @ test.mlir:3) into %2 (stablehlo.outfeed @ " \
           "test.mlir:5): consumer %2 (stablehlo.outfeed @ test.mlir:5) is not fusible: it has " \
           "side effects" in lines
    # negate still joins sqrt, as a second result that the outfeed reads
    assert "merged %0 (stablehlo.negate @ test.mlir:3) with %3 (stablehlo.sqrt @ test.mlir:6) " \
           "(producer-consumer multi-output)" in lines


# Blocks are fused one after another with one cost cache; node ids restart in every block.
# Here position 0 feeds position 1 both in @main's body (add -> multiply: fusible) and in
# the loop body (add -> a nested while: not fusible). The second block must not reuse the
# first block's answer for "node 0 into node 1".
NESTED_BLOCKS = """
func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = stablehlo.add %x, %x : tensor<4xf32>
  %b = stablehlo.multiply %a, %a : tensor<4xf32>
  %w:2 = stablehlo.while(%i = %b, %n = %x) : tensor<4xf32>, tensor<4xf32>
  cond {
    %s = stablehlo.constant dense<0.0> : tensor<f32>
    %p = stablehlo.compare LT, %s, %s : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %c = stablehlo.add %i, %n : tensor<4xf32>
    %inner:2 = stablehlo.while(%j = %c, %k = %n) : tensor<4xf32>, tensor<4xf32>
    cond {
      %s = stablehlo.constant dense<0.0> : tensor<f32>
      %q = stablehlo.compare LT, %s, %s : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %q : tensor<i1>
    } do {
      stablehlo.return %j, %k : tensor<4xf32>, tensor<4xf32>
    }
    stablehlo.return %inner#0, %inner#1 : tensor<4xf32>, tensor<4xf32>
  }
  return %w#0, %w#1 : tensor<4xf32>, tensor<4xf32>
}
"""


def test_node_ids_of_one_block_do_not_leak_into_the_next():
    module = stablehlo.parse(NESTED_BLOCKS)
    x = np.arange(4, dtype=np.float32)
    expected = stablehlo.evaluate(module, [x])
    fuse_module(module, hardware="generic-cpu")
    verify_module(module)
    body = module.lookup("main").body.operations[1].regions[1].blocks[0]
    assert [op.name for op in body.operations][:2] == ["stablehlo.add", "stablehlo.while"]
    for got, want in zip(stablehlo.evaluate(module, [x]), expected):
        np.testing.assert_array_equal(got, want)
