"""Tiered compilation: the executable runs before its kernels are compiled, then switches."""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import pjrt
import stablehlo
from pjrt.api import CompileOptions
from pjrt.plugins.cpu import tiering

ASYNC = CompileOptions(env_option_overrides={"async_codegen": True})

# exp(x) * 2 + y: one loop fusion of the cpu pipeline.
PROGRAM = """
func.func @main(%x: tensor<1000xf32>, %y: tensor<1000xf32>) -> tensor<1000xf32> {
  %two = stablehlo.constant dense<2.0> : tensor<1000xf32>
  %e = stablehlo.exponential %x : tensor<1000xf32>
  %m = stablehlo.multiply %e, %two : tensor<1000xf32>
  %r = stablehlo.add %m, %y : tensor<1000xf32>
  return %r : tensor<1000xf32>
}
"""


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENHLO_CACHE_DIR", str(tmp_path))


def _args():
    rng = np.random.default_rng(1)
    return [rng.standard_normal(1000).astype(np.float32) for _ in range(2)]


def test_runs_op_by_op_first_then_on_the_generated_kernel(fresh_cache):
    args = _args()
    expected = stablehlo.evaluate(stablehlo.parse(PROGRAM), args)[0]
    # Keep the background worker busy so the first tier is observable.
    gate = threading.Event()
    tiering.Upgrade(lambda: gate.wait(60), lambda _: None)
    try:
        exe = pjrt.make_client("cpu").compile(PROGRAM, ASYNC)
        first = exe.program
        assert first.deferred and first.fusions_generated == []
        np.testing.assert_allclose(exe(*args)[0], expected, rtol=4e-6, atol=4e-6)
        assert not exe.wait_optimized(timeout=0.05)
    finally:
        gate.set()
    assert exe.wait_optimized(timeout=60)
    assert exe.program is not first and not exe.program.deferred
    assert len(exe.program.fusions_generated) == 1
    np.testing.assert_allclose(exe(*args)[0], expected, rtol=4e-6, atol=4e-6)
    # The finished program went to the persistent cache: a new compile is a hit.
    again = pjrt.make_client("cpu").compile(PROGRAM, ASYNC)
    assert again.program.cache_hit and again.wait_optimized(timeout=0)


def test_kernels_already_built_are_used_at_once(fresh_cache):
    client = pjrt.make_client("cpu")
    client.compile(PROGRAM, CompileOptions(env_option_overrides={"async_codegen": False}))
    # Another program with the same fusion (its kernel library is in the kernel cache).
    other = PROGRAM.replace("@main", "@other")
    exe = client.compile(other, ASYNC)
    assert not exe.program.deferred and len(exe.program.fusions_generated) == 1


def test_the_environment_turns_it_off(fresh_cache, monkeypatch):
    monkeypatch.setenv("OPENHLO_CPU_ASYNC_CODEGEN", "0")
    exe = pjrt.make_client("cpu").compile(PROGRAM)
    assert not exe.program.deferred and len(exe.program.fusions_generated) == 1


_EXIT_AT_ONCE = """
import numpy as np, pjrt
from pjrt.api import CompileOptions
exe = pjrt.make_client("cpu").compile(open({path!r}).read(),
                                      CompileOptions(env_option_overrides={{"async_codegen": True}}))
print(exe.program.deferred, float(exe(np.zeros(1000, np.float32), np.ones(1000, np.float32))[0][0]))
"""


def test_exit_while_kernels_compile_is_clean(tmp_path):
    program = tmp_path / "p.mlir"
    program.write_text(PROGRAM)
    env = dict(os.environ, OPENHLO_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", _EXIT_AT_ONCE.format(path=str(program))],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "3.0"]  # exp(0) * 2 + 1, from the first tier
    assert done.stderr == ""
    # The compile begun before exit was let finish: its library is in the kernel cache.
    assert list((tmp_path / "cache" / "cpu_kernels").glob("*.so"))
