"""``openhlo opt/run --auto-sharding --mesh ...``: the per-device program of the chosen plan,
its explanation, a run on the mesh's devices with the unsharded results (numpy), and the
errors bad option text gives."""
from __future__ import annotations

import numpy as np

from tools.tests.helpers import run_cli

# Pinned whole on both ends: Megatron (w1 by columns, w2 by rows) moves the least.
PROGRAM = """
sdy.mesh @mesh = <["x"=4, "y"=2]>
func.func public @main(%x: tensor<8x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>},
                       %w1: tensor<64x512xf32>, %w2: tensor<512x64xf32>)
    -> (tensor<8x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
  %h = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] :
      (tensor<8x64xf32>, tensor<64x512xf32>) -> tensor<8x512xf32>
  %r = stablehlo.tanh %h : tensor<8x512xf32>
  %y = stablehlo.dot_general %r, %w2, contracting_dims = [1] x [0] :
      (tensor<8x512xf32>, tensor<512x64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}
"""


def test_opt_prints_the_per_device_program_and_explains_the_plan(capsys, tmp_path):
    path = tmp_path / "p.mlir"
    path.write_text(PROGRAM)
    r = run_cli(capsys, "opt", path, "--auto-sharding", "--mesh", "x=4,y=2", "--hardware",
                "generic-cpu", "--explain-sharding")
    assert r.code == 0, r.err
    assert "openhlo.spmd_partitioned" in r.out and "stablehlo.all_reduce" in r.out
    assert "%arg1: tensor<64x64xf32>" in r.out and "%arg2: tensor<64x64xf32>" in r.out
    assert 'argument 1: [{}, {"x", "y"}]' in r.err and 'argument 2: [{"x", "y"}, {}]' in r.err
    assert "objective:" in r.err and "solver: optimal in" in r.err
    assert "memory per device: peak" in r.err


def test_run_on_the_mesh_gives_the_unsharded_results(capsys, tmp_path):
    path = tmp_path / "p.mlir"
    path.write_text(PROGRAM)
    rng = np.random.default_rng(1)
    args = {f"arg{i}": rng.standard_normal(s).astype(np.float32)
            for i, s in enumerate([(8, 64), (64, 512), (512, 64)])}
    np.savez(tmp_path / "args.npz", **args)
    r = run_cli(capsys, "run", path, "--auto-sharding", "--mesh", "x=4,y=2", "--hardware",
                "generic-cpu", "--inputs", tmp_path / "args.npz", "-o", tmp_path / "out.npz")
    assert r.code == 0, r.err
    want = np.tanh(args["arg0"] @ args["arg1"]) @ args["arg2"]
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["out0"], want, rtol=1e-4,
                               atol=1e-4)


def test_bad_options_are_clear_errors(capsys, tmp_path):
    path = tmp_path / "p.mlir"
    path.write_text(PROGRAM)
    cases = [(["--mesh", "x=four"], "mesh 'x=four': 'x=four' is not NAME=SIZE"),
             (["--mesh", "x=2"], "differs from the module's @mesh"),
             (["--memory-limit", "lots"], "memory limit 'lots': expected a positive size"),
             (["--memory-limit", "1KiB"], "is below what any plan needs")]
    for extra, message in cases:
        r = run_cli(capsys, "opt", path, "--auto-sharding", "--hardware", "generic-cpu", *extra)
        assert r.code != 0 and message in r.err, (extra, r.err)
    r = run_cli(capsys, "opt", path, "--mesh", "x=4")
    assert r.code != 0 and "--mesh needs --auto-sharding" in r.err
