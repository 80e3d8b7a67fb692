"""Structural fingerprints agree with the printer: modules that print the same get the same
fingerprint, and what changes the printed text changes it."""
import numpy as np
import pytest

import stablehlo
from stablehlo.ir.attributes import DenseElementsAttr
from stablehlo.text import print_module
from xla_core.compile import module_fingerprint
from xla_core.ir_utils import clone_operation
from stablehlo.ir.core import Module
from xla_core.testing.conformance import conformance_dir

PROGRAM = """
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %c = stablehlo.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %y = stablehlo.add %x, %c : tensor<3xf32>
  %z = stablehlo.multiply %y, %x : tensor<3xf32>
  return %z : tensor<3xf32>
}
"""


def _corpus(count: int) -> list:
    folder = conformance_dir("testdata")
    if folder is None:
        pytest.skip("conformance suites not found")
    return sorted(folder.glob("*.mlir"), key=lambda p: (p.stat().st_size, p.name))[:count]


def test_printing_and_parsing_back_keeps_the_fingerprint():
    for path in _corpus(40):
        module = stablehlo.parse(path.read_text(), str(path))
        again = stablehlo.parse(print_module(module))
        assert module_fingerprint(again) == module_fingerprint(module), path.name
        assert module_fingerprint(Module(clone_operation(module.op, {}))) == \
            module_fingerprint(module), path.name


def test_different_programs_get_different_fingerprints():
    texts = [path.read_text() for path in _corpus(40)]
    by_print = {print_module(stablehlo.parse(t)) for t in texts}
    assert len({module_fingerprint(stablehlo.parse(t)) for t in texts}) == len(by_print)


@pytest.mark.parametrize("edit", [
    ("stablehlo.add %x, %c", "stablehlo.add %c, %x"),           # operand order
    ("stablehlo.multiply %y, %x", "stablehlo.multiply %y, %y"),  # which value is used
    ("[1.0, 2.0, 3.0]", "[1.0, 2.0, 4.0]"),                      # a constant's content
    ("stablehlo.multiply", "stablehlo.subtract"),                # an op
])
def test_each_edit_changes_the_fingerprint(edit):
    edited = PROGRAM.replace(*edit)
    assert print_module(stablehlo.parse(edited)) != print_module(stablehlo.parse(PROGRAM))
    assert module_fingerprint(stablehlo.parse(edited)) != \
        module_fingerprint(stablehlo.parse(PROGRAM))


def test_a_splat_fingerprints_alike_however_it_is_held():
    splat = stablehlo.parse(PROGRAM.replace("[1.0, 2.0, 3.0]", "2.0"))
    listed = stablehlo.parse(PROGRAM.replace("[1.0, 2.0, 3.0]", "[2.0, 2.0, 2.0]"))
    assert print_module(splat) == print_module(listed)
    assert module_fingerprint(splat) == module_fingerprint(listed)
    constant = listed.lookup("main").body.operations[0]
    value = constant.attributes["value"]
    constant.attributes["value"] = DenseElementsAttr(value.type,
                                                     np.full(3, 2.0, dtype=np.float32))
    assert module_fingerprint(listed) == module_fingerprint(splat)
