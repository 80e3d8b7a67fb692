"""``openhlo conformance`` on small suites written here, one per status."""
from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pytest

from tools.tests.helpers import run_cli

INTERPRET_SPLIT = "// RUN: stablehlo-translate --interpret -split-input-file %s\n"

FILES = {
    "pass.mlir": INTERPRET_SPLIT + """
func.func @add() {
  %0 = stablehlo.constant dense<[1, 2]> : tensor<2xi32>
  %1 = stablehlo.add %0, %0 : tensor<2xi32>
  check.expect_eq_const %1, dense<[2, 4]> : tensor<2xi32>
  func.return
}

// -----

// This chunk has no function, so it is no case.

// -----

func.func @sqrt() {
  %0 = stablehlo.constant dense<[4.0, 2.0]> : tensor<2xf32>
  %1 = stablehlo.sqrt %0 : tensor<2xf32>
  check.expect_almost_eq_const %1, dense<[2.0, 1.41421]> : tensor<2xf32>
  func.return
}
""",
    "fail.mlir": INTERPRET_SPLIT + """
func.func @wrong_expectation() {
  %0 = stablehlo.constant dense<[1, 2]> : tensor<2xi32>
  %1 = stablehlo.add %0, %0 : tensor<2xi32>
  check.expect_eq_const %1, dense<[2, 5]> : tensor<2xi32>
  func.return
}
""",
    "error.mlir": INTERPRET_SPLIT + """
func.func @unsupported() {
  %0 = stablehlo.constant dense<[1, 2]> : tensor<2xi32>
  %1 = stablehlo.custom_call @no_such_target(%0) : (tensor<2xi32>) -> tensor<2xi32>
  check.expect_eq_const %1, dense<[1, 2]> : tensor<2xi32>
  func.return
}
""",
    "disabled.mlir": """\
// RUN-DISABLED(no interpreter support): stablehlo-opt -inline %s | stablehlo-translate --interpret
// RUN: stablehlo-opt %s > %t.1
func.func @main() -> tensor<i32> {
  %0 = stablehlo.constant dense<1> : tensor<i32>
  return %0 : tensor<i32>
}
""",
    "testdata_style.mlir": """\
// RUN: stablehlo-opt -inline %s | stablehlo-translate --interpret
module @jit_main {
  func.func public @main() -> tensor<3xi64> {
    %0 = call @inputs() : () -> tensor<3xi64>
    %1 = call @expected() : () -> tensor<3xi64>
    %2 = stablehlo.negate %0 : tensor<3xi64>
    stablehlo.custom_call @check.expect_eq(%2, %1) {has_side_effect = true}
        : (tensor<3xi64>, tensor<3xi64>) -> ()
    return %2 : tensor<3xi64>
  }
  func.func private @inputs() -> tensor<3xi64> {
    %c = stablehlo.constant dense<[1, -2, 0]> : tensor<3xi64>
    return %c : tensor<3xi64>
  }
  func.func private @expected() -> tensor<3xi64> {
    %c = stablehlo.constant dense<[-1, 2, 0]> : tensor<3xi64>
    return %c : tensor<3xi64>
  }
}
""",
    "roundtrip.mlir": """\
// RUN: stablehlo-opt %s > %t.1
func.func @main(%arg0: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %0 = stablehlo.abs %arg0 : tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}
""",
    "expected_error.mlir": """\
// RUN: not stablehlo-translate --interpret %s
func.func @main() {
  %0 = stablehlo.constant dense<1> : tensor<i32>
  check.expect_eq_const %0, dense<2> : tensor<i32>
  func.return
}
""",
    "filecheck.mlir": "// RUN: stablehlo-translate %s --interpret "
                      '--args="[dense<[1, 2]> : tensor<2xi32>, dense<3> : tensor<2xi32>]" '
                      "| FileCheck %s\n" + """\
func.func @main(%arg0: tensor<2xi32>, %arg1: tensor<2xi32>) -> (tensor<2xi32>, tensor<i1>) {
  %0 = stablehlo.add %arg0, %arg1 : tensor<2xi32>
  %1 = stablehlo.constant dense<true> : tensor<i1>
  return %0, %1 : tensor<2xi32>, tensor<i1>
}
// CHECK:      tensor<2xi32> {
// CHECK-NEXT:   [4, 5]
// CHECK-NEXT: }
// CHECK-NEXT: tensor<i1> {true}
""",
    "filecheck_mismatch.mlir": """\
// RUN: stablehlo-translate --interpret %s | FileCheck %s
func.func @main() -> tensor<2xi32> {
  %0 = stablehlo.constant dense<[4, 5]> : tensor<2xi32>
  return %0 : tensor<2xi32>
}
// CHECK:      tensor<2xi32> {
// CHECK-NEXT:   [4, 6]
""",
}

EXPECTED = {
    ("pass.mlir", 0): "pass", ("pass.mlir", 2): "pass",
    ("fail.mlir", 0): "fail", ("error.mlir", 0): "error",
    ("disabled.mlir", None): "skip", ("testdata_style.mlir", None): "pass",
    ("roundtrip.mlir", None): "pass", ("expected_error.mlir", None): "pass",
    ("filecheck.mlir", None): "pass", ("filecheck_mismatch.mlir", None): "fail",
}


def write_suite(folder: Path, files: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def load_results(path: Path) -> tuple[dict, dict]:
    document = json.loads(path.read_text())
    for entry in document["results"]:
        assert {"file", "case", "status", "message"} <= set(entry)
    statuses = {(os.path.basename(e["file"]), e["case"]): e for e in document["results"]}
    return statuses, document["summary"]


@pytest.mark.parametrize("jobs", ["2", "0"])
def test_statuses_summary_and_json(capsys, tmp_path, jobs):
    suite = write_suite(tmp_path / "suite", FILES)
    report = tmp_path / "report.json"
    r = run_cli(capsys, "conformance", suite, "--jobs", jobs, "--json", report)
    assert r.code == 1  # something failed
    results, summary = load_results(report)
    assert {key: e["status"] for key, e in results.items()} == EXPECTED
    message = results[("fail.mlir", 0)]["message"]
    assert "check.expect_eq_const" in message and "4" in message and "5" in message
    assert "no_such_target" in results[("error.mlir", 0)]["message"]
    assert "RUN-DISABLED(no interpreter support)" in results[("disabled.mlir", None)]["message"]
    assert "[4, 6]" in results[("filecheck_mismatch.mlir", None)]["message"]
    assert (summary["pass"], summary["fail"], summary["error"], summary["skip"]) == (6, 2, 1, 1)
    assert summary["files"] == len(FILES) and summary["cases"] == 10
    assert summary["pass_rate"] == pytest.approx(6 / 9, abs=1e-5)
    last = r.out.strip().splitlines()[-1]
    assert "6 pass, 2 fail, 1 error, 1 skip" in last and "66.7%" in last
    assert any(line.startswith("FAIL  fail.mlir#0") for line in r.out.splitlines())
    assert "[10/10]" in r.err  # the progress counter


def test_exit_zero_when_nothing_fails(capsys, tmp_path):
    suite = write_suite(tmp_path / "good", {k: FILES[k] for k in
                                            ("pass.mlir", "disabled.mlir", "roundtrip.mlir")})
    r = run_cli(capsys, "conformance", suite, "--jobs", "1", "-v")
    assert r.code == 0, r.out + r.err
    assert "PASS  pass.mlir#2" in r.err  # -v prints every result


def test_timeout_costs_only_its_case(capsys, tmp_path):
    slow = """// RUN: stablehlo-translate --interpret %s
func.func @main() {
  %0 = stablehlo.constant dense<0> : tensor<i64>
  %1 = stablehlo.while(%i = %0) : tensor<i64>
  cond {
    %big = stablehlo.constant dense<100000000> : tensor<i64>
    %p = stablehlo.compare LT, %i, %big : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i64>
    %n = stablehlo.add %i, %one : tensor<i64>
    stablehlo.return %n : tensor<i64>
  }
  func.return
}
"""
    suite = write_suite(tmp_path / "slow", {"slow.mlir": slow, "pass.mlir": FILES["pass.mlir"]})
    report = tmp_path / "r.json"
    # The interpreter takes minutes over this loop (the cpu backend compiles it to a kernel).
    # 5 s, not less: on a loaded 2-core CI machine the passing case alone took over 1 s.
    r = run_cli(capsys, "conformance", suite, "--backend", "interpreter", "--jobs", "2",
                "--timeout", "5", "--json", report)
    assert r.code == 1
    results, _ = load_results(report)
    assert results[("slow.mlir", None)]["status"] == "error"
    assert results[("slow.mlir", None)]["message"] == "timed out after 5 s"
    assert results[("pass.mlir", 0)]["status"] == results[("pass.mlir", 2)]["status"] == "pass"


def test_worker_crash_costs_only_its_case(capsys, tmp_path, monkeypatch):
    import tools.conformance.pool as pool
    real = pool.execute_case

    def crashing(case, target):
        if os.path.basename(case.file) == "crash.mlir":
            os._exit(7)  # like a segfault: no exception, the process is gone
        return real(case, target)

    monkeypatch.setattr(pool, "execute_case", crashing)  # forked workers inherit it
    monkeypatch.setattr(pool, "_start_method", lambda fork=True: "fork")  # even if jax is loaded
    suite = write_suite(tmp_path / "crash", {"crash.mlir": FILES["pass.mlir"],
                                             "pass.mlir": FILES["pass.mlir"]})
    report = tmp_path / "r.json"
    r = run_cli(capsys, "conformance", suite, "--jobs", "1", "--json", report)
    assert r.code == 1
    results, summary = load_results(report)
    assert results[("crash.mlir", 0)]["message"] == "worker crashed (exit code 7)"
    assert results[("crash.mlir", 2)]["status"] == "error"
    assert results[("pass.mlir", 0)]["status"] == results[("pass.mlir", 2)]["status"] == "pass"
    assert summary["error"] == 2 and summary["pass"] == 2


def test_workers_are_not_forked_from_a_backend_that_does_not_survive_fork(capsys, tmp_path,
                                                                          monkeypatch):
    # A CUDA driver initialized by the command's fail-fast client is unusable in forked
    # workers (every case errored at once on the GPU): such a backend's workers start fresh.
    import tools.conformance.pool as pool
    from pjrt.registry import BACKENDS, make_client

    def fork_fragile_client():
        client = make_client("interpreter")
        client.survives_fork = False
        return client
    asked = []
    real = pool._start_method

    def start_method(fork=True):
        asked.append((fork, real(fork)))
        return "fork"  # the test's backend is registered in this process only
    monkeypatch.setitem(BACKENDS._entries, "fork_fragile", fork_fragile_client)
    monkeypatch.setattr(pool, "_start_method", start_method)
    suite = write_suite(tmp_path / "s", {"pass.mlir": FILES["pass.mlir"]})
    r = run_cli(capsys, "conformance", suite, "--backend", "fork_fragile", "--jobs", "1")
    assert r.code == 0, r.err
    fresh = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    assert asked == [(False, fresh)]
    asked.clear()
    r = run_cli(capsys, "conformance", suite, "--backend", "interpreter", "--jobs", "1")
    assert r.code == 0 and asked[0][0] is True


def test_bad_paths_and_backend(capsys, tmp_path):
    r = run_cli(capsys, "conformance", tmp_path / "missing")
    assert r.code == 1 and "no such file or folder" in r.err
    (tmp_path / "empty").mkdir()
    r = run_cli(capsys, "conformance", tmp_path / "empty")
    assert r.code == 1 and "no .mlir files" in r.err
    r = run_cli(capsys, "conformance", tmp_path, "--backend", "nope")
    assert r.code == 1 and "unknown backend 'nope'" in r.err


def test_result_ownership_check_fails_a_result_the_executable_keeps():
    # An executable that hands out its own array (as a folded constant would) must fail the
    # check; one that returns fresh storage on every call must pass it.
    import numpy as np
    from tools.conformance.execute import _check_results_are_owned, _Failed
    kept = np.arange(4, dtype=np.float32)

    def leaky(*args):
        return [kept]

    with pytest.raises(_Failed, match="result #0 changed"):
        _check_results_are_owned(leaky, [], leaky())

    def fresh(*args):
        return [np.arange(4, dtype=np.float32)]

    _check_results_are_owned(fresh, [], fresh())


QI8 = "!quant.uniform<i8:f32, 5.000000e-01:3>"
QW = "!quant.uniform<i8:f32, 2.500000e-01:-2>"
QACC = "!quant.uniform<i32:f32, 1.250000e-01>"
QUANTIZED_FILES = {
    "quantized.mlir": INTERPRET_SPLIT + f"""
func.func @integer() {{
  %a = stablehlo.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %qa = stablehlo.uniform_quantize %a : (tensor<2x2xf32>) -> tensor<2x2x{QI8}>
  %qw = stablehlo.uniform_quantize %a : (tensor<2x2xf32>) -> tensor<2x2x{QW}>
  %0 = stablehlo.dot_general %qa, %qw, contracting_dims = [1] x [0]
      : (tensor<2x2x{QI8}>, tensor<2x2x{QW}>) -> tensor<2x2x{QACC}>
  %1 = stablehlo.uniform_dequantize %0 : (tensor<2x2x{QACC}>) -> tensor<2x2xf32>
  check.expect_almost_eq_const %1, dense<[[7.0, 10.0], [15.0, 22.0]]> : tensor<2x2xf32>
  func.return
}}

// -----

func.func @hybrid() {{
  %a = stablehlo.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %qw = stablehlo.uniform_quantize %a : (tensor<2x2xf32>) -> tensor<2x2x{QW}>
  %0 = stablehlo.dot_general %a, %qw, contracting_dims = [1] x [0]
      : (tensor<2x2xf32>, tensor<2x2x{QW}>) -> tensor<2x2xf32>
  check.expect_almost_eq_const %0, dense<[[7.0, 10.0], [15.0, 22.0]]> : tensor<2x2xf32>
  func.return
}}
""",
}


def test_integer_path_classes_each_compiled_case(capsys, tmp_path):
    suite = write_suite(tmp_path / "q", {**QUANTIZED_FILES, "pass.mlir": FILES["pass.mlir"]})
    report = tmp_path / "r.json"
    r = run_cli(capsys, "conformance", suite, "--backend", "cpu", "--integer-path",
                "--jobs", "0", "--json", report)
    assert r.code == 0, r.out
    results, summary = load_results(report)
    assert summary["integer_path"] == {"integer": 1, "float": 1, "none": 2}
    assert results[("quantized.mlir", 0)]["integer_path"] == {"class": "integer", "reason": ""}
    hybrid = results[("quantized.mlir", 1)]["integer_path"]
    assert hybrid["class"] == "float" and hybrid["reason"].startswith("hybrid")
    assert results[("pass.mlir", 0)]["integer_path"]["class"] == "none"
    assert ("1 cases ran an integer contraction kernel (i8 x i8 -> i32), 1 ran their "
            "quantized contractions in float, 2 have no quantized contraction") in r.out
    assert "float (1): hybrid" in r.out


def test_integer_path_needs_the_cpu_backend(capsys, tmp_path):
    suite = write_suite(tmp_path / "q", QUANTIZED_FILES)
    r = run_cli(capsys, "conformance", suite, "--backend", "interpreter", "--integer-path")
    assert r.code == 1 and "--integer-path" in r.err
