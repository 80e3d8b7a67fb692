"""``openhlo run --num-processes P --num-devices N``: P processes on this machine run a
partitioned program on P*N devices and print what one process with P*N devices prints."""
from __future__ import annotations

import numpy as np
import pytest

from pjrt.plugins.cpu.native_module import native
from tools.tests.helpers import SHARDED_DOT_PROGRAM as PROGRAM, run_cli

pytestmark = pytest.mark.skipif(not native().HAVE_GLOO, reason="built without gloo")


def test_two_processes_print_what_one_process_prints(capsys, tmp_path):
    path = tmp_path / "p.mlir"
    path.write_text(PROGRAM)
    one = run_cli(capsys, "run", path, "--backend", "cpu", "--num-devices", "4", "--seed", "5")
    two = run_cli(capsys, "run", path, "--backend", "cpu", "--num-processes", "2",
                  "--num-devices", "2", "--seed", "5")
    assert one.code == 0 and two.code == 0, two.err
    assert two.out == one.out and one.out.startswith("out0: tensor<8x8xf32>")


def test_two_processes_save_the_results_of_the_given_inputs(capsys, tmp_path):
    path = tmp_path / "p.mlir"
    path.write_text(PROGRAM)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((8, 16)).astype(np.float32)
    b = rng.standard_normal((16, 8)).astype(np.float32)
    np.savez(tmp_path / "args.npz", arg0=a, arg1=b)
    r = run_cli(capsys, "run", path, "--num-processes", "2", "--num-devices", "2",
                "--inputs", tmp_path / "args.npz", "--output", tmp_path / "out.npz")
    assert r.code == 0, r.err
    with np.load(tmp_path / "out.npz") as out:
        np.testing.assert_allclose(out["out0"], np.tanh(a @ b), rtol=1e-5, atol=1e-6)


def test_a_failing_process_is_named(capsys, tmp_path):
    path = tmp_path / "p.mlir"
    path.write_text(PROGRAM)
    r = run_cli(capsys, "run", path, "--num-processes", "2", "--num-devices", "2",
                "--inputs", tmp_path / "missing.npz")
    assert r.code == 1
    assert "of 2 failed (exit status 1)" in r.err and "missing.npz" in r.err, r.err


def test_num_processes_needs_num_devices(capsys, tmp_path):
    path = tmp_path / "p.mlir"
    path.write_text(PROGRAM)
    r = run_cli(capsys, "run", path, "--num-processes", "2")
    assert r.code == 1 and "--num-processes needs --num-devices" in r.err
