"""sharding-propagation: the sharding (and its origin) of every value of small programs.

Sharding facts are checked against JAX's own lowering of the same PartitionSpec
(``NamedSharding._to_xla_hlo_sharding``): the propagated per-dimension axes must give the tile
assignment JAX gives that spec.
"""
import pytest

import stablehlo
from stablehlo.text import print_module
from xla_core.passes import PassContext, make_pass
from xla_core.spmd import ShardingError, SpmdUnsupportedError
from xla_core.spmd.annotations import module_mesh, op_dims
from xla_core.spmd.propagation import explain
from xla_core.spmd.sharding import TensorSharding, parse_mhlo_sharding

jax = pytest.importorskip("jax")
from jax.sharding import AbstractMesh, NamedSharding, PartitionSpec as P  # noqa: E402

MESH = 'sdy.mesh @mesh = <["x"=4, "y"=2]>'


def _sdy(*dims) -> str:
    body = ", ".join("{" + ", ".join(f'"{a}"' for a in axes) + "}" for axes in dims)
    return f"{{sdy.sharding = #sdy.sharding<@mesh, [{body}]>}}"


def _propagate(text: str, **options):
    module = stablehlo.parse(text)
    make_pass("sharding-propagation", {k: str(v) for k, v in options.items()}).run(
        module, PassContext())
    return module


def _dims(module) -> list:
    func = module.lookup("main")
    info = module_mesh(module, func, 0)
    return [op_dims(info, op)[0] for op in func.body.operations if op.results]


def _matches_jax(module, dims, spec, rank) -> bool:
    info = module_mesh(module, module.lookup("main"), 0)
    ours = TensorSharding(info.name, dims).tile_assignment(info.mesh)
    jax_mesh = AbstractMesh(tuple(s for _, s in info.mesh.axes), info.mesh.names)
    theirs = str(NamedSharding(jax_mesh, spec)._to_xla_hlo_sharding(rank))
    return ours == parse_mhlo_sharding(theirs, rank)


CHAIN = MESH + f"""
func.func public @main(%a: tensor<8x16xf32> {_sdy(("x",), ())},
                       %b: tensor<16x32xf32> {_sdy((), ("y",))}) -> tensor<4x8x8xf32> {{
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] :
      (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %1 = stablehlo.tanh %0 : tensor<8x32xf32>
  %2 = stablehlo.transpose %1, dims = [1, 0] : (tensor<8x32xf32>) -> tensor<32x8xf32>
  %3 = stablehlo.reshape %2 : (tensor<32x8xf32>) -> tensor<4x8x8xf32>
  return %3 : tensor<4x8x8xf32>
}}
"""


def test_dot_transpose_reshape_chain_matches_jax():
    module = _propagate(CHAIN)
    dot, tanh, transpose, reshape = _dims(module)
    assert dot == tanh == (("x",), ("y",))
    assert _matches_jax(module, dot, P("x", "y"), 2)
    assert transpose == (("y",), ("x",))
    assert _matches_jax(module, transpose, P("y", "x"), 2)
    # 32 -> 4x8: the split of the major dim lands on the major dim of the run
    assert reshape == (("y",), (), ("x",))
    assert _matches_jax(module, reshape, P("y", None, "x"), 3)
    # the result had no annotation: it gets the propagated one
    assert "#sdy.sharding<@mesh, [{\"y\"}, {}, {\"x\"}]>" in print_module(module)


def test_scalar_broadcast_takes_its_users_sharding_and_reduce_drops_dims():
    module = _propagate(MESH + f"""
func.func public @main(%a: tensor<8x6xf32> {_sdy(("x",), ("y",))}) -> tensor<6xf32> {{
  %c = stablehlo.constant dense<2.0> : tensor<f32>
  %b = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<8x6xf32>
  %m = stablehlo.multiply %b, %a : tensor<8x6xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r = stablehlo.reduce(%m init: %z) applies stablehlo.add across dimensions = [0] :
      (tensor<8x6xf32>, tensor<f32>) -> tensor<6xf32>
  return %r : tensor<6xf32>
}}
""")
    const, bcast, mul, _, reduce = _dims(module)
    assert const == () and bcast == mul == (("x",), ("y",))
    assert reduce == (("y",),)
    lines = explain(module)
    assert any("broadcast_in_dim" in line and "from its user stablehlo.multiply" in line
               for line in lines)
    assert any("stablehlo.multiply" in line and "from operand 1" in line for line in lines)
    assert lines[0] == 'argument 0: #sdy.sharding<@mesh, [{"x"}, {"y"}]>'


def test_conflicts_more_tiles_then_larger_tensor_then_operand_order():
    module = _propagate(MESH + f"""
func.func public @main(%a: tensor<8x8xf32> {_sdy(("x",), ())},
                       %b: tensor<8x8xf32> {_sdy((), ("x",))},
                       %c: tensor<8x8xf32> {_sdy(("x",), ("y",))},
                       %d: tensor<8x64xf32> {_sdy((), ("x",))}) -> tensor<8x64xf32> {{
  %0 = stablehlo.add %a, %b : tensor<8x8xf32>
  %1 = stablehlo.add %a, %c : tensor<8x8xf32>
  %2 = stablehlo.dot_general %0, %d, contracting_dims = [1] x [0] :
      (tensor<8x8xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
  return %2 : tensor<8x64xf32>
}}
""")
    first, second, dot = _dims(module)
    assert first == (("x",), ())  # equal proposals: the earlier operand
    assert second == (("x",), ("y",))  # more tiles
    assert dot == ((), ("x",))  # both want "x": the larger operand (%d) wins
    assert _matches_jax(module, dot, P(None, "x"), 2)


def test_dot_conflict_keeps_the_larger_operands_split_over_a_user_annotated_weight():
    # FSDP's backward: dy (the larger activation, split on batch) times w^T (an annotated
    # weight split on its first dim): both want "x" on different result dims. Keeping the
    # batch split gathers the weight (what XLA does); the weight's split would gather dy.
    module = _propagate(MESH + f"""
func.func public @main(%x: tensor<16x8x32xf32> {_sdy(("x",), (), ())},
                       %w: tensor<64x32xf32> {_sdy(("x",), ())}) -> tensor<16x8x64xf32> {{
  %0 = stablehlo.tanh %x : tensor<16x8x32xf32>
  %1 = stablehlo.dot_general %0, %w, contracting_dims = [2] x [1] :
      (tensor<16x8x32xf32>, tensor<64x32xf32>) -> tensor<16x8x64xf32>
  return %1 : tensor<16x8x64xf32>
}}
""")
    _, dot = _dims(module)
    assert dot == (("x",), (), ())
    assert _matches_jax(module, dot, P("x", None, None), 3)


def test_user_annotations_hold_and_results_keep_their_annotation():
    module = _propagate(MESH + f"""
func.func public @main(%a: tensor<8x8xf32> {_sdy(("x",), ())})
    -> (tensor<8x8xf32> {{sdy.sharding = #sdy.sharding<@mesh, [{{}}, {{}}]>}}) {{
  %0 = stablehlo.negate %a : tensor<8x8xf32>
  %1 = sdy.sharding_constraint %0 <@mesh, [{{}}, {{"x"}}]> : tensor<8x8xf32>
  %2 = stablehlo.abs %1 {{sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{{"y"}}, {{}}]>]>}}
      : tensor<8x8xf32>
  %3 = stablehlo.exponential %2 : tensor<8x8xf32>
  return %3 : tensor<8x8xf32>
}}
""")
    negate, constraint, abs_, exp = _dims(module)
    assert negate == (("x",), ())
    assert constraint == ((), ("x",))
    assert abs_ == (("y",), ())
    assert exp == ((), ())  # the result annotation is a user annotation: it wins
    lines = explain(module)
    assert any("@main result 0 annotation" in line for line in lines)
    assert any("stablehlo.abs" in line and "annotation on the op" in line for line in lines)


def test_gspmd_spelling_gets_a_one_axis_mesh_and_its_constraint_is_read():
    module = _propagate("""
module attributes {mhlo.num_partitions = 8 : i32} {
func.func public @main(%a: tensor<64x8xf32> {mhlo.sharding = "{devices=[8,1]<=[8]}"})
    -> tensor<64x8xf32> {
  %0 = stablehlo.custom_call @Sharding(%a) {mhlo.sharding = "{devices=[1,8]<=[8]}"} :
      (tensor<64x8xf32>) -> tensor<64x8xf32>
  %1 = stablehlo.abs %0 : tensor<64x8xf32>
  return %1 : tensor<64x8xf32>
}
}
""")
    constraint, abs_ = _dims(module)
    assert constraint == abs_ == ((), ("gspmd",))
    text = print_module(module)
    assert 'sdy.mesh @mesh = <["gspmd"=8]>' in text and "mhlo.sharding" not in text


def test_propagated_module_prints_and_parses_back():
    module = _propagate(CHAIN)
    text = print_module(module)
    again = stablehlo.parse(text)
    assert print_module(again) == text
    assert _dims(again) == _dims(module)


@pytest.mark.parametrize("arg, options, error, message", [
    ('{sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}', {}, ShardingError,
     r"@main argument 0: dimension 0 of size 6 cannot be split over mesh axes x"),
    ('{sdy.sharding = #sdy.sharding<@mesh, [{"z"}, {}]>}', {}, ShardingError,
     'unknown mesh axis "z"'),
    ('{sdy.sharding = #sdy.sharding<@other, [{"x"}, {}]>}', {}, ShardingError,
     "names unknown mesh @other"),
    ("", {"num-devices": 4}, ShardingError, "has 8 device.* partitioned for 4"),
])
def test_bad_shardings_are_named(arg, options, error, message):
    text = MESH + f"""
func.func public @main(%a: tensor<6x8xf32> {arg}) -> tensor<6x8xf32> {{
  return %a : tensor<6x8xf32>
}}
"""
    with pytest.raises(error, match=message):
        _propagate(text, **options)


def test_partially_replicated_gspmd_tiles_get_a_mesh_of_two_axes():
    module = _propagate("""
func.func public @main(%a: tensor<8x8xf32>
    {mhlo.sharding = "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"}) -> tensor<8x8xf32> {
  %0 = stablehlo.custom_call @Sharding(%a)
      {mhlo.sharding = "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}"} :
      (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
""")
    text = print_module(module)
    assert 'sdy.mesh @mesh = <["gspmd_0"=2, "gspmd_1"=4]>' in text
    assert '@mesh, [{"gspmd_0"}, {}]' in text
    assert _dims(module) == [((), ("gspmd_1",))]


def test_tokens_are_refused_naming_the_op():
    text = MESH + f"""
func.func public @main(%a: tensor<8xf32> {_sdy(("x",))}) -> tensor<8xf32> {{
  %t = stablehlo.after_all : !stablehlo.token
  return %a : tensor<8xf32>
}}
"""
    with pytest.raises(SpmdUnsupportedError, match="'stablehlo.after_all' result 0 of type "
                                                   "!stablehlo.token: only tensors"):
        _propagate(text)


def test_unannotated_arguments_stay_replicated():
    """JAX lowers an unspecified in_sharding with no attribute and XLA keeps that parameter
    replicated (it propagates into parameters only when asked to): the split operand of the
    add does not split the other argument; the unannotated result takes the split."""
    module = _propagate(MESH + f"""
func.func public @main(%a: tensor<8x8xf32> {_sdy(("x",), ())}, %b: tensor<8x8xf32>)
    -> tensor<8x8xf32> {{
  %0 = stablehlo.add %b, %a : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}}
""")
    (add,) = _dims(module)
    assert add == (("x",), ())
    func = module.lookup("main")
    assert func.arg_attrs(1).get("sdy.sharding").text == "#sdy.sharding<@mesh, [{}, {}]>"
    assert func.result_attrs(0).get("sdy.sharding").text == '#sdy.sharding<@mesh, [{"x"}, {}]>'
