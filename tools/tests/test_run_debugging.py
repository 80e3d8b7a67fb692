"""``openhlo run`` with the debugging tools: ``--metrics``, ``--profile`` naming fusions and
their kinds, ``OPENHLO_DUMP_TO`` and ``OPENHLO_TRACE`` (read by a fresh process)."""
import json
import re

import numpy as np

from tools.tests.helpers import run_subprocess

PROGRAM = """
module @softplus_rows {
  func.func @main(%x: tensor<8x16xf32>) -> tensor<8xf32> {
    %0 = stablehlo.exponential %x : tensor<8x16xf32>
    %1 = stablehlo.log_plus_one %0 : tensor<8x16xf32>
    %c = stablehlo.constant dense<0.0> : tensor<f32>
    %2 = stablehlo.reduce(%1 init: %c) applies stablehlo.add across dimensions = [1] : (tensor<8x16xf32>, tensor<f32>) -> tensor<8xf32>
    return %2 : tensor<8xf32>
  }
}
"""


def _run(tmp_path, monkeypatch, *flags):
    source = tmp_path / "softplus_rows.mlir"
    source.write_text(PROGRAM)
    x = np.linspace(-2, 2, 128, dtype=np.float32).reshape(8, 16)
    np.savez(tmp_path / "in.npz", arg0=x)
    monkeypatch.setenv("OPENHLO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENHLO_CPU_ASYNC_CODEGEN", "0")
    monkeypatch.setenv("OPENHLO_CPU_OPT_LEVEL", "1")  # the pipeline runs (and is dumped)
    monkeypatch.setenv("OPENHLO_DUMP_TO", str(tmp_path / "dump"))
    monkeypatch.setenv("OPENHLO_TRACE", str(tmp_path / "trace.json"))
    r = run_subprocess("run", source, "--inputs", tmp_path / "in.npz", "-o",
                       tmp_path / "out.npz", *flags)
    assert r.code == 0, r.err
    with np.load(tmp_path / "out.npz") as data:
        np.testing.assert_allclose(data["out0"], np.log1p(np.exp(x)).sum(axis=1), rtol=1e-5)
    return r


def test_metrics_dump_and_trace_of_a_run(tmp_path, monkeypatch):
    r = _run(tmp_path, monkeypatch, "--metrics")
    counts = dict(re.findall(r"^\s+(compiles|executions)\s+(\d+)$", r.err, re.M))
    assert counts == {"compiles": "1", "executions": "1"}, r.err

    folder = tmp_path / "dump" / "softplus_rows"
    files = sorted(p.name for p in folder.iterdir())
    # the input, then one file per pass of the cpu pipeline in order
    assert files[0] == "000.input.mlir" and "001.cpu.weight-only-dot.mlir" in files
    assert "002.cpu.inline.mlir" in files
    assert any(f.endswith(".fusion.explain.txt") for f in files)
    [kernels] = [f for f in files if f.endswith(".kernels.cc")]
    assert "ohk_" in (folder / kernels).read_text()

    trace = json.loads((tmp_path / "trace.json").read_text())
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert all(isinstance(e["ts"], float) and e["dur"] >= 0 and e["pid"] for e in events)
    names = {e["name"] for e in events}
    assert {"compile", "pipeline cpu", "fusion", "codegen", "kernel compile",
            "execute softplus_rows"} <= names
    [compile_event] = [e for e in events if e["name"] == "compile"]
    assert compile_event["args"]["program"] == "softplus_rows"


def test_profile_names_each_fusion_and_its_kind(tmp_path, monkeypatch):
    r = _run(tmp_path, monkeypatch, "--profile")
    lines = r.err.splitlines()
    # the profile's table, then what fell back to the interpreter (none here)
    end = next(i for i, line in enumerate(lines) if line.startswith("interpreter fallbacks:"))
    assert lines[end] == "interpreter fallbacks: none"
    rows = lines[1:end]
    fused = [row for row in rows if "@fused_" in row]
    assert fused and all(re.search(r"@fused_(\w+)_\d+ \(\1\)", row) for row in fused), rows
    trace = json.loads((tmp_path / "trace.json").read_text())
    instructions = [e for e in trace["traceEvents"] if e.get("cat") == "instruction"]
    assert {e["name"] for e in instructions} == {row.split(None, 3)[3] for row in rows}
    assert all(e["args"]["calls"] == 1 for e in instructions)
