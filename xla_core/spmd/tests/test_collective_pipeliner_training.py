"""collective-pipeliner on a training loop JAX lowered: 20 steps of a layer-scanned MLP with
FSDP shardings (``fsdp_scan_jax``) on 8 virtual devices of the cpu and interpreter backends,
with the pass and without: losses and weights bit-identical, and close to JAX's own 20 steps
on one device. In the per-device program the next layer's all-gather starts before this
layer's compute in the scan body, and ends after it."""
from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import pjrt
import stablehlo
from stablehlo.ir.ops.async_collectives import ASYNC_DONE, ASYNC_START, wrapped_collective
from xla_core.passes import PassContext, spmd_pipeline
from xla_core.spmd.combiner import PIPELINED
from xla_core.spmd.tests.fsdp_scan_jax import STEPS

pytestmark = pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                                reason="jax is not installed (it lowers the training step)")

ROOT = pathlib.Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def lowered(tmp_path_factory) -> pathlib.Path:
    folder = tmp_path_factory.mktemp("fsdp_scan")
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS="--xla_force_host_platform_device_count=8")
    proc = subprocess.run([sys.executable, "-m", "xla_core.spmd.tests.fsdp_scan_jax",
                           str(folder)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    return folder


def _train(folder: pathlib.Path, backend: str, pipelined: bool) -> tuple:
    init = np.load(folder / "init.npz")
    client = pjrt.make_client(backend, num_devices=8)
    options = pjrt.CompileOptions(num_partitions=8,
                                  env_option_overrides={"collective_pipelining": pipelined})
    exe = client.compile((folder / "step.mlir").read_text(), options)
    if backend == "cpu":
        # Every step on the generated kernels: the op-by-op tier cuts the dots into other
        # GEMM panels, and where the BLAS rounds by panel (pjrt/plugins/cpu/blas.py,
        # gemm_bits_depend_on_panels: OpenBLAS's AVX2 kernels) the two compiles, reaching
        # their kernels after different numbers of steps, would differ in the last bit.
        exe.wait_optimized()
    w1, w2, losses = init["w1"], init["w2"], []
    for _ in range(STEPS):
        loss, w1, w2 = exe.execute_global(w1, w2, init["x"], init["y"])
        losses.append(np.asarray(loss))
    return np.array(losses), w1, w2


@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
def test_twenty_steps_are_bit_identical_with_and_without_pipelining(lowered, backend):
    on = _train(lowered, backend, True)
    off = _train(lowered, backend, False)
    for a, b in zip(on, off):
        np.testing.assert_array_equal(a, b)
    ref = np.load(lowered / "ref.npz")
    np.testing.assert_allclose(on[0], ref["losses"], rtol=1e-4)
    np.testing.assert_allclose(on[1], ref["w1"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(on[2], ref["w2"], rtol=1e-4, atol=1e-5)
    assert on[0][-1] < on[0][0]  # it trains


def _per_device(folder: pathlib.Path, pipelined: bool):
    module = stablehlo.parse((folder / "step.mlir").read_text())
    spmd_pipeline(num_devices=8, pipeline_collectives=pipelined).run(module, PassContext())
    return module


def _pipelined_starts(block) -> list:
    return [op for op in block.operations
            if op.name == ASYNC_START and PIPELINED in wrapped_collective(op).attributes]


def test_next_layers_gather_overlaps_this_layers_compute(lowered):
    module = _per_device(lowered, True)
    loops = [op for op in module.lookup("main").body.operations if op.name == "stablehlo.while"]
    forward = loops[0].regions[1].block  # the scan over layers of the loss
    start, = _pipelined_starts(forward)
    assert wrapped_collective(start).name == "stablehlo.all_gather"
    ops = forward.operations
    done = next(op for op in ops if op.name == ASYNC_DONE and op.operands[0] is start.results[0])
    dots = [i for i, op in enumerate(ops) if op.name == "stablehlo.dot_general"]
    assert len(dots) == 2  # the layer's two matmuls, on the weights gathered a trip ago
    assert ops.index(start) < dots[0] and dots[-1] < ops.index(done)
    assert all(ops[i].operands[1].is_block_argument for i in dots)
    # the backward scan finishes the previous layer's gradient reduction over this one's work
    backward = loops[-1].regions[1].block
    kinds = {wrapped_collective(s).name for s in _pipelined_starts(backward)}
    assert "stablehlo.all_reduce" in kinds
    # without the pass, the body gathers and then computes: nothing carried over
    plain = _per_device(lowered, False)
    first = next(op for op in plain.lookup("main").body.operations
                 if op.name == "stablehlo.while")
    assert not _pipelined_starts(first.regions[1].block)
    assert not any(PIPELINED in op.attributes for op in plain.walk())
