"""``openhlo run``: inputs from npz or random, outputs printed or saved, clear errors."""
from __future__ import annotations

import numpy as np
import pytest

from tools.tests.helpers import REPO_ROOT, run_cli, run_subprocess

HELLO = REPO_ROOT / "examples" / "hello.mlir"


def hello_reference(x, w, b):
    """The example's semantics in plain numpy: relu(x @ w + b) and its row sums."""
    y = np.maximum(x @ w + b, 0)
    return y, y.sum(axis=1)


@pytest.fixture
def hello_args(tmp_path):
    rng = np.random.default_rng(7)
    args = [rng.standard_normal(s).astype(np.float32) for s in [(2, 3), (3, 4), (4,)]]
    path = tmp_path / "args.npz"
    np.savez(path, arg0=args[0], arg1=args[1], arg2=args[2])
    return path, args


def test_run_npz_in_and_out(capsys, tmp_path, hello_args):
    path, args = hello_args
    out_path = tmp_path / "out.npz"
    r = run_cli(capsys, "run", HELLO, "--inputs", path, "--output", out_path)
    assert r.code == 0, r.err
    with np.load(out_path) as data:
        assert sorted(data.files) == ["out0", "out1"]
        relu, sums = hello_reference(*args)
        np.testing.assert_allclose(data["out0"], relu, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(data["out1"], sums, rtol=1e-5, atol=1e-5)
        assert data["out0"].dtype == np.float32


def test_run_prints_name_type_and_values(capsys, hello_args):
    path, args = hello_args
    r = run_cli(capsys, "run", HELLO, "--inputs", path)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0] == "out0: tensor<2x4xf32>"
    assert "out1: tensor<2xf32>" in lines
    _, sums = hello_reference(*args)
    assert r.out.split("out1: tensor<2xf32>\n")[1].strip() == np.array2string(
        sums.astype(np.float32))


def test_random_inputs_depend_on_seed_only(capsys):
    first = run_cli(capsys, "run", HELLO, "--seed", "3").out
    again = run_cli(capsys, "run", HELLO, "--seed", "3").out
    other = run_cli(capsys, "run", HELLO, "--seed", "4").out
    assert first == again and first != other


def test_stdin_and_entry(capsys, monkeypatch):
    import io
    program = """
    func.func @twice(%x: tensor<3xi32>) -> tensor<3xi32> {
      %0 = stablehlo.add %x, %x : tensor<3xi32>
      func.return %0 : tensor<3xi32>
    }"""
    monkeypatch.setattr("sys.stdin", io.StringIO(program))
    r = run_cli(capsys, "run", "-", "--entry", "twice", "--seed", "1")
    assert r.code == 0, r.err
    values = np.array(r.out.splitlines()[1].strip("[]").split(), dtype=np.int64)
    assert values.shape == (3,) and np.all(values % 2 == 0) and np.all(np.abs(values) <= 10)


@pytest.mark.parametrize("arrays, message", [
    ({"arg0": np.zeros((2, 3), np.float32)}, "missing arg1, arg2"),
    ({"arg0": np.zeros((2, 3), np.float32), "arg1": np.zeros((3, 4), np.float32),
      "arg2": np.zeros(4, np.float32), "bias": np.zeros(1)}, "unexpected bias"),
    ({"arg0": np.zeros((3, 2), np.float32), "arg1": np.zeros((3, 4), np.float32),
      "arg2": np.zeros(4, np.float32)}, "argument 0 of @main: expected tensor<2x3xf32>"),
    ({"arg0": np.zeros((2, 3), np.float32), "arg1": np.zeros((3, 4), np.float64),
      "arg2": np.zeros(4, np.float32)}, "argument 1 of @main: expected tensor<3x4xf32> "
                                        "(dtype float32), got dtype float64"),
])
def test_bad_inputs_are_clear_errors(capsys, tmp_path, arrays, message):
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    r = run_cli(capsys, "run", HELLO, "--inputs", path)
    assert r.code == 1
    assert r.err.startswith("openhlo: error: ") and message in r.err
    assert "Traceback" not in r.err


def test_bf16_arguments_survive_npz(capsys, tmp_path):
    import ml_dtypes
    program = tmp_path / "bf16.mlir"
    program.write_text("""
    func.func @main(%x: tensor<2xbf16>) -> tensor<2xbf16> {
      %0 = stablehlo.multiply %x, %x : tensor<2xbf16>
      func.return %0 : tensor<2xbf16>
    }""")
    np.savez(tmp_path / "in.npz", arg0=np.array([1.5, -3], ml_dtypes.bfloat16))
    r = run_cli(capsys, "run", program, "--inputs", tmp_path / "in.npz")
    assert r.code == 0, r.err
    expected = np.array2string(np.array([2.25, 9], ml_dtypes.bfloat16))
    assert r.out.splitlines() == ["out0: tensor<2xbf16>", expected]


def test_parse_error_shows_place_line_and_caret(capsys, tmp_path):
    program = tmp_path / "typo.mlir"
    program.write_text("func.func @main() -> tensor<f32> {\n"
                       "  %0 = stablehlo.constant dense<1.0> : tensor<f32>\n"
                       "  %1 = stablehlo.frobnicate %0 : tensor<f32>\n"
                       "  func.return %1 : tensor<f32>\n}\n")
    r = run_cli(capsys, "run", program)
    assert r.code == 1
    first, source, caret = r.err.splitlines()[:3]
    assert first.startswith(f"{program}:3:") and ": error: " in first
    assert source == "  %1 = stablehlo.frobnicate %0 : tensor<f32>"
    column = int(first.split(":")[2])
    assert caret == " " * (column - 1) + "^"
    assert source[column - 1:].startswith("stablehlo.frobnicate")


def test_runtime_and_usage_errors(capsys):
    r = run_cli(capsys, "run", HELLO, "--backend", "nope")
    assert r.code == 1 and "unknown backend 'nope'" in r.err and "interpreter" in r.err
    r = run_cli(capsys, "run", REPO_ROOT / "no" / "such.mlir")
    assert r.code == 1 and r.err.startswith("openhlo: error: cannot read")
    r = run_cli(capsys, "run")
    assert r.code == 2 and "usage:" in r.err


def test_console_command_end_to_end(tmp_path):
    r = run_subprocess("run", "examples/hello.mlir", "--output", tmp_path / "o.npz")
    assert r.code == 0, r.err
    assert np.load(tmp_path / "o.npz")["out1"].shape == (2,)
    r = run_subprocess("--help")
    assert r.code == 0 and all(c in r.out for c in ("run", "opt", "conformance", "bench-text"))
    r = run_subprocess("run", "-", stdin="func.func @main( {")
    assert r.code == 1 and "<stdin>:1:" in r.err and "Traceback" not in r.err


@pytest.mark.parametrize("level", ["0", "1"])
def test_opt_levels_and_profile(capsys, tmp_path, hello_args, monkeypatch, level):
    # --opt-level goes to the cpu backend through the environment (conftest.py restores it).
    monkeypatch.setenv("OPENHLO_CACHE_DIR", str(tmp_path / "cache"))
    path, args = hello_args
    out_path = tmp_path / "out.npz"
    r = run_cli(capsys, "run", HELLO, "--inputs", path, "--output", out_path,
                "--opt-level", level, "--profile")
    assert r.code == 0, r.err
    with np.load(out_path) as data:
        relu, sums = hello_reference(*args)
        np.testing.assert_allclose(data["out0"], relu, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(data["out1"], sums, rtol=1e-5, atol=1e-5)
    profiled = r.err.splitlines()
    assert profiled[0].split() == ["ms", "calls", "%", "instruction"]
    assert profiled[-1] == "interpreter fallbacks: none"
    ops = " ".join(profiled[1:])
    if level == "0":  # op by op: the dot, the bias add and the relu are instructions
        assert "'stablehlo.dot_general'" in ops and "'stablehlo.maximum'" in ops
    else:  # the compiler fused them
        assert "'stablehlo.composite'" in ops and "'stablehlo.maximum'" not in ops


def test_profile_lists_interpreter_fallbacks(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENHLO_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "map.mlir"
    path.write_text("""
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %r = "stablehlo.map"(%x) ({
    ^bb0(%a: tensor<f32>):
      %e = stablehlo.sine %a : tensor<f32>
      stablehlo.return %e : tensor<f32>
  }) {dimensions = array<i64: 0>} : (tensor<3xf32>) -> tensor<3xf32>
  return %r : tensor<3xf32>
}
""")
    r = run_cli(capsys, "run", path, "--profile")
    assert r.code == 0, r.err
    report = r.err.split("interpreter fallbacks: ", 1)[1].splitlines()
    assert report[0] == "1"
    assert "map.mlir:3:3: 'stablehlo.map'" in report[1] and "no native kernel" in report[1]


def test_bad_opt_level_and_profile_elsewhere(capsys):
    assert run_cli(capsys, "run", HELLO, "--opt-level", "3").code == 2
    r = run_cli(capsys, "run", HELLO, "--profile", "--backend", "interpreter")
    assert r.code != 0 and "--profile needs the cpu backend" in r.err


def test_run_autocast_computes_the_product_in_bf16(capsys, tmp_path, hello_args):
    path, args = hello_args
    results = {}
    for name, flags in (("full", ()), ("mixed", ("--autocast", "bf16", "--autocast-force"))):
        out = tmp_path / f"{name}.npz"
        outcome = run_cli(capsys, "run", HELLO, "--inputs", path, "-o", out, *flags)
        assert outcome.code == 0, outcome.err
        results[name] = np.load(out)["out0"]
    want = hello_reference(*[a.astype(np.float64) for a in args])[0]
    np.testing.assert_allclose(results["full"], want, rtol=1e-6, atol=1e-6)
    # x and w rounded to bf16 (8 significant bits): off, but by no more than that
    assert np.abs(results["mixed"] - want).max() > 1e-4
    np.testing.assert_allclose(results["mixed"], want, rtol=2e-2, atol=2e-2)
