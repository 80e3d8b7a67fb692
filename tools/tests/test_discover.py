"""RUN-line interpretation and chunk splitting, on texts written for each rule."""
from __future__ import annotations

from stablehlo.text import split_input_file
from tools.conformance.discover import (INTERPRET, ROUNDTRIP, SKIP, find_files, plan_file,
                                        run_commands)

FUNC = "func.func @f{n}() {{\n  func.return\n}}\n"


def test_split_marker_is_a_substring_and_lines_are_kept():
    text = "a\n// -----\nb\nc\n// // ----- trailing words\nd\n"
    chunks = split_input_file(text)
    assert [(i, line) for i, line, _ in chunks] == [(0, 1), (1, 2), (2, 5)]
    assert chunks[1][2] == "\nb\nc\n// "
    assert chunks[2][2] == "\nd\n"


def test_chunks_without_functions_are_no_cases_and_lines_are_padded():
    text = ("// RUN: stablehlo-translate --interpret -split-input-file %s\n"
            + FUNC.format(n=0) + "// -----\n// comment only\n// -----\n" + FUNC.format(n=2))
    cases = plan_file("x.mlir", text, ())
    assert [(c.case, c.function, c.kind) for c in cases] == [(0, "f0", INTERPRET),
                                                             (2, "f2", INTERPRET)]
    # Padding keeps the file's line numbers: @f2 is on line 8 of the file.
    assert cases[0].line == 2 and cases[1].line == 8
    assert cases[1].text.splitlines()[7] == "func.func @f2() {"


def test_testdata_run_lines():
    text = ("// RUN: stablehlo-opt -inline %s | stablehlo-translate --interpret\n"
            "// RUN: stablehlo-translate --serialize --target=current %s | "
            "stablehlo-translate --deserialize | stablehlo-opt > %t.0\n"
            "// RUN: stablehlo-opt %s > %t.1\n// RUN: diff %t.0 %t.1\n" + FUNC.format(n=0))
    (case,) = plan_file("t.mlir", text, known_passes={"inline"})
    assert case.kind == INTERPRET and case.case is None
    assert case.invocation.passes == ("inline",) and not case.invocation.expect_error
    (case,) = plan_file("t.mlir", text, known_passes=())
    assert case.invocation.passes == ()  # unknown opt flags are lowerings we skip


def test_passes_through_a_temporary_file():
    text = ("// RUN: stablehlo-opt -inline --split-input-file %s > %t.mlir\n"
            "// RUN: stablehlo-translate --interpret --split-input-file %t.mlir\n"
            + FUNC.format(n=0) + "// -----\n" + FUNC.format(n=1))
    cases = plan_file("c.mlir", text, known_passes={"inline"})
    assert [c.case for c in cases] == [0, 1]
    assert all(c.invocation.passes == ("inline",) for c in cases)


def test_disabled_roundtrip_and_special_invocations():
    disabled = ("// RUN-DISABLED(no interpreter support) stablehlo-opt -inline %s | "
                "stablehlo-translate --interpret\n// RUN: stablehlo-opt %s > %t.1\n")
    (case,) = plan_file("d.mlir", disabled + FUNC.format(n=0), ())
    assert case.kind == SKIP and case.message == "RUN-DISABLED(no interpreter support)"
    (case,) = plan_file("r.mlir", "// RUN: stablehlo-opt %s > %t.1\n" + FUNC.format(n=0), ())
    assert case.kind == ROUNDTRIP
    special = (
        '// RUN: stablehlo-translate %s --interpret --args="[dense<1> : tensor<2xi32>]" '
        "| FileCheck %s\n"
        '// RUN: not stablehlo-translate %s --interpret --args="x" 2>&1 | FileCheck %s '
        "--check-prefixes=CHECK-ERR\n"
        "// RUN: dirname %t | xargs -I{DIR} stablehlo-translate --interpret "
        "--probe-output-dir={DIR} --interpreter-print-dense %s\n" + FUNC.format(n=0))
    first, second, third = (c.invocation for c in plan_file("s.mlir", special, ()))
    assert first.args_text == "[dense<1> : tensor<2xi32>]" and first.check_prefixes == ("CHECK",)
    assert second.expect_error and second.check_prefixes == ("CHECK-ERR",)
    assert third.probe and third.print_dense and not third.check_prefixes


def test_run_line_continuations():
    enabled, disabled = run_commands("// RUN: a \\\n// RUN: b\n// RUN-DISABLED: c\n")
    assert enabled == ["a b"] and disabled == ["RUN-DISABLED"]


def test_find_files_recurses_sorted(tmp_path):
    (tmp_path / "b").mkdir()
    for name in ("b/z.mlir", "b/a.mlir", "c.mlir", "notes.txt"):
        (tmp_path / name).write_text("")
    found = [p.replace(str(tmp_path) + "/", "") for p in find_files([str(tmp_path)])]
    assert found == ["b/a.mlir", "b/z.mlir", "c.mlir"]
