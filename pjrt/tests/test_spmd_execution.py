"""Multi-partition programs in the runtime: ``Client.compile`` turns shard_map/pmap programs
into per-device programs (xla_core's spmd-manual pass) and ``execute_sharded`` runs them.

Numerics: the per-device program runs on 4 devices of the cpu runtime on the pieces of a
global input, and the pieces put back together must equal numpy's result on the whole value.
"""
import numpy as np
import pytest

import pjrt
from pjrt.errors import ArgumentError, UnimplementedError

MESH_1D = 'sdy.mesh @mesh = <["x"=4]>'
MESH_2D = 'sdy.mesh @mesh = <["a"=2, "b"=2]>'

# pmap-style: the argument carries its sharding; the body sums the rows over devices.
PSUM_ROWS = MESH_1D + """
func.func public @main(%arg0: tensor<8x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>})
    -> (tensor<2x3xf32>) {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>]
      out_shardings=[<@mesh, [{}, {}]>] manual_axes={"x"} (%a: tensor<2x3xf32>) {
    %1 = "stablehlo.all_reduce"(%a) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>,
        replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<2x3xf32>) -> tensor<2x3xf32>
    sdy.return %1 : tensor<2x3xf32>
  } : (tensor<8x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
"""

# jit(shard_map) on a 2-D mesh: a bare argument, two manual computations in a row (the
# second takes the first's result as laid out), a result split over "b" only.
TWO_STEPS = MESH_2D + """
func.func public @main(%arg0: tensor<4x4xf32>) -> (tensor<2x4xf32>) {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"a"}, {"b"}]>]
      out_shardings=[<@mesh, [{"a"}, {"b"}]>] manual_axes={"a", "b"} (%p: tensor<2x2xf32>) {
    %e = stablehlo.exponential %p : tensor<2x2xf32>
    sdy.return %e : tensor<2x2xf32>
  } : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = sdy.manual_computation(%0) in_shardings=[<@mesh, [{"a"}, {"b"}]>]
      out_shardings=[<@mesh, [{}, {"b"}]>] manual_axes={"a", "b"} (%q: tensor<2x2xf32>) {
    %2 = "stablehlo.all_reduce"(%q) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>,
        replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>, use_global_device_ids}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = stablehlo.add %l, %r : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<2x2xf32>) -> tensor<2x2xf32>
    sdy.return %2 : tensor<2x2xf32>
  } : (tensor<4x4xf32>) -> tensor<2x4xf32>
  return %1 : tensor<2x4xf32>
}
"""


def _compile(text: str):
    return pjrt.make_client("cpu", num_devices=4).compile(
        text, pjrt.CompileOptions(num_partitions=4))


def _run_pieces(exe, pieces_per_device):
    outs, events = exe.execute_sharded([[p] for p in pieces_per_device], with_events=True)
    for event in events:
        event.wait()
    return [o[0].to_numpy() for o in outs]


def test_pmap_style_program_becomes_per_device_and_sums():
    exe = _compile(PSUM_ROWS)
    assert [t.shape for t in exe.parameter_types] == [(2, 3)]
    x = np.arange(24, dtype=np.float32).reshape(8, 3)
    outs = _run_pieces(exe, np.split(x, 4))
    want = x.reshape(4, 2, 3).sum(0)
    for out in outs:  # out_shardings [{}, {}]: every device holds the whole result
        np.testing.assert_array_equal(out, want)
    params, results = exe.executable.shardings
    assert params[0].devices.ravel().tolist() == [0, 1, 2, 3] and results[0].replicated


def test_two_manual_computations_on_a_2d_mesh():
    exe = _compile(TWO_STEPS)
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)
    # device (a, b) = 2 * a + b holds rows 2a:2a+2, columns 2b:2b+2
    pieces = [x[2 * a:2 * a + 2, 2 * b:2 * b + 2] for a in range(2) for b in range(2)]
    outs = _run_pieces(exe, pieces)
    want = np.exp(x).reshape(2, 2, 4).sum(0)  # summed over "a", columns still split over "b"
    for a in range(2):
        for b in range(2):
            np.testing.assert_allclose(outs[2 * a + b], want[:, 2 * b:2 * b + 2], rtol=1e-6)
    _, results = exe.executable.shardings
    assert results[0].replicate_on_last_tile_dim and results[0].tile_dims == (1, 2)


def test_runtime_reports_codes_and_device_count():
    client = pjrt.make_client("cpu", num_devices=4)
    # a dim split over a free axis ("a") major to a manual one ("b"): no piece to run on
    free_major = MESH_2D + PSUM_ROWS[len(MESH_1D):].replace(
        '{"x"}', '{"a", "b"}').replace('manual_axes={"a", "b"}', 'manual_axes={"b"}')
    with pytest.raises(UnimplementedError, match="free axes major to manual"):
        client.compile(free_major, pjrt.CompileOptions(num_partitions=4))
    with pytest.raises(ArgumentError, match="need 4 devices"):
        pjrt.make_client("cpu", num_devices=2).compile(PSUM_ROWS,
                                                       pjrt.CompileOptions(num_partitions=4))
