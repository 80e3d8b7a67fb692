"""spmd-manual: shard_map/pmap programs become per-device programs (structure and errors;
the runtime runs them in pjrt/tests/test_spmd_execution.py)."""
import pytest

import stablehlo
from xla_core.passes import PassContext, make_pass
from xla_core.spmd import ShardingError, SpmdUnsupportedError, entry_shardings

MESH_1D = 'sdy.mesh @mesh = <["x"=4]>'
MESH_2D = 'sdy.mesh @mesh = <["a"=2, "b"=2]>'


def _lower(text: str):
    module = stablehlo.parse(text)
    changed = make_pass("spmd-manual").run(module, PassContext())
    return module, changed


def _with_body(mesh: str, arg: str, shardings: str, axes: str, inner: str,
               result: str = "tensor<8xf32>") -> str:
    """An entry whose whole body is one manual computation returning its argument."""
    return mesh + f"""
func.func public @main(%arg0: {arg}) -> ({result}) {{
  %0 = sdy.manual_computation(%arg0) {shardings} manual_axes={axes} (%p: {inner}) {{
    sdy.return %p : {inner}
  }} : ({arg}) -> {result}
  return %0 : {result}
}}
"""


def test_programs_needing_the_partitioner_are_refused():
    outside = MESH_1D + """
func.func public @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>})
    -> tensor<8xf32> {
  %0 = stablehlo.negate %arg0 : tensor<8xf32>
  %1 = sdy.manual_computation(%0) in_shardings=[<@mesh, [{"x"}]>]
      out_shardings=[<@mesh, [{"x"}]>] manual_axes={"x"} (%p: tensor<2xf32>) {
    sdy.return %p : tensor<2xf32>
  } : (tensor<8xf32>) -> tensor<8xf32>
  return %1 : tensor<8xf32>
}
"""
    with pytest.raises(SpmdUnsupportedError, match="stablehlo.negate.*outside the shard_map"):
        _lower(outside)
    partial = _with_body(MESH_2D, "tensor<8xf32>", 'in_shardings=[<@mesh, [{"a"}]>] '
                         'out_shardings=[<@mesh, [{"a"}]>]', '{"a"}', "tensor<4xf32>")
    with pytest.raises(SpmdUnsupportedError, match="mesh axes b are not manual"):
        _lower(partial)
    sharded_jit = MESH_1D + """
func.func public @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>})
    -> tensor<8xf32> {
  return %arg0 : tensor<8xf32>
}
"""
    with pytest.raises(SpmdUnsupportedError, match="argument 0 is sharded"):
        _lower(sharded_jit)


def test_bad_shardings_are_errors_before_running():
    indivisible = _with_body(MESH_1D, "tensor<6xf32>", 'in_shardings=[<@mesh, [{"x"}]>] '
                             'out_shardings=[<@mesh, [{"x"}]>]', '{"x"}', "tensor<2xf32>",
                             result="tensor<8xf32>")
    with pytest.raises(ShardingError, match="size 6 cannot be split.*4 does not divide 6"):
        _lower(indivisible)
    unknown_axis = _with_body(MESH_1D, "tensor<8xf32>", 'in_shardings=[<@mesh, [{"y"}]>] '
                              'out_shardings=[<@mesh, [{"x"}]>]', '{"x"}', "tensor<2xf32>")
    with pytest.raises(ShardingError, match='unknown mesh axis "y"'):
        _lower(unknown_axis)
    wrong_piece = _with_body(MESH_1D, "tensor<8xf32>", 'in_shardings=[<@mesh, [{"x"}]>] '
                             'out_shardings=[<@mesh, [{"x"}]>]', '{"x"}', "tensor<4xf32>")
    with pytest.raises(ShardingError, match=r"pieces of shape \[2\]"):
        _lower(wrong_piece)


def test_entry_takes_and_returns_pieces_with_their_shardings():
    text = _with_body(MESH_2D, "tensor<8x6xf32>", 'in_shardings=[<@mesh, [{"b"}, {"a"}]>] '
                      'out_shardings=[<@mesh, [{"b"}, {"a"}]>]', '{"a", "b"}',
                      "tensor<4x3xf32>", result="tensor<8x6xf32>")
    module, changed = _lower(text)
    assert changed and "openhlo.spmd_partitioned" in module.attributes
    main = module.lookup("main")
    assert [t.shape for t in main.type.inputs] == [(4, 3)]
    assert [t.shape for t in main.type.results] == [(4, 3)]
    assert not any(op.name.startswith("sdy.") for op in main.op.walk())
    assert str(main.arg_attrs(0).get("sdy.sharding").text) == \
        '#sdy.sharding<@mesh, [{"b"}, {"a"}]>'
    params, results = entry_shardings(module, "main")
    assert params[0].devices.tolist() == [[0, 2], [1, 3]] == results[0].devices.tolist()
    stablehlo.parse(str(module))  # the per-device program prints and verifies
    assert _lower(str(module))[1] is False  # marked: a second run leaves it alone
