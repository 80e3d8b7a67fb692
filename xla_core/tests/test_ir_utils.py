"""ir_utils: a private function referred to from anywhere inside an attribute stays live."""
from __future__ import annotations

import stablehlo
from xla_core.ir_utils import remove_dead_private_functions

TEXT = """
func.func private @nested(%x: tensor<2xf32>) -> tensor<2xf32> {
  func.return %x : tensor<2xf32>
}
func.func private @unused(%x: tensor<2xf32>) -> tensor<2xf32> {
  func.return %x : tensor<2xf32>
}
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = stablehlo.custom_call @target(%x) {backend_config = {a = {b = [1 : i32, @nested]}}}
      : (tensor<2xf32>) -> tensor<2xf32>
  func.return %y : tensor<2xf32>
}
"""


def test_only_the_unreferenced_private_function_goes():
    module = stablehlo.parse(TEXT)
    assert remove_dead_private_functions(module)
    names = {op.attributes["sym_name"].value for op in module.body.operations}
    assert names == {"main", "nested"}
