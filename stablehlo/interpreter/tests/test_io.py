"""Tokens, outfeed, printing: the value text is checked against the FileCheck lines
of the upstream suite's printing.mlir (the file's own expectations)."""
import io
import os
import re

import numpy as np
import pytest

from stablehlo.interpreter import evaluate
from stablehlo.interpreter.evaluator import find_entry
from stablehlo.interpreter.io import format_value
from stablehlo.text import parse_module, split_input_file

SUITE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "conformance",
                     "stablehlo", "interpret")


def suite_chunks(name):
    path = os.path.join(SUITE, name)
    if not os.path.exists(path):
        pytest.skip(f"conformance suite not available: {path}")
    with open(path) as f:
        return [chunk for _, _, chunk in split_input_file(f.read())]


def check_lines(chunk, prefix):
    """(is_next, text) of the ``// PREFIX:`` / ``// PREFIX-NEXT:`` lines of a chunk."""
    pattern = re.compile(rf"//\s*{prefix}(-NEXT)?(?:\{{LITERAL\}})?:(.*)$")
    found = []
    for line in chunk.splitlines():
        match = pattern.search(line)
        if match:
            found.append((match.group(1) is not None, match.group(2).strip()))
    return found


def filecheck(output, checks):
    """A small FileCheck: lines in order, -NEXT on the next line, spaces collapsed."""
    lines = [" ".join(line.split()) for line in output.splitlines()]
    at = -1
    for is_next, text in checks:
        text = " ".join(text.split())
        if is_next:
            at += 1
            assert at < len(lines) and text in lines[at], f"CHECK-NEXT: {text!r} at line {at}"
        else:
            at = next((i for i in range(at + 1, len(lines)) if text in lines[i]), None)
            assert at is not None, f"CHECK: {text!r} not found"


@pytest.mark.parametrize("chunk_index", [0, 1, 2])
@pytest.mark.parametrize("dense, prefix", [(False, "CHECK"), (True, "CHECK-DENSE")])
def test_result_text_matches_printing_suite(chunk_index, dense, prefix):
    chunk = suite_chunks("printing.mlir")[chunk_index]
    module = parse_module(chunk, "printing.mlir")
    results = evaluate(module)
    types = find_entry(module).type.results
    output = "\n".join(format_value(v, t, dense=dense) for v, t in zip(results, types))
    filecheck(output, check_lines(chunk, prefix))


def test_print_op_inside_run_parallel_is_not_interleaved():
    chunk = suite_chunks("printing.mlir")[3]
    out = io.StringIO()
    evaluate(parse_module(chunk, "printing.mlir"), stdout=out)
    filecheck(out.getvalue(), check_lines(chunk, "CHECK"))
    assert out.getvalue().count("%0 = tensor<2xi32> {\n  [0, 1]\n}\n") == 2


def test_scalar_and_bool_text():
    from stablehlo.text import parse_type
    assert format_value(np.float32(2.5), parse_type("tensor<f32>")) == "tensor<f32> {2.500000e+00}"
    assert format_value(np.bool_([True, False]), parse_type("tensor<2xi1>")) == \
        "tensor<2xi1> {\n  [true, false]\n}"
