"""nested_values: the one attribute walker finds what lies at any depth of a parsed attribute."""
from __future__ import annotations

import stablehlo
from stablehlo.ir.attributes import IntegerAttr, SymbolRefAttr, nested_values

TEXT = """
func.func private @g(%x: tensor<2xf32>) -> tensor<2xf32> {
  func.return %x : tensor<2xf32>
}
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = stablehlo.custom_call @target(%x) {called_computations = [@g],
      backend_config = {outer = {inner = [7 : i32, @deep]}}} : (tensor<2xf32>) -> tensor<2xf32>
  func.return %y : tensor<2xf32>
}
"""


def _call():
    module = stablehlo.parse(TEXT)
    return next(op for op in module.lookup("main").walk() if op.name == "stablehlo.custom_call")


def test_symbols_and_integers_at_every_depth():
    call = _call()
    found = [v for attr in call.attributes.values() for v in nested_values(attr)]
    symbols = {v.name for v in found if isinstance(v, SymbolRefAttr)}
    assert {"g", "deep"} <= symbols
    assert 7 in {v.value for v in found if isinstance(v, IntegerAttr)}


def test_struct_fields_are_visited():
    module = stablehlo.parse("""
func.func @main(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  %c = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]
      : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  func.return %c : tensor<2x4xf32>
}
""")
    dot = next(op for op in module.lookup("main").walk() if op.name == "stablehlo.dot_general")
    values = list(nested_values(dot.attributes["dot_dimension_numbers"]))
    assert (1,) in values and (0,) in values  # the two contracting-dimension lists
