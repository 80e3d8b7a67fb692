"""all-reduce-combiner: which all-reduces merge, where the merged one goes, and the per-replica
results on 4 virtual cpu devices against numpy's sums and maxima."""
import numpy as np

import pjrt
import stablehlo
from stablehlo.text import print_module
from xla_core.passes import PassContext, make_pass
from xla_core.spmd.summary import collectives


def _all_reduce(value: str, type_: str, reducer: str = "add", element: str = "f32",
                groups=((0, 1, 2, 3),)) -> str:
    rows, cols = len(groups), len(groups[0])
    listed = "[" + ", ".join("[" + ", ".join(map(str, g)) + "]" for g in groups) + "]"
    return f"""
    "stablehlo.all_reduce"({value}) ({{
      ^bb0(%x: tensor<{element}>, %y: tensor<{element}>):
        %s = stablehlo.{reducer} %x, %y : tensor<{element}>
        stablehlo.return %s : tensor<{element}>
    }}) {{replica_groups = dense<{listed}> : tensor<{rows}x{cols}xi64>,
         channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>}}
        : ({type_}) -> {type_}"""


PROGRAM = f"""
module attributes {{mhlo.num_replicas = 4 : i32}} {{
func.func @main(%a: tensor<4xf32>, %b: tensor<2x3xf32>, %c: tensor<i32>)
    -> (tensor<4xf32>, tensor<2x3xf32>, tensor<i32>, tensor<4xf32>, tensor<2x3xf32>,
        tensor<2x3xf32>) {{
  %0 = {_all_reduce("%a", "tensor<4xf32>")}
  %1 = stablehlo.multiply %0, %0 : tensor<4xf32>
  %2 = {_all_reduce("%b", "tensor<2x3xf32>")}
  %3 = {_all_reduce("%c", "tensor<i32>", element="i32")}
  %4 = {_all_reduce("%1", "tensor<4xf32>")}
  %5 = {_all_reduce("%b", "tensor<2x3xf32>", reducer="maximum")}
  %6 = {_all_reduce("%b", "tensor<2x3xf32>", groups=((0, 1), (2, 3)))}
  return %1, %2, %3, %4, %5, %6 : tensor<4xf32>, tensor<2x3xf32>, tensor<i32>, tensor<4xf32>,
      tensor<2x3xf32>, tensor<2x3xf32>
}}
}}
"""


def _combined():
    module = stablehlo.parse(PROGRAM)
    assert make_pass("all-reduce-combiner").run(module, PassContext())
    return module


def test_independent_all_reduces_with_one_key_merge_and_the_rest_stay():
    found = collectives(_combined())
    # %0 and %2 (f32 add, all 4 replicas) merge; %4 reads %0 (through %1), so it cannot
    # join them; the i32 sum, the maximum and the pairwise groups have other keys
    assert [(shape, nbytes) for _, shape, nbytes in found] == [
        (((4,), (2, 3)), 16 + 24), ((), 4), ((4,), 16), ((2, 3), 24), ((2, 3), 24)]
    assert {kind for kind, _, _ in found} == {"all-reduce"}


def test_readers_of_an_earlier_member_move_after_the_merged_op():
    ops = [op.name for op in _combined().lookup("main").body.operations]
    first = ops.index("stablehlo.all_reduce")
    assert ops.index("stablehlo.multiply") > first
    text = print_module(_combined())
    assert print_module(stablehlo.parse(text)) == text  # valid, and prints back the same


def test_combined_program_gives_each_replica_numpys_results():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 4)).astype(np.float32)
    b = rng.standard_normal((4, 2, 3)).astype(np.float32)
    c = np.arange(4, dtype=np.int32) * 7
    client = pjrt.make_client("cpu", num_devices=4)
    exe = client.compile(print_module(_combined()))
    outputs = exe.execute_sharded([[a[k], b[k], c[k]] for k in range(4)])
    square = a.sum(0) ** 2
    for k, out in enumerate(outputs):
        got = [o.to_numpy() for o in out]
        np.testing.assert_allclose(got[0], square, rtol=1e-5)
        np.testing.assert_allclose(got[1], b.sum(0), rtol=1e-5)
        assert int(got[2]) == int(c.sum())
        np.testing.assert_allclose(got[3], 4 * square, rtol=1e-5)
        np.testing.assert_array_equal(got[4], b.max(0))
        pair = b[:2] if k < 2 else b[2:]
        np.testing.assert_allclose(got[5], pair.sum(0), rtol=1e-5)


def test_threshold_splits_groups():
    module = stablehlo.parse(PROGRAM)
    # 16 bytes fit, 16 + 24 do not: %0 and %2 stay apart
    make_pass("all-reduce-combiner", {"threshold-bytes": "20"}).run(module, PassContext())
    assert len(collectives(module)) == 6
