"""The FORMATS registry covers every op declaration, and single ops print on their own."""
from __future__ import annotations

from stablehlo.ir.ops import OPS
from stablehlo.text import parse_module, print_op
from stablehlo.text.formats import FORMATS


def test_every_declared_syntax_has_a_format():
    missing = sorted({(OPS.get(name).syntax, name) for name in OPS.names()
                      if OPS.get(name).syntax != "generic"
                      and OPS.get(name).syntax not in FORMATS})
    assert missing == []


def test_print_single_op_pretty_and_generic():
    module = parse_module("func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
                          "  %0 = stablehlo.add %a, %a : tensor<2xf32>\n"
                          "  return %0 : tensor<2xf32>\n}")
    add = module.functions()[0].body.operations[0]
    # values defined outside the printed op have no name, as in MLIR
    assert print_op(add) == "%0 = stablehlo.add <<UNKNOWN SSA VALUE>>, <<UNKNOWN SSA VALUE>>" \
                            " : tensor<2xf32>"
    func_text = print_op(module.functions()[0].op, generic=True)
    assert func_text.startswith('"func.func"() <{function_type = (tensor<2xf32>) -> '
                                'tensor<2xf32>, sym_name = "f"}> ({\n^bb0(%arg0: tensor<2xf32>):')
