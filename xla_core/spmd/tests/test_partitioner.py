"""spmd-partition: reshard plans and the shape of the per-device program (the runtime runs
partitioned programs and compares them with unsharded runs in
pjrt/tests/test_spmd_partitioner.py and test_spmd_conformance.py)."""
import pytest

import stablehlo
from stablehlo.text import print_module
from xla_core.passes import PassContext, make_pipeline
from xla_core.spmd import ShardingError, entry_shardings
from xla_core.spmd.manual import PARTITIONED
from xla_core.spmd.reshard import plan, slice_offsets
from xla_core.spmd.summary import collectives

SIZES = {"x": 4, "y": 2}.__getitem__


@pytest.mark.parametrize("have, target, steps, nbytes", [
    # a split moving to another dim: one all-to-all moving the piece (8x8 f32 pieces)
    ((("x",), ()), ((), ("x",)), [("all_to_all", 0, 1, "x")], 256),
    ((("x", "y"), ()), (("x",), ("y",)), [("all_to_all", 0, 1, "y")], 256),
    # dropping a split: all-gather; adding one: a local slice, no bytes
    ((("x",), ()), ((), ()), [("all_gather", 0, ("x",))], 1024),
    (((), ()), (("y",), ("x",)), [("slice", 0, ("y",)), ("slice", 1, ("x",))], 0),
    # no all-to-all fits (x is not minor in dim 0 of the target): gather then slice
    ((("y",), ("x",)), (("x", "y"), ()), [("all_gather", 0, ("y",)), ("all_gather", 1, ("x",)),
                                          ("slice", 0, ("x", "y"))], 512 + 2048),
])
def test_reshard_plans_and_their_bytes(have, target, steps, nbytes):
    local = (8, 8)
    assert plan(have, target, local, 4, SIZES) == (steps, nbytes)


def test_slice_offsets_follow_device_coordinates():
    # mesh x=2, y=2 with device ids [[3, 1], [2, 0]]: device 3 holds the first part of x
    coords = {3: {"x": 0, "y": 0}, 1: {"x": 0, "y": 1}, 2: {"x": 1, "y": 0},
              0: {"x": 1, "y": 1}}
    sizes = {"x": 2, "y": 2}.__getitem__
    assert slice_offsets(coords, ("x",), 4, sizes).tolist() == [4, 0, 4, 0]
    assert slice_offsets(coords, ("y", "x"), 2, sizes).tolist() == [6, 4, 2, 0]


PROGRAM = """
module attributes {mhlo.num_partitions = 4 : i32} {
sdy.mesh @mesh = <["x"=4]>
func.func public @main(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>},
                       %b: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>})
    -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}, tensor<8x8xf32>) {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] :
      (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %1 = call @double(%0) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %1, %0 : tensor<8x8xf32>, tensor<8x8xf32>
}
func.func private @double(%v: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = stablehlo.add %v, %v : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
}
"""


def test_partitioned_module_keeps_global_shardings_on_local_types():
    module = stablehlo.parse(PROGRAM)
    make_pipeline("spmd").run(module, PassContext())
    assert PARTITIONED in module.attributes
    func = module.lookup("main")
    assert [t.shape for t in func.type.inputs] == [(8, 4), (4, 8)]
    # result 1 (the dot, not annotated) takes the layout its other user (the inlined call,
    # result 0) wants
    assert [t.shape for t in func.type.results] == [(8, 2), (8, 2)]
    params, results = entry_shardings(module, "main")
    assert params[1].devices.ravel().tolist() == [0, 1, 2, 3]
    assert results[1].tile_dims == (1, 4)
    ops = [op.name for op in func.walk()]  # the all-reduce is wrapped in an async start
    # the dot's partial sums, split over x, are all-reduced, then each device slices its part
    assert ops.count("stablehlo.dot_general") == 1 and ops.count("stablehlo.all_reduce") == 1
    assert "stablehlo.dynamic_slice" in ops
    assert "stablehlo.reduce_scatter" not in ops and "func.call" not in ops
    handles = [op.attributes["channel_handle"].get("handle") for op in func.walk()
               if "channel_handle" in op.attributes]
    assert handles == list(range(1, len(handles) + 1))
    text = print_module(module)
    assert print_module(stablehlo.parse(text)) == text


def test_spmd_pipeline_checks_the_device_count():
    module = stablehlo.parse(PROGRAM.replace("num_partitions = 4", "num_partitions = 8"))
    with pytest.raises(ShardingError, match=r"has 4 device\(s\) but .* partitioned for 8"):
        make_pipeline("spmd").run(module, PassContext())


def test_fsdp_backward_dot_gathers_the_weight_not_the_activation():
    # dy (batch-split activation) times w^T (weight split on its first dim, FSDP): XLA
    # gathers the 8 KiB weight; gathering the 32 KiB activation instead would move 4x the
    # bytes and leave the rest of the backward split on the weight's dim
    module = stablehlo.parse("""
module attributes {mhlo.num_partitions = 4 : i32} {
sdy.mesh @mesh = <["x"=4]>
func.func public @main(
    %dy: tensor<16x8x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}, {}]>},
    %w: tensor<64x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>})
    -> (tensor<16x8x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}, {}]>}) {
  %0 = stablehlo.tanh %dy : tensor<16x8x32xf32>
  %1 = stablehlo.dot_general %0, %w, contracting_dims = [2] x [1] :
      (tensor<16x8x32xf32>, tensor<64x32xf32>) -> tensor<16x8x64xf32>
  %2 = stablehlo.tanh %1 : tensor<16x8x64xf32>
  return %2 : tensor<16x8x64xf32>
}
}
""")
    make_pipeline("spmd").run(module, PassContext())
    assert collectives(module) == [("all-gather", (64, 32), 64 * 32 * 4)]
