"""prune-argreduce-index keeps the values bit for bit: the interpreter gives identical bytes
before and after the pass, on the golden programs and on argmax/argmin bodies that take an
equal pair's value from either side, over windows with padding, strides, dilations and
folds past the interpreter's sequential limit (its pairwise tree), with inputs full of
signed zeros, NaNs and ties."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import stablehlo
from stablehlo.interpreter import evaluate
from stablehlo.text import print_module
from xla_core.passes import PassContext, Pipeline, parse_pass_list
from xla_core.passes.tests.exact_values import golden_programs, same, sample

GOLDEN = Path(__file__).with_name("prune-argreduce-index.mlir")


def _prune(module) -> bool:
    return Pipeline("t", parse_pass_list("prune-argreduce-index,dce")).run(module,
                                                                           PassContext())


def _ties(shape, rng) -> np.ndarray:
    """Few distinct values: both zeros, NaN, infinities."""
    pool = np.array([0.0, -0.0, 0.0, -0.0, 1.5, -np.inf, np.inf, np.nan], np.float32)
    return rng.choice(pool, size=shape)


@pytest.mark.parametrize("entry, chunk", golden_programs(GOLDEN))
@pytest.mark.parametrize("seed", range(3))
def test_golden_programs_keep_their_values(entry, chunk, seed):
    module = stablehlo.parse(chunk)
    rng = np.random.default_rng(seed)
    inputs = [sample(module.lookup(entry).type.inputs[0], rng)]
    inputs.append(_ties(inputs[0].shape, rng))
    for x in inputs:
        before = evaluate(stablehlo.parse(chunk), [x], entry)
        _prune(module)
        after = evaluate(module, [x], entry)
        assert all(same(a, b) for a, b in zip(before, after)), entry


# An equal pair's value from the second pair (JAX's argmax, NaN wins), or from the first
# (an argmin without NaN tests).
_BODIES = {
    "jax_argmax": """
      %better = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %nan = stablehlo.compare NE, %a, %a, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %pick = stablehlo.or %better, %nan : tensor<i1>
      %eq = stablehlo.compare EQ, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %lt = stablehlo.compare LT, %i, %j, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %tie = stablehlo.and %eq, %lt : tensor<i1>
      %pick_index = stablehlo.or %pick, %tie : tensor<i1>
      %v = stablehlo.select %pick, %a, %b : tensor<i1>, tensor<f32>
      %k = stablehlo.select %pick_index, %i, %j : tensor<i1>, tensor<i32>""",
    "plain_argmin": """
      %lt = stablehlo.compare LT, %b, %a, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %eq = stablehlo.compare EQ, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %later = stablehlo.compare GT, %i, %j, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %tie = stablehlo.and %eq, %later : tensor<i1>
      %pick = stablehlo.or %lt, %tie : tensor<i1>
      %v = stablehlo.select %pick, %b, %a : tensor<i1>, tensor<f32>
      %k = stablehlo.select %pick, %j, %i : tensor<i1>, tensor<i32>""",
}
# (shape, window attributes, result shape)
_WINDOWS = [
    ((3, 9, 8), "window_dimensions = array<i64: 1, 3, 3>, window_strides = array<i64: 1, 2, 2>, "
     "padding = dense<[[0, 0], [1, 1], [1, 1]]> : tensor<3x2xi64>", (3, 5, 4)),
    ((2, 7, 7), "window_dimensions = array<i64: 1, 2, 2>, window_strides = array<i64: 1, 2, 1>, "
     "padding = dense<[[0, 0], [0, 1], [0, 0]]> : tensor<3x2xi64>, "
     "base_dilations = array<i64: 1, 1, 2>, window_dilations = array<i64: 1, 2, 1>", (2, 3, 12)),
    ((1, 20, 18), "window_dimensions = array<i64: 1, 17, 17>, "
     "window_strides = array<i64: 1, 2, 1>, "
     "padding = dense<[[0, 0], [1, 0], [0, 0]]> : tensor<3x2xi64>", (1, 3, 2)),
]


def _program(body: str, shape, attrs: str, out) -> str:
    """A pooling of ``shape`` by body ``body`` (a name of _BODIES) returning its values, the
    indices numbering the elements in row-major order."""
    size = int(np.prod(shape))
    dims = "x".join(map(str, shape))
    outs = "x".join(map(str, out))
    init = "0x7F800000" if "argmin" in body else "0xFF800000"
    return f"""func.func public @main(%x: tensor<{dims}xf32>) -> tensor<{outs}xf32> {{
  %flat = stablehlo.iota dim = 0 : tensor<{size}xi32>
  %idx = stablehlo.reshape %flat : (tensor<{size}xi32>) -> tensor<{dims}xi32>
  %init = stablehlo.constant dense<{init}> : tensor<f32>
  %m1 = stablehlo.constant dense<-1> : tensor<i32>
  %p:2 = "stablehlo.reduce_window"(%x, %idx, %init, %m1) ({{
    ^bb0(%a: tensor<f32>, %i: tensor<i32>, %b: tensor<f32>, %j: tensor<i32>):{_BODIES[body]}
      stablehlo.return %v, %k : tensor<f32>, tensor<i32>
  }}) {{{attrs}}} : (tensor<{dims}xf32>, tensor<{dims}xi32>, tensor<f32>, tensor<i32>)
    -> (tensor<{outs}xf32>, tensor<{outs}xi32>)
  func.return %p#0 : tensor<{outs}xf32>
}}
"""


@pytest.mark.parametrize("body", sorted(_BODIES))
@pytest.mark.parametrize("shape, attrs, out", _WINDOWS)
def test_either_side_of_a_tie_keeps_its_bits(body, shape, attrs, out):
    text = _program(body, shape, attrs, out)
    module = stablehlo.parse(text)
    assert _prune(module)
    assert "stablehlo.iota" not in print_module(module)  # the index operand went
    rng = np.random.default_rng(len(shape))
    for _ in range(3):
        x = _ties(shape, rng)
        before = evaluate(stablehlo.parse(text), [x])
        after = evaluate(module, [x])
        assert same(before[0], after[0]), body
