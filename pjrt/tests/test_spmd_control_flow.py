"""Propagation and partitioning through while, case and if: the carried values keep one
sharding through the loop, branches yield the result's layout, the regions run on pieces.
Each program is partitioned for 8 virtual cpu devices, run from global arguments and compared
with the unsharded program on the reference interpreter."""
import numpy as np
import pytest

import stablehlo
from pjrt.tests.spmd_support import reference, run_partitioned
from xla_core.passes import PassContext, make_pass
from xla_core.spmd.annotations import module_mesh, op_dims
from xla_core.spmd.propagation import explain
from xla_core.spmd.summary import collectives

SPLIT = '{sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}'
LOOP = f"""
sdy.mesh @mesh = <["x"=8]>
func.func public @main(%h: tensor<16x32xf32> {SPLIT}, %w: tensor<32x32xf32>)
    -> tensor<16x32xf32> {{
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %acc = stablehlo.broadcast_in_dim %z, dims = [] : (tensor<f32>) -> tensor<16x32xf32>
  %r:4 = stablehlo.while(%i = %c0, %a = %h, %b = %w, %s = %acc)
      : tensor<i32>, tensor<16x32xf32>, tensor<32x32xf32>, tensor<16x32xf32>
  cond {{
    %n = stablehlo.constant dense<3> : tensor<i32>
    %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  }} do {{
    %d = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] :
        (tensor<16x32xf32>, tensor<32x32xf32>) -> tensor<16x32xf32>
    %t = stablehlo.tanh %d : tensor<16x32xf32>
    %s2 = stablehlo.add %s, %t : tensor<16x32xf32>
    %one = stablehlo.constant dense<1> : tensor<i32>
    %j = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %j, %t, %b, %s2 : tensor<i32>, tensor<16x32xf32>, tensor<32x32xf32>,
        tensor<16x32xf32>
  }}
  return %r#3 : tensor<16x32xf32>
}}
"""


def _propagated(text: str):
    module = stablehlo.parse(text)
    make_pass("sharding-propagation", {}).run(module, PassContext())
    return module, module_mesh(module, module.lookup("main"), 0)


def test_while_carries_one_sharding_through_the_loop():
    module, info = _propagated(LOOP)
    ops = {op.name: op for op in module.lookup("main").op.walk()}
    counter, carry, weight, acc = op_dims(info, ops["stablehlo.while"])
    assert counter == () and weight == ((), ())
    assert carry == (("x",), ())
    # the accumulator starts as a broadcast of zero: it takes the layout the body adds into it
    assert acc == (("x",), ()) and op_dims(info, ops["stablehlo.broadcast_in_dim"])[0] == acc
    assert op_dims(info, ops["stablehlo.tanh"])[0] == carry
    assert op_dims(info, ops["stablehlo.compare"])[0] == ()
    assert any("stablehlo.add" in line and "as its loop carry" in line
               for line in explain(module))


def test_while_runs_on_pieces_without_collectives():
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((16, 32)).astype(np.float32),
            (rng.standard_normal((32, 32)) * 0.2).astype(np.float32)]
    got, exe = run_partitioned(LOOP, args, 8)
    np.testing.assert_allclose(got[0], reference(LOOP, args)[0], rtol=1e-5, atol=1e-5)
    module = exe.executable.module
    assert collectives(module) == []  # XLA emits none for this loop either
    (loop,) = [op for op in module.walk() if op.name == "stablehlo.while"]
    assert [tuple(r.type.shape) for r in loop.results] == [(), (2, 32), (32, 32), (2, 32)]


BRANCHES = f"""
sdy.mesh @mesh = <["x"=8]>
func.func public @main(%p: tensor<PRED>, %x: tensor<16x32xf32> {SPLIT}) -> tensor<16x32xf32> {{
  %r = "stablehlo.OP"(%p) ({{
      %a = stablehlo.tanh %x : tensor<16x32xf32>
      stablehlo.return %a : tensor<16x32xf32>
    }}, {{
      %c = stablehlo.constant dense<2.0> : tensor<f32>
      %b = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<16x32xf32>
      %m = stablehlo.multiply %x, %b : tensor<16x32xf32>
      stablehlo.return %m : tensor<16x32xf32>
    }}) : (tensor<PRED>) -> tensor<16x32xf32>
  return %r : tensor<16x32xf32>
}}
"""


@pytest.mark.parametrize("op, pred, values", [("case", "i32", (0, 1, 5)),
                                              ("if", "i1", (True, False))])
def test_branches_are_partitioned_with_the_result_sharding(op, pred, values):
    text = BRANCHES.replace("PRED", pred).replace("OP", op)
    module, info = _propagated(text)
    (branch,) = [o for o in module.lookup("main").body.operations if o.name == f"stablehlo.{op}"]
    assert op_dims(info, branch) == [(("x",), ())]
    x = np.random.default_rng(1).standard_normal((16, 32)).astype(np.float32)
    for value in values:
        args = [np.asarray(value, dtype=np.int32 if pred == "i32" else np.bool_), x]
        got, exe = run_partitioned(text, args, 8)
        np.testing.assert_allclose(got[0], reference(text, args)[0], rtol=1e-6)
        assert collectives(exe.executable.module) == []
