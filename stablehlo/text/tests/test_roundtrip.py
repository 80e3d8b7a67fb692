"""print(parse(t)) is a fixed point on every conformance program, in both forms.

For each ``// -----`` chunk of every conformance file: printing, re-parsing and printing again
gives the same text (pretty and generic), and the generic text parses back to the same pretty
text (the two forms describe the same IR). The whole suite takes a few seconds, so it is not
marked slow.
"""
from __future__ import annotations

import pytest

from stablehlo.text import parse_module, print_module
from stablehlo.tests.mlir_oracle import ROOT, conformance_chunks

FOLDERS = ["interpret", "interpret/chlo", "testdata", "testdata/dynamic", "testdata/quantized",
           "testdata_chlo_legalized"]

pytestmark = pytest.mark.skipif(not __import__("os").path.isdir(ROOT),
                                reason="conformance suite not found")


def _failures(folder: str) -> list[str]:
    failures = []
    for path, index, chunk in conformance_chunks(folder):
        where = f"{path}#{index}"
        module = parse_module(chunk, path)
        pretty = print_module(module)
        generic = print_module(module, generic=True)
        if print_module(parse_module(pretty)) != pretty:
            failures.append(f"{where}: pretty form is not a fixed point")
        if print_module(parse_module(generic), generic=True) != generic:
            failures.append(f"{where}: generic form is not a fixed point")
        if print_module(parse_module(generic)) != pretty:
            failures.append(f"{where}: generic form does not parse back to the same IR")
    return failures


@pytest.mark.parametrize("folder", FOLDERS)
def test_fixed_point(folder):
    chunks = list(conformance_chunks(folder))
    assert chunks, f"no programs found in {folder}"
    assert _failures(folder) == []


def test_reparse_keeps_structure():
    """The printed text names the same ops, values and attributes as the source."""
    path, _, chunk = next(conformance_chunks("testdata"))
    module = parse_module(chunk, path)
    again = parse_module(print_module(module))
    ops_a = [(op.name, len(op.operands), op.result_types, sorted(op.attributes))
             for op in module.walk()]
    ops_b = [(op.name, len(op.operands), op.result_types, sorted(op.attributes))
             for op in again.walk()]
    assert ops_a == ops_b
    for op_a, op_b in zip(module.walk(), again.walk()):
        assert op_a.attributes == op_b.attributes
