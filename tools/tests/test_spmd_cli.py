"""``openhlo opt --pipeline=spmd --num-devices N`` and ``openhlo run --num-devices N``: a sharded
program partitioned and explained, and run on N cpu devices from global arguments with the
unsharded program's results (numpy)."""
from __future__ import annotations

import numpy as np

from tools.tests.helpers import SHARDED_DOT_PROGRAM as PROGRAM, run_cli


def test_opt_partitions_and_explains(capsys, tmp_path):
    path = tmp_path / "p.mlir"
    path.write_text(PROGRAM)
    r = run_cli(capsys, "opt", path, "--pipeline=spmd", "--num-devices", "4",
                "--explain-sharding")
    assert r.code == 0, r.err
    assert "openhlo.spmd_partitioned" in r.out and "stablehlo.all_reduce" in r.out
    assert "(%arg0: tensor<8x4xf32>" in r.out
    assert 'op 1 stablehlo.tanh: #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>' in r.err
    wrong = run_cli(capsys, "opt", path, "--pipeline=spmd", "--num-devices", "8")
    assert wrong.code != 0 and "partitioned for 8" in wrong.err


def test_run_takes_global_arguments_and_returns_global_results(capsys, tmp_path):
    path = tmp_path / "p.mlir"
    path.write_text(PROGRAM)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((8, 16)).astype(np.float32)
    b = rng.standard_normal((16, 8)).astype(np.float32)
    np.savez(tmp_path / "args.npz", arg0=a, arg1=b)
    r = run_cli(capsys, "run", path, "--backend", "cpu", "--num-devices", "4",
                "--inputs", tmp_path / "args.npz", "--output", tmp_path / "out.npz")
    assert r.code == 0, r.err
    with np.load(tmp_path / "out.npz") as out:
        np.testing.assert_allclose(out["out0"], np.tanh(a @ b), rtol=1e-5, atol=1e-6)
    printed = run_cli(capsys, "run", path, "--backend", "cpu", "--num-devices", "4")
    assert printed.code == 0 and printed.out.startswith("out0: tensor<8x8xf32>")


def test_sharding_draws_arguments_and_results(capsys, tmp_path):
    import importlib.util

    from xla_core.spmd.visualize import read_text as parse_boxes
    path = tmp_path / "p.mlir"
    path.write_text(PROGRAM)
    png = ["--png", tmp_path / "png"] if importlib.util.find_spec("matplotlib") else []
    r = run_cli(capsys, "sharding", path, "--num-devices", "4", *png)
    assert r.code == 0, r.err
    blocks = {}
    for chunk in r.out.split("\n"):
        if chunk.endswith("]") and ": shape" in chunk:
            name = chunk.split(":")[0]
            blocks[name] = []
        else:
            blocks[name].append(chunk)
    # %a: columns over "x" (devices 0..3 left to right); %b and the result: rows over "x"
    assert parse_boxes("\n".join(blocks["arg0"])) == [["0", "1", "2", "3"]]
    assert parse_boxes("\n".join(blocks["arg1"])) == [["0"], ["1"], ["2"], ["3"]]
    assert parse_boxes("\n".join(blocks["result0"])) == [["0"], ["1"], ["2"], ["3"]]
    if png:
        assert sorted(p.name for p in (tmp_path / "png").iterdir()) == \
            ["arg0.png", "arg1.png", "result0.png"]
