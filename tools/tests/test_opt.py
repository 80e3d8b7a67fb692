"""``openhlo opt``: round trip, generic form, passes and their instruments, errors."""
from __future__ import annotations

import numpy as np

from xla_core.testing.filecheck import check
from tools.tests.helpers import REPO_ROOT, run_cli
from xla_core.buffers.tests.fused_programs import FUSIONS

HELLO = REPO_ROOT / "examples" / "hello.mlir"
GOLDEN_INLINE = REPO_ROOT / "xla_core" / "passes" / "tests" / "inline.mlir"

WITH_CALLS = """\
func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = func.call @scale(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = stablehlo.negate %arg0 : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
func.func private @scale(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.constant dense<3.0> : tensor<4xf32>
  %1 = stablehlo.multiply %arg0, %0 : tensor<4xf32>
  func.return %1 : tensor<4xf32>
}
"""


def test_round_trip_is_stable(capsys, tmp_path):
    first = run_cli(capsys, "opt", HELLO)
    assert first.code == 0, first.err
    printed = tmp_path / "printed.mlir"
    printed.write_text(first.out)
    second = run_cli(capsys, "opt", printed)
    assert second.code == 0 and second.out == first.out
    assert "stablehlo.dot_general" in first.out


def test_generic_form_reparses_to_the_same_module(capsys, tmp_path):
    generic = run_cli(capsys, "opt", HELLO, "--generic")
    assert generic.code == 0, generic.err
    assert '"stablehlo.add"' in generic.out and '"func.func"' in generic.out
    path = tmp_path / "generic.mlir"
    path.write_text(generic.out)
    assert run_cli(capsys, "opt", path).out == run_cli(capsys, "opt", HELLO).out


def test_passes_transform_and_keep_results(capsys, tmp_path):
    source = tmp_path / "calls.mlir"
    source.write_text(WITH_CALLS)
    out = tmp_path / "opt.mlir"
    r = run_cli(capsys, "opt", source, "--passes=inline,dce", "-o", out)
    assert r.code == 0 and r.out == "", r.err
    text = out.read_text()
    assert "call" not in text and "@scale" not in text and "negate" not in text
    check(text, "// CHECK: stablehlo.multiply %arg0, %{{.*}} : tensor<4xf32>\n"
                "// CHECK-NEXT: return", ("CHECK",))
    np.savez(tmp_path / "in.npz", arg0=np.array([1, -2, 0.5, 4], np.float32))
    results = []
    for program in (source, out):
        run_cli(capsys, "run", program, "--inputs", tmp_path / "in.npz",
                "--output", tmp_path / "r.npz")
        results.append(np.load(tmp_path / "r.npz")["out0"])
    np.testing.assert_array_equal(results[0], np.array([3, -6, 1.5, 12], np.float32))
    np.testing.assert_array_equal(results[1], results[0])


def test_pipeline_print_after_all_and_timing(capsys, tmp_path):
    source = tmp_path / "calls.mlir"
    source.write_text(WITH_CALLS)
    r = run_cli(capsys, "opt", source, "--pipeline=default", "--print-after-all", "--timing")
    assert r.code == 0, r.err
    assert r.err.index("IR Dump After inline") < r.err.index("IR Dump After dce")
    assert "Pass execution timing report" in r.err
    r = run_cli(capsys, "opt", source, "--pipeline=default", "--disable-pass=inline")
    assert "call @scale" in r.out and "negate" not in r.out


def test_golden_inline_file_through_the_command(capsys):
    r = run_cli(capsys, "opt", GOLDEN_INLINE, "--split-input-file", "--passes=inline")
    assert r.code == 0, r.err
    check(r.out, GOLDEN_INLINE.read_text(), ("CHECK",))


def test_errors(capsys, tmp_path):
    r = run_cli(capsys, "opt", HELLO, "--passes=inline,nope")
    assert r.code == 1 and "unknown pass 'nope'" in r.err and "dce" in r.err
    r = run_cli(capsys, "opt", HELLO, "--pipeline=nope")
    assert r.code == 1 and "unknown pipeline 'nope'" in r.err
    r = run_cli(capsys, "opt", HELLO, "--timing")
    assert r.code == 1 and "need --passes, --pipeline, --autocast or --auto-sharding" in r.err
    r = run_cli(capsys, "opt", HELLO, "--passes=inline", "--pipeline=default")
    assert r.code == 2
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @main(%a: tensor<2xf32>, %b: tensor<3xf32>) -> tensor<2xf32> {\n"
                   "  %0 = stablehlo.add %a, %b : (tensor<2xf32>, tensor<3xf32>) -> tensor<2xf32>\n"
                   "  func.return %0 : tensor<2xf32>\n}\n")
    r = run_cli(capsys, "opt", bad)
    assert r.code == 1
    lines = r.err.splitlines()
    assert lines[0].startswith(f"{bad}:2:") and "error:" in lines[0] and "stablehlo.add" in lines[0]
    assert lines[1].strip().startswith("%0 = stablehlo.add") and lines[2].strip() == "^"
    assert "Traceback" not in r.err


def test_autocast_runs_before_the_given_passes(capsys):
    out = run_cli(capsys, "opt", HELLO, "--autocast", "bf16", "--passes=dce")
    assert out.code == 0, out.err
    check(out.out, """
// CHECK: %[[X:[^ ]+]] = stablehlo.convert %arg0 : (tensor<2x3xf32>) -> tensor<2x3xbf16>
// CHECK-NEXT: %[[W:[^ ]+]] = stablehlo.convert %arg1 : (tensor<3x4xf32>) -> tensor<3x4xbf16>
// CHECK-NEXT: stablehlo.dot_general %[[X]], %[[W]], {{.*}} -> tensor<2x4xf32>
// CHECK: stablehlo.reduce({{.*}}) applies stablehlo.add {{.*}} : (tensor<2x4xf32>, tensor<f32>)
""", ("CHECK",))


def test_memory_report_on_the_command_line(capsys, tmp_path):
    path = tmp_path / "f.mlir"
    path.write_text(FUSIONS)
    r = run_cli(capsys, "opt", path, "--passes=memory-schedule", "--memory-report")
    assert r.code == 0, r.err
    assert "stablehlo.composite" in r.out
    assert "Memory usage of @main (6 ops scheduled, 1 results in place)" in r.err
    # Scheduled: negate, loop_0, loop_1, loop_3 (over %x, which dies there), reduction.
    # At loop_1, %x, loop_0's and loop_1's results (128 B each) are live: the heap is 384 B.
    assert "peak:           528 B = arguments 144 B + heap 384 B" in r.err, r.err
    assert "intermediates:  256 B without reuse" in r.err
    assert "[0, 5]  #0 stablehlo.negate tensor<8x4xf32>, #3 stablehlo.composite" in r.err
