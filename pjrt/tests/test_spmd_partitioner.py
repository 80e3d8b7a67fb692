"""The automatic partitioner in the runtime: ``Client.compile`` of a sharded program that is not
a shard_map propagates and partitions it; the per-device program runs on 4 virtual cpu devices
on the pieces of global arguments, and the pieces of its results, put back together, must
equal the unsharded program run by the reference interpreter."""
import numpy as np
import pytest

import pjrt
import stablehlo
from pjrt.errors import ArgumentError, UnimplementedError
from pjrt.tests.spmd_support import random_args, reference, run_partitioned
from stablehlo.text import print_module
from xla_core.passes import PassContext, Pipeline, parse_pass_list
from xla_core.spmd.summary import collectives

MESH_1D = 'sdy.mesh @mesh = <["x"=4]>'
MESH_2D = 'sdy.mesh @mesh = <["a"=2, "b"=2]>'


def _s(*dims) -> str:
    body = ", ".join("{" + ", ".join(f'"{a}"' for a in axes) + "}" for axes in dims)
    return f"{{sdy.sharding = #sdy.sharding<@mesh, [{body}]>}}"


def _check(text: str, kinds: list):
    args = random_args(text)
    got, exe = run_partitioned(text, args, 4)
    for g, w in zip(got, reference(text, args)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    found = collectives(exe.executable.module)
    assert [k for k, _, _ in found] == kinds
    return found, exe


def test_sum_over_a_split_dim_is_a_local_reduce_and_an_all_reduce():
    # jax.jit(lambda a: a.sum(0)) with a on P("x")
    found, exe = _check(MESH_1D + f"""
func.func public @main(%a: tensor<8x3xf32> {_s(("x",), ())}) -> tensor<3xf32> {{
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [0] :
      (tensor<8x3xf32>, tensor<f32>) -> tensor<3xf32>
  return %r : tensor<3xf32>
}}
""", ["all-reduce"])
    assert found == [("all-reduce", (3,), 12)]
    assert [t.shape for t in exe.parameter_types] == [(2, 3)]


def test_max_reduce_with_minus_infinity_init_stays_partial_other_inits_gather():
    found, _ = _check(MESH_1D + f"""
func.func public @main(%a: tensor<8x3xf32> {_s(("x",), ())}) -> (tensor<3xf32>, tensor<3xf32>) {{
  %m = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %r = stablehlo.reduce(%a init: %m) applies stablehlo.maximum across dimensions = [0] :
      (tensor<8x3xf32>, tensor<f32>) -> tensor<3xf32>
  %one = stablehlo.constant dense<1.0> : tensor<f32>
  %s = stablehlo.reduce(%a init: %one) applies stablehlo.add across dimensions = [0] :
      (tensor<8x3xf32>, tensor<f32>) -> tensor<3xf32>
  return %r, %s : tensor<3xf32>, tensor<3xf32>
}}
""", ["all-reduce", "all-gather"])
    assert found[1] == ("all-gather", (8, 3), 96)


CONTRACTING_SPLIT_RESULT_SPLIT = MESH_1D + f"""
func.func public @main(%a: tensor<8x16xf32> {_s((), ("x",))}, %b: tensor<16x8xf32> {_s(("x",), ())})
    -> (tensor<8x8xf32> {_s(("x",), ())}) {{
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] :
      (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}}
"""


def test_contracting_split_with_split_result_is_all_reduced_then_sliced_as_xla_does():
    found, _ = _check(CONTRACTING_SPLIT_RESULT_SPLIT, ["all-reduce"])
    assert found == [("all-reduce", (8, 8), 256)]


def test_contracting_split_with_split_result_is_a_reduce_scatter_when_asked():
    # spmd-partition{reduce-scatter=true}: each device receives only its part of the sums
    module = stablehlo.parse(CONTRACTING_SPLIT_RESULT_SPLIT)
    Pipeline("t", parse_pass_list("inline,sharding-propagation,"
                                  "spmd-partition{reduce-scatter=true}")).run(module, PassContext())
    args = random_args(CONTRACTING_SPLIT_RESULT_SPLIT)
    got, exe = run_partitioned(print_module(module), args, 4)
    np.testing.assert_allclose(got[0], reference(CONTRACTING_SPLIT_RESULT_SPLIT, args)[0],
                               rtol=1e-5, atol=1e-5)
    assert collectives(exe.executable.module) == [("reduce-scatter", (2, 8), 64)]


def test_replicated_to_split_is_a_local_slice_and_split_to_replicated_a_gather():
    _, exe = _check(MESH_2D + f"""
func.func public @main(%a: tensor<8x4xf32> {_s((), ())}, %b: tensor<8x4xf32> {_s(("a",), ("b",))})
    -> (tensor<8x4xf32> {_s(("b",), ("a",))}, tensor<8x4xf32> {_s((), ())}) {{
  %0 = stablehlo.exponential %a : tensor<8x4xf32>
  %1 = stablehlo.negate %b : tensor<8x4xf32>
  return %0, %1 : tensor<8x4xf32>, tensor<8x4xf32>
}}
""", ["all-gather", "all-gather"])
    names = [op.name for op in exe.executable.module.walk()]
    assert "stablehlo.partition_id" in names and "stablehlo.dynamic_slice" in names


def test_moving_a_split_between_dims_is_one_all_to_all_on_a_2d_mesh():
    found, _ = _check(MESH_2D + f"""
func.func public @main(%a: tensor<8x4xf32> {_s(("a",), ("b",))})
    -> (tensor<8x4xf32> {_s(("a", "b"), ())}) {{
  %0 = stablehlo.abs %a : tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}}
""", ["all-to-all"])
    assert found == [("all-to-all", (2, 4), 32)]


def test_batched_dot_reshape_transpose_and_broadcast_on_a_2d_mesh():
    # dot batch dim split over "a", rhs free dim over "b"; reshape splits the batch-major
    # dim; a broadcast bias takes the dot's layout; nothing needs a collective
    _check(MESH_2D + f"""
func.func public @main(%x: tensor<4x6x8xf32> {_s(("a",), (), ())},
                       %w: tensor<4x8x6xf32> {_s(("a",), (), ("b",))},
                       %bias: tensor<6xf32>) -> tensor<2x2x6x6xf32> {{
  %0 = stablehlo.dot_general %x, %w, batching_dims = [0] x [0], contracting_dims = [2] x [1] :
      (tensor<4x6x8xf32>, tensor<4x8x6xf32>) -> tensor<4x6x6xf32>
  %1 = stablehlo.broadcast_in_dim %bias, dims = [2] : (tensor<6xf32>) -> tensor<4x6x6xf32>
  %2 = stablehlo.add %0, %1 : tensor<4x6x6xf32>
  %3 = stablehlo.transpose %2, dims = [0, 2, 1] : (tensor<4x6x6xf32>) -> tensor<4x6x6xf32>
  %4 = stablehlo.reshape %3 : (tensor<4x6x6xf32>) -> tensor<2x2x6x6xf32>
  return %4 : tensor<2x2x6x6xf32>
}}
""", [])


def test_reduce_over_one_axis_of_a_2d_mesh_sums_within_groups():
    found, exe = _check(MESH_2D + f"""
func.func public @main(%a: tensor<8x4xf32> {_s(("a",), ("b",))}) -> (tensor<4xf32> {_s(("b",))}) {{
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [0] :
      (tensor<8x4xf32>, tensor<f32>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}}
""", ["all-reduce"])
    (op,) = [o for o in exe.executable.module.walk() if o.name == "stablehlo.all_reduce"]
    assert op.attributes["replica_groups"].array.tolist() == [[0, 2], [1, 3]]
    assert "use_global_device_ids" in op.attributes


def test_bad_shardings_and_unsupported_programs_fail_before_running():
    client = pjrt.make_client("cpu", num_devices=4)
    options = pjrt.CompileOptions(num_partitions=4)
    uneven = MESH_1D + f"""
func.func public @main(%a: tensor<6xf32> {_s(("x",))}) -> tensor<6xf32> {{
  return %a : tensor<6xf32>
}}
"""
    with pytest.raises(ArgumentError, match="dimension 0 of size 6 cannot be split"):
        client.compile(uneven, options)
    with pytest.raises(ArgumentError, match=r'has 4 device\(s\) but .* partitioned for 2'):
        pjrt.make_client("cpu", num_devices=2).compile(
            uneven.replace("6xf32", "8xf32"), pjrt.CompileOptions(num_partitions=2))
    sub_axis = uneven.replace('{"x"}', '{"x":(1)2}').replace("6xf32", "8xf32")
    with pytest.raises(UnimplementedError, match="sub-axis"):
        client.compile(sub_axis, options)


def test_a_mesh_with_permuted_device_ids():
    # logical device 3 holds the first piece: slices, gathers and all-to-alls follow device_ids
    _check('sdy.mesh @mesh = <["x"=4], device_ids=[3, 1, 2, 0]>' + f"""
func.func public @main(%a: tensor<8x4xf32> {_s(("x",), ())}, %b: tensor<8x4xf32> {_s((), ())})
    -> (tensor<8x4xf32> {_s((), ("x",))}, tensor<8x4xf32> {_s((), ())}) {{
  %0 = stablehlo.add %a, %b : tensor<8x4xf32>
  %1 = stablehlo.multiply %a, %b : tensor<8x4xf32>
  return %0, %1 : tensor<8x4xf32>, tensor<8x4xf32>
}}
""", ["all-to-all", "all-gather"])


def test_execute_global_checks_global_shapes():
    exe = pjrt.make_client("cpu", num_devices=4).compile(MESH_1D + f"""
func.func public @main(%a: tensor<8xf32> {_s(("x",))}) -> tensor<8xf32> {{
  %0 = stablehlo.negate %a : tensor<8xf32>
  return %0 : tensor<8xf32>
}}
""", pjrt.CompileOptions(num_partitions=4))
    x = np.arange(8, dtype=np.float32)
    (out,) = exe.execute_global(x)
    np.testing.assert_array_equal(out, -x)
    with pytest.raises(ArgumentError, match=r"argument 0 of @main: expected a global array of "
                                            r"shape \(8,\), got one of shape \(2,\)"):
        exe.execute_global(x[:2])
