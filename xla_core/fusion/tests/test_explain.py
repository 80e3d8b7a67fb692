"""Explanation lines name values as the printer names them (explain.py), so every line can be
found in the text of the module as printed before fusion, even for values without a name hint
(the values passes create)."""
import re

import stablehlo
from stablehlo.text import print_module
from xla_core.fusion import Explain, fuse_module

TEXT = """
func.func @main(%a: tensor<8x16xf32>, %b: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8xf32>) {
  %scaled = stablehlo.multiply %a, %b : tensor<8x16xf32>
  %e = stablehlo.exponential %scaled : tensor<8x16xf32>
  %sum = stablehlo.add %e, %scaled : tensor<8x16xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %row = stablehlo.reduce(%sum init: %zero) applies stablehlo.add across dimensions = [1]
      : (tensor<8x16xf32>, tensor<f32>) -> tensor<8xf32>
  %s = stablehlo.sine %e : tensor<8x16xf32>
  %t = stablehlo.create_token : !stablehlo.token
  %out = "stablehlo.outfeed"(%s, %t) : (tensor<8x16xf32>, !stablehlo.token) -> !stablehlo.token
  %c = stablehlo.cosine %s : tensor<8x16xf32>
  return %c, %row : tensor<8x16xf32>, tensor<8xf32>
}
"""


def _explained(strip_hints: bool):
    module = stablehlo.parse(TEXT, "test.mlir")
    if strip_hints:
        for op in module.lookup("main").op.walk():
            for value in op.results:
                value.name_hint = None
    printed = print_module(module)
    explain = fuse_module(module, hardware="generic-cpu", explain=Explain(True))
    return printed, "\n".join(explain.lines)


def test_explained_values_are_named_as_printed():
    for strip_hints in (False, True):
        printed, lines = _explained(strip_hints)
        defined = dict(re.findall(r"^\s*(%\w+) = \"?([\w.]+)", printed, re.M))
        described = re.findall(r"(%[\w#]+) \(([\w.]+) @ test\.mlir:\d+", lines)
        # fused, refused, merged and not-fusible lines, each value as the printer wrote it
        assert {"fused", "refused", "merged"} <= set(re.findall(r"^(\w+) %", lines, re.M))
        assert len(described) >= 8
        for name, op in described:
            assert defined[name] == op, (name, op, printed)
        assert "%<" not in lines
        # the source's own names (%e, %s) are not what the printer shows
        assert "%e " not in lines and "%s " not in lines
        assert "consumer %6 (stablehlo.outfeed @ test.mlir:11) is not fusible" in lines
