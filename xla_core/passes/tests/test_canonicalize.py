"""canonicalize keeps results bit for bit: the interpreter gives identical bytes before and
after the pass on the golden programs, with random inputs full of NaN, signed zeros,
infinities and extreme values; the pass reaches its fixpoint in one run; and every
compare direction mirrors correctly on every pair of special values."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import stablehlo
from stablehlo.interpreter import evaluate
from stablehlo.text import print_module
from xla_core.passes import PassContext, Pipeline, parse_pass_list
from xla_core.passes.tests.exact_values import golden_programs
from xla_core.passes.tests.exact_values import same as _same
from xla_core.passes.tests.exact_values import sample as _sample

GOLDEN = Path(__file__).with_name("canonicalize.mlir")


def _canonicalize(module) -> bool:
    return Pipeline("t", parse_pass_list("canonicalize")).run(module, PassContext())


@pytest.mark.parametrize("entry, chunk", golden_programs(GOLDEN))
@pytest.mark.parametrize("seed", range(4))
def test_golden_programs_keep_their_results(entry, chunk, seed):
    module = stablehlo.parse(chunk)
    func = module.lookup(entry)
    rng = np.random.default_rng(seed)
    args = [_sample(t, rng) for t in func.type.inputs]
    before = evaluate(module, args, entry)
    assert _canonicalize(module)
    after = evaluate(module, args, entry)
    for index, (a, b) in enumerate(zip(_flat(before), _flat(after))):
        assert _same(a, b), f"result {index} of @{entry} changed\n{print_module(module)}"


def _flat(values) -> list:
    """Arrays, tuple results flattened in order."""
    out = []
    for value in values:
        out.extend(_flat(value) if isinstance(value, tuple) else [value])
    return out


@pytest.mark.parametrize("entry, chunk", golden_programs(GOLDEN))
def test_a_second_run_changes_nothing(entry, chunk):
    module = stablehlo.parse(chunk)
    assert _canonicalize(module)
    assert not _canonicalize(module)


@pytest.mark.parametrize("direction", ["EQ", "NE", "LT", "LE", "GT", "GE"])
@pytest.mark.parametrize("compare_type", ["FLOAT", "TOTALORDER"])
def test_mirrored_compares_on_special_values(direction, compare_type):
    specials = np.array([np.nan, -np.nan, -0.0, 0.0, np.inf, -np.inf, 1.0, -1.0], np.float32)
    n = len(specials)
    text = f"""
    func.func public @main(%x: tensor<{n}xf32>) -> tensor<{n}x{n}xi1> {{
      %c = stablehlo.constant dense<{list(map(float, specials))}> : tensor<{n}xf32>
      %cb = stablehlo.broadcast_in_dim %c, dims = [0] : (tensor<{n}xf32>) -> tensor<{n}x{n}xf32>
      %xb = stablehlo.broadcast_in_dim %x, dims = [1] : (tensor<{n}xf32>) -> tensor<{n}x{n}xf32>
      %0 = stablehlo.compare {direction}, %cb, %xb, {compare_type}
          : (tensor<{n}x{n}xf32>, tensor<{n}x{n}xf32>) -> tensor<{n}x{n}xi1>
      func.return %0 : tensor<{n}x{n}xi1>
    }}""".replace("nan", "0x7FC00000").replace("inf", "0x7F800000")
    text = text.replace("-0x7FC00000", "0xFFC00000").replace("-0x7F800000", "0xFF800000")
    module = stablehlo.parse(text)
    before = evaluate(module, [specials])
    assert _canonicalize(module)
    compare = next(op for op in module.walk() if op.name == "stablehlo.compare")
    assert compare.operands[0].owner.operands[0].is_block_argument  # x moved to the left
    after = evaluate(module, [specials])
    assert _same(before[0], after[0])
