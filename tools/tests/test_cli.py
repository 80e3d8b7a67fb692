"""The ``openhlo`` entry point's shared options (tools/cli.py)."""
from __future__ import annotations

import os

import pytest

from stablehlo.errors import TRACEBACK_ENV

from tools.tests.helpers import REPO_ROOT, run_cli

TYPO = ("func.func @main() -> tensor<f32> {\n"
        "  %0 = stablehlo.frobnicate : tensor<f32>\n"
        "  func.return %0 : tensor<f32>\n}\n")


@pytest.mark.parametrize("position", ["before", "after"])
def test_traceback_flag_before_or_after_the_subcommand(capsys, tmp_path, monkeypatch, position):
    monkeypatch.delenv(TRACEBACK_ENV, raising=False)
    program = tmp_path / "typo.mlir"
    program.write_text(TYPO)
    argv = (["--traceback", "run", program] if position == "before"
            else ["run", program, "--traceback"])
    r = run_cli(capsys, *argv)
    assert r.code == 1
    assert r.err.startswith("Traceback (most recent call last):")
    assert os.path.join("stablehlo", "text", "parser.py") in r.err
    assert f"{program}:2:" in r.err


@pytest.mark.parametrize("position", ["before", "after"])
def test_traceback_flag_keeps_the_public_apis_internal_frames(capsys, monkeypatch, position):
    monkeypatch.delenv(TRACEBACK_ENV, raising=False)
    argv = ["run", REPO_ROOT / "examples" / "hello.mlir", "--backend", "nope"]
    argv = ["--traceback", *argv] if position == "before" else [*argv, "--traceback"]
    r = run_cli(capsys, *argv)
    assert r.code == 1 and "unknown backend 'nope'" in r.err
    # make_client is an api_boundary: its frames show only because the flag asked for them.
    assert os.path.join("pjrt", "registry.py") in r.err
    assert TRACEBACK_ENV not in os.environ  # set for the command only


def test_without_the_flag_only_the_diagnostic_is_printed(capsys, tmp_path):
    program = tmp_path / "typo.mlir"
    program.write_text(TYPO)
    r = run_cli(capsys, "run", program)
    assert r.code == 1
    assert r.err.startswith(f"{program}:2:")
    assert "Traceback" not in r.err
