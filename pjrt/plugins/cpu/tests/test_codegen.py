"""Generated loop kernels (xla_core/codegen/while_loop.py) against the reference interpreter."""
from __future__ import annotations

import logging

import numpy as np
import pytest

import pjrt
import stablehlo
from pjrt.plugins.cpu import codegen
from pjrt.plugins.cpu.codegen import build  # noqa: F401 (monkeypatched below)
from stablehlo.interpreter import evaluate

LOOP = """
func.func @main(%x: tensor<5x{T}>, %n: tensor<i64>, %s: tensor<{T}>) -> (tensor<5x{T}>, tensor<i64>) {{
  %i0 = stablehlo.constant dense<0> : tensor<i64>
  %one = stablehlo.constant dense<1> : tensor<i64>
  %big = stablehlo.constant dense<9223372036854775807> : tensor<i64>
  %c = stablehlo.constant dense<[0.5, -0.25, 2.0, 1.0, 0.0]> : tensor<5x{T}>
  %r:3 = stablehlo.while(%i = %i0, %v = %x, %w = %big) : tensor<i64>, tensor<5x{T}>, tensor<i64>
    cond {{
      %p = stablehlo.compare LT, %i, %n : (tensor<i64>, tensor<i64>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    }} do {{
      %i2 = stablehlo.add %i, %one : tensor<i64>
      %w2 = stablehlo.add %w, %one : tensor<i64>
      %sb = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<{T}>) -> tensor<5x{T}>
      %t = stablehlo.tanh %v : tensor<5x{T}>
      %m = stablehlo.multiply %t, %c : tensor<5x{T}>
      %a = stablehlo.add %m, %sb : tensor<5x{T}>
      %pos = stablehlo.compare GT, %a, %c : (tensor<5x{T}>, tensor<5x{T}>) -> tensor<5xi1>
      %e = stablehlo.exponential %a : tensor<5x{T}>
      %v2 = stablehlo.select %pos, %a, %e : tensor<5xi1>, tensor<5x{T}>
      stablehlo.return %i2, %v2, %w2 : tensor<i64>, tensor<5x{T}>, tensor<i64>
    }}
  return %r#1, %r#2 : tensor<5x{T}>, tensor<i64>
}}
"""


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENHLO_CACHE_DIR", str(tmp_path / "cache"))


@pytest.mark.parametrize("elem,dtype", [("f32", np.float32), ("f64", np.float64)])
@pytest.mark.parametrize("n", [0, 1, 37])
def test_generated_loop_matches_the_interpreter(elem, dtype, n):
    text = LOOP.format(T=elem)
    args = [np.array([0.1, -2.0, 3.0, 0.0, 1.5], dtype), np.array(n, np.int64),
            np.array(0.25, dtype)]
    exe = pjrt.make_client("cpu").compile(text)
    assert exe.program.compiled, "the loop should be a generated kernel"
    got = exe(*args)
    want = evaluate(stablehlo.parse(text), args)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    assert got[1] == want[1]  # int64 wraps around exactly as the interpreter's


def test_loop_the_generator_refuses_runs_in_the_executor():
    # A reverse outside a fusion (level 0 fuses nothing) is data movement, which the while
    # template does not compute itself.
    text = LOOP.format(T="f32").replace("%t = stablehlo.tanh %v : tensor<5xf32>",
                                        "%t = stablehlo.reverse %v, dims = [0] : tensor<5xf32>")
    exe = pjrt.make_client("cpu", opt_level=0).compile(text)
    assert not exe.program.compiled
    args = [np.ones(5, np.float32), np.array(3, np.int64), np.array(0.5, np.float32)]
    want = evaluate(stablehlo.parse(text), args)
    np.testing.assert_allclose(exe(*args)[0], want[0], rtol=1e-6)


def test_cache_hit_compiles_nothing(monkeypatch):
    text = LOOP.format(T="f32")
    pjrt.make_client("cpu").compile(text)

    def no_compiler(*args, **kwargs):
        raise AssertionError("the compiler ran although the kernel is cached")
    monkeypatch.setattr(codegen.build.subprocess, "run", no_compiler)
    exe = pjrt.make_client("cpu").compile(text)
    assert exe.program.compiled


def test_without_a_compiler_the_executor_runs_the_loop(monkeypatch, caplog):
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(codegen.build.shutil, "which", lambda name: None)
    monkeypatch.setattr(codegen.build, "_NO_COMPILER_SAID", False)
    text = LOOP.format(T="f32")
    with caplog.at_level(logging.WARNING, logger="openhlo.cpu"):
        exe = pjrt.make_client("cpu").compile(text)
    assert not exe.program.compiled
    assert "no C++ compiler" in caplog.text
    args = [np.ones(5, np.float32), np.array(4, np.int64), np.array(0.5, np.float32)]
    want = evaluate(stablehlo.parse(text), args)
    np.testing.assert_allclose(exe(*args)[0], want[0], rtol=1e-6)
