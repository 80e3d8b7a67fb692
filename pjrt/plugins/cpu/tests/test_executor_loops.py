"""Loops the executor runs instruction by instruction (native/executor.cc run_while): the
condition borrows the carried values instead of copying them (the lowering's release lists
of a condition lose its parameters: executor_bindings.cc lend_params), the body's results
move on to the next iteration, and a kernel's operands are gathered into storage the frame
keeps. Each case is checked against the reference interpreter or numpy, at opt_level 0
(each op one instruction) and at the default level (fusions, some with in-place results),
with the loop generator switched off so the executor runs every loop."""
from __future__ import annotations

import numpy as np
import pytest

import pjrt
import stablehlo
from pjrt.plugins.cpu.codegen import program
from stablehlo.interpreter import evaluate


@pytest.fixture(autouse=True)
def executor_runs_loops(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENHLO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(program, "loop_source", lambda *a: None)


@pytest.fixture(params=[0, 1], ids=["level0", "level1"])
def compile(request):
    def compile_text(text):
        exe = pjrt.make_client("cpu", opt_level=request.param).compile(text)
        exe.wait_optimized()
        assert not exe.program.compiled
        return exe
    return compile_text


def _against_interpreter(exe, text, args):
    want = evaluate(stablehlo.parse(text), args)
    got = exe(*args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    return got


# The condition reads a carried vector at its last use (level 1 fuses the multiply and the
# tanh into a kernel that may take an operand's storage over; the barrier keeps the
# reduction out of it) and a value from outside.
COND_READS_CARRIED = """
func.func @main(%x: tensor<8xf32>, %limit: tensor<f32>) -> (tensor<i32>, tensor<8xf32>) {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, tensor<8xf32>
    cond {
      %sq = stablehlo.multiply %v, %v : tensor<8xf32>
      %t = stablehlo.tanh %sq : tensor<8xf32>
      %tb = stablehlo.optimization_barrier %t : tensor<8xf32>
      %zero = stablehlo.constant dense<0.0> : tensor<f32>
      %s = stablehlo.reduce(%tb init: %zero) applies stablehlo.add across dimensions = [0]
          : (tensor<8xf32>, tensor<f32>) -> tensor<f32>
      %go = stablehlo.compare LT, %s, %limit : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %go : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      %step = stablehlo.constant dense<0.125> : tensor<8xf32>
      %v1 = stablehlo.add %v, %step : tensor<8xf32>
      stablehlo.return %i1, %v1 : tensor<i32>, tensor<8xf32>
    }
  return %r#0, %r#1 : tensor<i32>, tensor<8xf32>
}"""


@pytest.mark.parametrize("limit", [0.0, 1.0, 3.0])
def test_condition_reads_carried_values_and_one_from_outside(compile, limit):
    x = np.linspace(-0.5, 0.1, 8, dtype=np.float32)
    exe = compile(COND_READS_CARRIED)
    steps, v = _against_interpreter(exe, COND_READS_CARRIED, [x, np.float32(limit)])
    want_steps, want = 0, x  # limit 0: no trip at all, the carried values come back
    while np.tanh(want * want).sum() < limit:
        want_steps, want = want_steps + 1, want + np.float32(0.125)
    assert int(steps) == want_steps
    np.testing.assert_allclose(v, want, rtol=1e-6)


# A carried value that is also an outside value (%y, returned beside the loop's results),
# updated by an elementwise step that may write in place.
CARRIED_ALSO_OUTSIDE = """
func.func @main(%x: tensor<6xf32>) -> (tensor<6xf32>, tensor<6xf32>) {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %two = stablehlo.constant dense<2.0> : tensor<6xf32>
  %y = stablehlo.multiply %x, %two : tensor<6xf32>
  %r:2 = stablehlo.while(%i = %c0, %v = %y) : tensor<i32>, tensor<6xf32>
    cond {
      %n = stablehlo.constant dense<5> : tensor<i32>
      %go = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %go : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      %half = stablehlo.constant dense<0.5> : tensor<6xf32>
      %m = stablehlo.multiply %v, %half : tensor<6xf32>
      %v1 = stablehlo.add %m, %half : tensor<6xf32>
      stablehlo.return %i1, %v1 : tensor<i32>, tensor<6xf32>
    }
  return %r#1, %y : tensor<6xf32>, tensor<6xf32>
}"""


def test_a_carried_value_still_held_outside_is_never_written(compile):
    x = np.arange(6, dtype=np.float32)
    exe = compile(CARRIED_ALSO_OUTSIDE)
    for _ in range(2):  # a second run starts from the same values
        looped, y = _against_interpreter(exe, CARRIED_ALSO_OUTSIDE, [x])
        np.testing.assert_array_equal(y, 2 * x)
        want = 2 * x
        for _ in range(5):
            want = want * np.float32(0.5) + np.float32(0.5)
        np.testing.assert_allclose(looped, want, rtol=1e-6)


# Carried values trade places (a body result is another carried input, unchanged), the
# condition returns a carried boolean itself, and an inner loop's condition reads the outer
# loop's counter.
TRADE_AND_NEST = """
func.func @main(%a: tensor<3xf32>, %b: tensor<3xf32>, %n: tensor<i32>)
    -> (tensor<3xf32>, tensor<3xf32>, tensor<i32>) {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %t = stablehlo.constant dense<true> : tensor<i1>
  %r:5 = stablehlo.while(%go = %t, %i = %c0, %p = %a, %q = %b, %k = %c0)
      : tensor<i1>, tensor<i32>, tensor<3xf32>, tensor<3xf32>, tensor<i32>
    cond {
      stablehlo.return %go : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      %go1 = stablehlo.compare LT, %i1, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %pr = stablehlo.reverse %p, dims = [0] : tensor<3xf32>
      %inner:2 = stablehlo.while(%j = %c0, %s = %k) : tensor<i32>, tensor<i32>
        cond {
          %more = stablehlo.compare LT, %j, %i1, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
          stablehlo.return %more : tensor<i1>
        } do {
          %j1 = stablehlo.add %j, %one : tensor<i32>
          %s1 = stablehlo.add %s, %j : tensor<i32>
          stablehlo.return %j1, %s1 : tensor<i32>, tensor<i32>
        }
      stablehlo.return %go1, %i1, %q, %pr, %inner#1
          : tensor<i1>, tensor<i32>, tensor<3xf32>, tensor<3xf32>, tensor<i32>
    }
  return %r#2, %r#3, %r#4 : tensor<3xf32>, tensor<3xf32>, tensor<i32>
}"""


@pytest.mark.parametrize("n", [1, 2, 5])
def test_carried_values_trade_places_around_a_nested_loop(compile, n):
    a = np.array([1, 2, 3], np.float32)
    b = np.array([4, 5, 6], np.float32)
    exe = compile(TRADE_AND_NEST)
    p, q, k = _against_interpreter(exe, TRADE_AND_NEST, [a, b, np.int32(n)])
    want_p, want_q, want_k = a, b, 0
    for i in range(1, n + 1):
        want_p, want_q = want_q, want_p[::-1]
        want_k += i * (i - 1) // 2
    np.testing.assert_array_equal(p, want_p)
    np.testing.assert_array_equal(q, want_q)
    assert int(k) == want_k


# Elementwise steps write into an operand's storage when its last use is theirs (the executor
# moved it out of its slot, so nobody else holds it: kernels_elementwise.h taken_operand).
# Here %v is read again after the add that makes the next %v (so that add must allocate),
# %w dies at an add of itself with itself, %u is returned twice (two carried values sharing
# one storage, neither writable in place) and %c is a constant read by every iteration.
READ_AFTER_UPDATE = """
func.func @main(%x: tensor<5xf32>, %n: tensor<i32>)
    -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>) {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:6 = stablehlo.while(%i = %c0, %v = %x, %w = %x, %u = %x, %u2 = %x, %s = %x)
      : tensor<i32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>
    cond {
      %go = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %go : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      %c = stablehlo.constant dense<0.25> : tensor<5xf32>
      %v1 = stablehlo.add %v, %c : tensor<5xf32>
      %old = stablehlo.multiply %v, %c : tensor<5xf32>
      %w1 = stablehlo.add %w, %w : tensor<5xf32>
      %wn = stablehlo.negate %w1 : tensor<5xf32>
      %us = stablehlo.subtract %u, %u2 : tensor<5xf32>
      %u1 = stablehlo.add %us, %c : tensor<5xf32>
      %s1 = stablehlo.add %s, %old : tensor<5xf32>
      stablehlo.return %i1, %v1, %wn, %u1, %u1, %s1
          : tensor<i32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>,
            tensor<5xf32>
    }
  return %r#1, %r#2, %r#3, %r#4, %r#5
      : tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf32>
}"""


@pytest.mark.parametrize("n", [0, 1, 4])
def test_in_place_steps_never_write_a_value_read_later(compile, n):
    x = np.linspace(-1, 1, 5, dtype=np.float32)
    exe = compile(READ_AFTER_UPDATE)
    for _ in range(2):  # a second run starts from the same argument
        v, w, u, u2, s = _against_interpreter(exe, READ_AFTER_UPDATE, [x, np.int32(n)])
        want_v, want_w, want_u, want_s = x, x, x, x
        want_u2 = x
        c = np.float32(0.25)
        for _ in range(n):
            want_s = want_s + want_v * c
            want_v = want_v + c
            want_w = -(want_w + want_w)
            want_u = want_u2 = (want_u - want_u2) + c
        np.testing.assert_array_equal(v, want_v)
        np.testing.assert_array_equal(w, want_w)
        np.testing.assert_array_equal(u, want_u)
        np.testing.assert_array_equal(u2, want_u2)
        np.testing.assert_allclose(s, want_s, rtol=1e-6)
        assert not np.shares_memory(u, u2)
