"""``openhlo quantize``: a program file in, a quantized (or lowered) program file out, with
the report and the numeric debugger's table; calibration from .npz files on the cpu backend."""
from __future__ import annotations

import json

import numpy as np

from stablehlo.interpreter import evaluate
from stablehlo.text import parse_module, print_module
from tools.cli import main
from xla_core.quantization.tests.programs import random_mlp


def _files(tmp_path):
    program, _ = random_mlp(0)
    source = tmp_path / "mlp.mlir"
    source.write_text(print_module(program))
    rng = np.random.default_rng(0)
    inputs = tmp_path / "calibration.npz"
    np.savez(inputs, arg0=rng.standard_normal((3, 4, 16)).astype(np.float32))
    return program, source, inputs


def test_static_int8_with_report_and_numerics(tmp_path, capsys):
    program, source, inputs = _files(tmp_path)
    out, report, numerics = (tmp_path / n for n in ("q.mlir", "report.json", "numerics.json"))
    code = main(["quantize", str(source), "--mode", "static-int8", "--calibration", str(inputs),
                 "--method", "percentile", "--skip", "dot_general#1", "-o", str(out),
                 "--report", str(report), "--debug-numerics", str(numerics)])
    assert code == 0
    stderr = capsys.readouterr().err
    assert "1 of 2 ops quantized" in stderr and "isolated SQNR" in stderr
    entries = {e["id"]: e for e in json.loads(report.read_text())["ops"]}
    assert entries["dot_general#0"]["activation"]["method"] == "percentile"
    assert entries["dot_general#1"]["reason"] == "in the skip list"
    layers = json.loads(numerics.read_text())["layers"]
    assert [layer["id"] for layer in layers] == ["dot_general#0"]
    quantized = parse_module(out.read_text())
    assert "uniform_quantize" in out.read_text()
    x = np.load(inputs)["arg0"][0]   # within the calibrated range: no clipping
    expected = evaluate(program, [x])[0]
    np.testing.assert_allclose(evaluate(quantized, [x])[0], expected, atol=0.05)


def test_weight_int4_lowered_to_stdout(tmp_path, capsys):
    _, source, _ = _files(tmp_path)
    assert main(["quantize", str(source), "--mode", "weight-int4", "--group-size", "8",
                 "--lower"]) == 0
    text = capsys.readouterr().out
    assert "quant" not in text and "xi4>" in text


def test_static_without_calibration_is_an_error(tmp_path, capsys):
    _, source, _ = _files(tmp_path)
    assert main(["quantize", str(source), "--mode", "static-int8"]) == 1
    assert "static-int8 needs calibration inputs" in capsys.readouterr().err
