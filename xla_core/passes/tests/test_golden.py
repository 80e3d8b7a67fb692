"""Golden tests: every ``<pass>.mlir`` in this folder against its CHECK lines.

Each file's RUN line has the form
``// RUN: openhlo opt %s --split-input-file --passes=LIST | filecheck %s``.
This driver does what that line says through the xla_core API (parse and
verify each chunk, run the passes with verification after each, print) and
checks the printed output with xla_core.testing.filecheck. The expected
output is the CHECK lines, written by hand from the passes' contracts.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import stablehlo
from stablehlo.text import print_module, split_input_file
from xla_core.passes import PassContext, Pipeline, parse_pass_list
from xla_core.testing.filecheck import check

HERE = Path(__file__).parent
GOLDEN = sorted(HERE.glob("*.mlir"))
_RUN = re.compile(r"^// RUN: openhlo opt %s (--split-input-file )?--passes=(\S+) \| filecheck %s$",
                  re.M)


def run_golden(text: str, name: str) -> str:
    m = _RUN.search(text)
    assert m, f"{name}: RUN line not understood"
    chunks = [c for _, _, c in split_input_file(text)] if m.group(1) else [text]
    outputs = []
    for chunk in chunks:
        module = stablehlo.parse(chunk, name)
        Pipeline("golden", parse_pass_list(m.group(2))).run(module, PassContext())
        outputs.append(print_module(module))
    return "\n// -----\n".join(outputs)


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.name)
def test_golden_file(path: Path):
    text = path.read_text()
    check(run_golden(text, path.name), text, ("CHECK",))


def test_every_registered_pass_has_a_golden_file():
    from xla_core.passes import PASSES
    assert {p.stem for p in GOLDEN} >= {str(n) for n in PASSES.names()}
