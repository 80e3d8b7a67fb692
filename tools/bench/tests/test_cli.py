"""``openhlo bench`` end to end: a quick run on one tiny workload writes JSON and PNG."""
import json

from tools.tests.helpers import run_cli, run_subprocess


def test_quick_smoke_run_writes_json_and_png(tmp_path):
    out_json, out_png = tmp_path / "bench.json", tmp_path / "bench.png"
    outcome = run_subprocess("bench", "--quick", "--workloads", "tiny_dispatch",
                             "--runners", "openhlo,xla,torch_eager",
                             "--json", out_json, "--png", out_png, timeout=300)
    assert outcome.code == 0, outcome.err
    assert "[1/1] tiny_dispatch" in outcome.err          # progress on stderr
    assert "tiny_dispatch" in outcome.out and "summary" in outcome.out
    report = json.loads(out_json.read_text())
    assert report["runners"] == ["openhlo", "xla", "torch_eager"]
    (record,) = report["workloads"]
    assert record["name"] == "tiny_dispatch" and record["flops"] == 16
    for runner in ("openhlo", "xla", "torch_eager"):
        result = record["results"][runner]
        assert result["status"] == "ok" and result["median_s"] > 0
    assert record["results"]["xla"]["vs_xla"] == 1.0
    assert record["results"]["openhlo"]["compile_cold_s"] > 0
    assert record["results"]["openhlo"]["compile_cached_s"] > 0     # the second process
    assert "compile_cached_s" not in record["results"]["torch_eager"]   # nothing to compile
    assert "openhlo" in report["summary"]["runners"]
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_unknown_names_are_errors(capsys):
    outcome = run_cli(capsys, "bench", "--workloads", "tiny_dispatch,nope")
    assert outcome.code == 1
    assert "unknown workload nope" in outcome.err and "mlp_train" in outcome.err
    outcome = run_cli(capsys, "bench", "--runners", "tvm")
    assert outcome.code == 1 and "unknown runner tvm" in outcome.err
