"""Manual computations mixed with automatic partitioning (the ``spmd`` pipeline in
``Client.compile``): ops on global values around a shard_map, and partially manual shard_maps
(manual on one mesh axis, the other left to the partitioner), run on virtual cpu devices from
global arguments: results equal the unsharded program's (reference interpreter, the manual
computation's collectives replaced by the whole-value math they compute)."""
import numpy as np

from pjrt.tests.spmd_support import run_partitioned
from xla_core.spmd.summary import collectives

ALL_REDUCE = """"stablehlo.all_reduce"(%{x}) <{{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>,
        replica_groups = dense<{groups}> : tensor<{shape}xi64>, use_global_device_ids}}> ({{
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      %c = sdy.sharding_constraint %s <@mesh, []> : tensor<f32>
      stablehlo.return %c : tensor<f32>
    }})"""

# x: rows over "a", columns over "b"; the shard_map is manual on "b" only: x@w summed over "b"
PARTIAL = """sdy.mesh @mesh = <["a"=2, "b"=4]>
func.func public @main(%x: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>},
                       %w: tensor<16x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {}]>})
    -> (tensor<8x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) {
  %n = stablehlo.negate %x : tensor<8x16xf32>
  %0 = sdy.manual_computation(%n, %w) in_shardings=[<@mesh, [{}, {"b"}]>, <@mesh, [{"b"}, {}]>]
      out_shardings=[<@mesh, [{}, {}]>] manual_axes={"b"} (%p: tensor<8x4xf32>, %q: tensor<4x6xf32>) {
    %1 = stablehlo.dot_general %p, %q, contracting_dims = [1] x [0] :
        (tensor<8x4xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
    %2 = sdy.sharding_constraint %1 <@mesh, [{}, {}]> : tensor<8x6xf32>
    %3 = """ + ALL_REDUCE.format(x="2", groups="[[0, 1, 2, 3], [4, 5, 6, 7]]", shape="2x4") + """ : (tensor<8x6xf32>) -> tensor<8x6xf32>
    sdy.return %3 : tensor<8x6xf32>
  } : (tensor<8x16xf32>, tensor<16x6xf32>) -> tensor<8x6xf32>
  %4 = stablehlo.tanh %0 : tensor<8x6xf32>
  return %4 : tensor<8x6xf32>
}
"""


def test_partially_manual_shard_map_with_ops_around_it():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 16)).astype(np.float32)
    w = rng.standard_normal((16, 6)).astype(np.float32)
    (got,), exe = run_partitioned(PARTIAL, [x, w], 8)
    np.testing.assert_allclose(got, np.tanh(-x @ w), rtol=1e-5, atol=1e-5)
    kinds = [kind for kind, _, _ in collectives(exe.executable.module)]
    # x gathered over the free axis "a" (the body takes it whole there), then the body's sum
    assert kinds == ["all-gather", "all-reduce"]
    text = str(exe.executable.module)
    assert "sdy.manual_computation" not in text and "sharding_constraint" not in text
    handles = [op.attributes["channel_handle"] for op in exe.executable.module.walk()
               if "channel_handle" in op.attributes]
    assert len({str(h) for h in handles}) == len(handles)  # renumbered, no clash
