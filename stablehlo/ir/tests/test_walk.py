"""Walking ops: Operation/Block/Region/Func/Module.walk visit nested regions in pre-order."""
from __future__ import annotations

import stablehlo

# The reduce's body (a region) holds an add; the while's cond and body hold more ops.
TEXT = """
func.func @main(%x: tensor<4xf32>, %n: tensor<i32>) -> tensor<f32> {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %sum = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0]
      : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
  %r:2 = stablehlo.while(%i = %n, %acc = %sum) : tensor<i32>, tensor<f32>
  cond {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %p = stablehlo.compare GT, %i, %c : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.subtract %i, %one : tensor<i32>
    %twice = stablehlo.add %acc, %acc : tensor<f32>
    stablehlo.return %next, %twice : tensor<i32>, tensor<f32>
  }
  func.return %r#1 : tensor<f32>
}
"""

BODY_OPS = [
    "stablehlo.constant", "stablehlo.reduce", "stablehlo.add", "stablehlo.return",
    "stablehlo.while",
    "stablehlo.constant", "stablehlo.compare", "stablehlo.return",
    "stablehlo.constant", "stablehlo.subtract",
    "stablehlo.add", "stablehlo.return",
    "func.return",
]


def test_func_walk_visits_the_body_and_nested_regions_in_pre_order():
    func = stablehlo.parse(TEXT).lookup("main")
    assert [op.name for op in func.walk()] == BODY_OPS
    assert [op.name for op in func.body.walk()] == BODY_OPS


def test_operation_region_and_module_walks_include_what_they_start_from():
    module = stablehlo.parse(TEXT)
    func = module.lookup("main")
    assert [op.name for op in module.walk()] == ["builtin.module", "func.func", *BODY_OPS]
    assert [op.name for op in func.op.walk()] == ["func.func", *BODY_OPS]
    (while_op,) = [op for op in func.walk() if op.name == "stablehlo.while"]
    cond, body = while_op.regions
    assert [op.name for op in cond.walk()] == [
        "stablehlo.constant", "stablehlo.compare", "stablehlo.return"]
    assert [op.name for op in body.block.walk()] == [
        "stablehlo.constant", "stablehlo.subtract", "stablehlo.add", "stablehlo.return"]
    assert [op.name for op in while_op.walk()][0] == "stablehlo.while"
