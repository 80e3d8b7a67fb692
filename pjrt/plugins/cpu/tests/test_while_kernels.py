"""Whole loops as one generated kernel (xla_core/codegen/while_loop.py) after fusion: the
loop kinds of issue 19 (elementwise steps, an Euler integrator, a scan over stacked layer
weights, a sampling loop with softmax reductions, a scan with stacked outputs, carried values
that trade places), each
checked bit for bit against the same program whose loop the executor runs (the same fusion
kernels, called per instruction) and against the reference interpreter."""
from __future__ import annotations

import numpy as np
import pytest

import pjrt
import stablehlo
from pjrt.plugins.cpu.codegen import program
from stablehlo.interpreter import evaluate

COUNTER = """
    cond {{
      %n = stablehlo.constant dense<{steps}> : tensor<i32>
      %go = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %go : tensor<i1>
    }} do {{
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>"""

ELEMENTWISE = """
func.func @main(%x: tensor<64xf32>) -> tensor<64xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, tensor<64xf32>""" + \
    COUNTER.format(steps=50) + """
      %a = stablehlo.constant dense<0.99> : tensor<64xf32>
      %b = stablehlo.constant dense<0.01> : tensor<64xf32>
      %t = stablehlo.tanh %v : tensor<64xf32>
      %m = stablehlo.multiply %v, %a : tensor<64xf32>
      %s = stablehlo.multiply %t, %b : tensor<64xf32>
      %v1 = stablehlo.add %m, %s : tensor<64xf32>
      stablehlo.return %i1, %v1 : tensor<i32>, tensor<64xf32>
    }
  return %r#1 : tensor<64xf32>
}"""

EULER = """
func.func @main(%x: tensor<32xf32>, %u: tensor<32xf32>) -> (tensor<32xf32>, tensor<32xf32>) {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:3 = stablehlo.while(%i = %c0, %p = %x, %v = %u)
      : tensor<i32>, tensor<32xf32>, tensor<32xf32>""" + \
    COUNTER.format(steps=100) + """
      %k = stablehlo.constant dense<-4.0> : tensor<32xf32>
      %dt = stablehlo.constant dense<0.001> : tensor<32xf32>
      %kx = stablehlo.multiply %p, %k : tensor<32xf32>
      %sx = stablehlo.sine %p : tensor<32xf32>
      %acc = stablehlo.add %kx, %sx : tensor<32xf32>
      %dv = stablehlo.multiply %acc, %dt : tensor<32xf32>
      %dp = stablehlo.multiply %v, %dt : tensor<32xf32>
      %p1 = stablehlo.add %p, %dp : tensor<32xf32>
      %v1 = stablehlo.add %v, %dv : tensor<32xf32>
      stablehlo.return %i1, %p1, %v1 : tensor<i32>, tensor<32xf32>, tensor<32xf32>
    }
  return %r#1, %r#2 : tensor<32xf32>, tensor<32xf32>
}"""

# lax.scan over stacked weights; the weights come back out unchanged (an aliased result).
SCAN = """
func.func @main(%h: tensor<2x8xf32>, %ws: tensor<3x8x8xf32>, %bs: tensor<3x8xf32>)
    -> (tensor<2x8xf32>, tensor<3x8x8xf32>) {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:4 = stablehlo.while(%w = %ws, %b = %bs, %i = %c0, %x = %h)
      : tensor<3x8x8xf32>, tensor<3x8xf32>, tensor<i32>, tensor<2x8xf32>""" + \
    COUNTER.format(steps=3) + """
      %ws1 = stablehlo.dynamic_slice %w, %i, %c0, %c0, sizes = [1, 8, 8]
          : (tensor<3x8x8xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x8x8xf32>
      %wi = stablehlo.reshape %ws1 : (tensor<1x8x8xf32>) -> tensor<8x8xf32>
      %bs1 = stablehlo.dynamic_slice %b, %i, %c0, sizes = [1, 8]
          : (tensor<3x8xf32>, tensor<i32>, tensor<i32>) -> tensor<1x8xf32>
      %y = stablehlo.dot_general %x, %wi, contracting_dims = [1] x [0]
          : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
      %bb = stablehlo.broadcast_in_dim %bs1, dims = [0, 1] : (tensor<1x8xf32>) -> tensor<2x8xf32>
      %z = stablehlo.add %y, %bb : tensor<2x8xf32>
      %x1 = stablehlo.tanh %z : tensor<2x8xf32>
      stablehlo.return %w, %b, %i1, %x1
          : tensor<3x8x8xf32>, tensor<3x8xf32>, tensor<i32>, tensor<2x8xf32>
    }
  return %r#3, %r#0 : tensor<2x8xf32>, tensor<3x8x8xf32>
}"""

# logits, a softmax (two row reductions), a second dot and the step's noise picked by a
# dynamic slice whose start is past the end on the last step (clamped).
SAMPLING = """
func.func @main(%h: tensor<2x8xf32>, %we: tensor<8x16xf32>, %e: tensor<16x8xf32>,
                %noise: tensor<4x2x8xf32>) -> tensor<2x8xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %x = %h) : tensor<i32>, tensor<2x8xf32>""" + \
    COUNTER.format(steps=5) + """
      %l = stablehlo.dot_general %x, %we, contracting_dims = [1] x [0]
          : (tensor<2x8xf32>, tensor<8x16xf32>) -> tensor<2x16xf32>
      %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
      %mx = stablehlo.reduce(%l init: %ninf) applies stablehlo.maximum across dimensions = [1]
          : (tensor<2x16xf32>, tensor<f32>) -> tensor<2xf32>
      %mb = stablehlo.broadcast_in_dim %mx, dims = [0] : (tensor<2xf32>) -> tensor<2x16xf32>
      %d = stablehlo.subtract %l, %mb : tensor<2x16xf32>
      %ex = stablehlo.exponential %d : tensor<2x16xf32>
      %zero = stablehlo.constant dense<0.0> : tensor<f32>
      %sm = stablehlo.reduce(%ex init: %zero) applies stablehlo.add across dimensions = [1]
          : (tensor<2x16xf32>, tensor<f32>) -> tensor<2xf32>
      %sb = stablehlo.broadcast_in_dim %sm, dims = [0] : (tensor<2xf32>) -> tensor<2x16xf32>
      %pr = stablehlo.divide %ex, %sb : tensor<2x16xf32>
      %y = stablehlo.dot_general %pr, %e, contracting_dims = [1] x [0]
          : (tensor<2x16xf32>, tensor<16x8xf32>) -> tensor<2x8xf32>
      %n3 = stablehlo.dynamic_slice %noise, %i, %c0, %c0, sizes = [1, 2, 8]
          : (tensor<4x2x8xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x8xf32>
      %n2 = stablehlo.reshape %n3 : (tensor<1x2x8xf32>) -> tensor<2x8xf32>
      %z = stablehlo.add %y, %n2 : tensor<2x8xf32>
      %x1 = stablehlo.tanh %z : tensor<2x8xf32>
      stablehlo.return %i1, %x1 : tensor<i32>, tensor<2x8xf32>
    }
  return %r#1 : tensor<2x8xf32>
}"""

# Carried values that trade places ((a, b) -> (b, a + b)) and one that becomes a constant:
# copies and swaps at the end of an iteration (Note [loop buffers]).
TRADE = """
func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:4 = stablehlo.while(%i = %c0, %a = %x, %b = %y, %k = %x)
      : tensor<i32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>""" + \
    COUNTER.format(steps=6) + """
      %s = stablehlo.add %a, %b : tensor<4xf32>
      %c = stablehlo.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
      %k1 = stablehlo.add %k, %c : tensor<4xf32>
      stablehlo.return %i1, %b, %s, %c : tensor<i32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
    }
  return %r#1, %r#2, %r#3 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}"""


# lax.scan with stacked outputs: a row reduction of each step written into the carried
# [3, 2] outputs by dynamic_update_slices: in place where nothing else reads the operand
# (%ys), into a copy where something does (%zs, read after the update).
SCAN_OUTPUTS = """
func.func @main(%h: tensor<2x8xf32>, %ws: tensor<3x8x8xf32>)
    -> (tensor<2x8xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>) {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %z = stablehlo.constant dense<0.0> : tensor<3x2xf32>
  %r:6 = stablehlo.while(%w = %ws, %i = %c0, %x = %h, %ys = %z, %zs = %z, %acc = %z)
      : tensor<3x8x8xf32>, tensor<i32>, tensor<2x8xf32>, tensor<3x2xf32>, tensor<3x2xf32>,
        tensor<3x2xf32>""" + \
    COUNTER.format(steps=3) + """
      %ws1 = stablehlo.dynamic_slice %w, %i, %c0, %c0, sizes = [1, 8, 8]
          : (tensor<3x8x8xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x8x8xf32>
      %wi = stablehlo.reshape %ws1 : (tensor<1x8x8xf32>) -> tensor<8x8xf32>
      %y = stablehlo.dot_general %x, %wi, contracting_dims = [1] x [0]
          : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
      %x1 = stablehlo.tanh %y : tensor<2x8xf32>
      %sq = stablehlo.multiply %x1, %x1 : tensor<2x8xf32>
      %zero = stablehlo.constant dense<0.0> : tensor<f32>
      %s = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [1]
          : (tensor<2x8xf32>, tensor<f32>) -> tensor<2xf32>
      %s2 = stablehlo.reshape %s : (tensor<2xf32>) -> tensor<1x2xf32>
      %ys1 = stablehlo.dynamic_update_slice %ys, %s2, %i, %c0
          : (tensor<3x2xf32>, tensor<1x2xf32>, tensor<i32>, tensor<i32>) -> tensor<3x2xf32>
      %zs1 = stablehlo.dynamic_update_slice %zs, %s2, %i, %c0
          : (tensor<3x2xf32>, tensor<1x2xf32>, tensor<i32>, tensor<i32>) -> tensor<3x2xf32>
      %acc1 = stablehlo.add %acc, %zs : tensor<3x2xf32>
      stablehlo.return %w, %i1, %x1, %ys1, %zs1, %acc1 : tensor<3x8x8xf32>, tensor<i32>,
          tensor<2x8xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>
    }
  return %r#2, %r#3, %r#4, %r#5 : tensor<2x8xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>
}"""


def _inputs(name: str) -> list[np.ndarray]:
    rng = np.random.default_rng(7)

    def f32(*shape, scale=1.0):
        return (scale * rng.standard_normal(shape)).astype(np.float32)
    return {"elementwise": lambda: [f32(64, scale=3.0)],
            "euler": lambda: [f32(32), f32(32)],
            "scan": lambda: [f32(2, 8), f32(3, 8, 8, scale=0.4), f32(3, 8, scale=0.1)],
            "sampling": lambda: [f32(2, 8), f32(8, 16, scale=0.5), f32(16, 8, scale=0.5),
                                 f32(4, 2, 8, scale=0.1)],
            "scan_outputs": lambda: [f32(2, 8), f32(3, 8, 8, scale=0.4)],
            "trade": lambda: [f32(4), f32(4)]}[name]()


LOOPS = {"elementwise": ELEMENTWISE, "euler": EULER, "scan": SCAN, "sampling": SAMPLING,
         "scan_outputs": SCAN_OUTPUTS, "trade": TRADE}


@pytest.fixture(autouse=True)
def private_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENHLO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENHLO_CPU_CACHE", "0")  # each compile below generates its loop anew


def _compile(text: str):
    exe = pjrt.make_client("cpu").compile(text)
    exe.wait_optimized()
    return exe


@pytest.mark.parametrize("name", sorted(LOOPS))
def test_loop_compiled_whole_gives_the_executors_bits(name, monkeypatch):
    text, args = LOOPS[name], _inputs(name)
    whole = _compile(text)
    assert len(whole.program.compiled) == 1, "the loop should be one generated kernel"
    got = whole(*args)
    monkeypatch.setattr(program, "loop_source", lambda *a: None)
    stepped = _compile(text)
    assert not stepped.program.compiled
    for g, s in zip(got, stepped(*args)):
        np.testing.assert_array_equal(g, s)
    # The interpreter computes tanh, exp and sin with numpy: a few ULP apart per step.
    for g, w in zip(got, evaluate(stablehlo.parse(text), args)):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6)


def test_scan_loop_reads_the_stacked_weights_in_place():
    exe = _compile(SCAN)
    h, ws, bs = _inputs("scan")
    out, weights = exe(h, ws, bs)
    np.testing.assert_array_equal(weights, ws)
    weights[...] = 0  # a result is the caller's own storage, not the argument's
    assert np.any(ws != 0)
    x = h
    for k in range(3):
        x = np.tanh(x.astype(np.float64) @ ws[k] + bs[k])
    np.testing.assert_allclose(out, x, rtol=1e-5, atol=1e-6)


# A dynamic slice of a column is no contiguous run of its operand: the template refuses it.
COLUMNS = """
func.func @main(%m: tensor<4x3xf32>, %x: tensor<4x1xf32>) -> tensor<4x1xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, tensor<4x1xf32>""" + \
    COUNTER.format(steps=3) + """
      %col = stablehlo.dynamic_slice %m, %c0, %i, sizes = [4, 1]
          : (tensor<4x3xf32>, tensor<i32>, tensor<i32>) -> tensor<4x1xf32>
      %v1 = stablehlo.add %v, %col : tensor<4x1xf32>
      stablehlo.return %i1, %v1 : tensor<i32>, tensor<4x1xf32>
    }
  return %r#1 : tensor<4x1xf32>
}"""


def test_loop_with_an_op_the_template_lacks_runs_in_the_executor():
    exe = _compile(COLUMNS)
    assert not exe.program.compiled
    m = np.arange(12, dtype=np.float32).reshape(4, 3)
    x = np.ones((4, 1), np.float32)
    np.testing.assert_array_equal(exe(m, x)[0], x + m.sum(axis=1, keepdims=True))


# The body returns a value from outside the loop, one value twice and an argument
# unchanged: the executor moves only the body's own results out of their slots.
RETURNS = """
func.func @main(%x: tensor<4xf32>, %y: tensor<4xf32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %out = stablehlo.multiply %y, %y : tensor<4xf32>
  %r:5 = stablehlo.while(%i = %c0, %a = %x, %b = %x, %c = %y, %d = %x)
      : tensor<i32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>""" + \
    COUNTER.format(steps=4) + """
      %s = stablehlo.add %a, %c : tensor<4xf32>
      stablehlo.return %i1, %s, %s, %c, %out
          : tensor<i32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
    }
  return %r#1, %r#2, %r#3, %r#4 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}"""


@pytest.mark.parametrize("whole", [True, False])
def test_loop_results_from_outside_twice_and_unchanged(whole, monkeypatch):
    if not whole:
        monkeypatch.setattr(program, "loop_source", lambda *a: None)
    exe = _compile(RETURNS)
    assert bool(exe.program.compiled) == whole
    x, y = _inputs("trade")
    got = exe(x, y)
    want = [x + 4 * y, x + 4 * y, y, y * y]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    for g, w in zip(got, exe(x, y)):  # a second run sees the same values from outside
        np.testing.assert_array_equal(g, w)
