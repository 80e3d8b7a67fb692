"""The debugging tools from torch.compile: metrics_report() counts the backend's compiles,
executions, eager fallbacks by op and recompilations by cause; OPENHLO_DUMP_TO dumps each
compiled segment under its graph's name; OPENHLO_TRACE records compiles, executions and
fallbacks."""
import json
import re

import pytest
import torch

import frameworks.torch as oht
import pjrt
from frameworks.torch.tests.torch_support import fresh_compile
from stablehlo.instrument import dump, trace


@pytest.fixture(autouse=True)
def _fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENHLO_CACHE_DIR", str(tmp_path / "cache"))
    oht.reset_metrics()
    yield
    oht.reset_metrics()


def _count(report: str, name: str) -> int:
    found = re.search(rf"^\s+{re.escape(name)}\s+(\d+)$", report, re.M)
    return int(found.group(1)) if found else 0


def test_compiled_once_executed_three_times():
    compiled = fresh_compile(lambda x: torch.tanh(x) * 3)
    x = torch.randn(4, 8)
    for _ in range(3):
        torch.testing.assert_close(compiled(x), torch.tanh(x) * 3)
    m = pjrt.metrics()
    assert (m.compiles, m.executions, m.fallbacks, m.recompilations) == (1, 3, {}, {})
    report = oht.metrics_report(reset=True)
    assert (_count(report, "compiles"), _count(report, "executions")) == (1, 3)
    assert pjrt.metrics().executions == 0


def test_eager_fallbacks_counted_by_op_each_run():
    def f(x):
        return torch.special.i0(x * 2) + 1  # aten.i0 has no lowering: two compiled segments

    compiled = fresh_compile(f)
    x = torch.randn(4, 8)
    for _ in range(3):
        torch.testing.assert_close(compiled(x), f(x))
    m = pjrt.metrics()
    assert m.fallbacks == {"aten.i0.default": 3}
    assert (m.compiles, m.executions) == (2, 6)
    assert _count(oht.metrics_report(), "fallback: aten.i0.default") == 3


def test_recompilation_for_new_shapes_is_counted_once():
    compiled = fresh_compile(lambda x: torch.tanh(x) * 3)
    x = torch.randn(4, 8)
    torch._dynamo.mark_dynamic(x, 0)  # one graph for every batch size: our cache decides
    for arg in (x, torch.randn(6, 8), torch.randn(6, 8), x):
        torch.testing.assert_close(compiled(arg), torch.tanh(arg) * 3)
    m = pjrt.metrics()
    assert m.recompilations == {"torch: new input shapes and values": 1}
    assert (m.compiles, m.executions) == (2, 4)


def test_dynamo_retracing_the_same_code_is_a_recompilation():
    compiled = fresh_compile(lambda x: x * 2 + 1)
    for dtype in (torch.float32, torch.float64, torch.float32):  # float64 fails a guard
        x = torch.randn(3, dtype=dtype)
        torch.testing.assert_close(compiled(x), x * 2 + 1)
    m = pjrt.metrics()
    assert m.recompilations == {"torch: Dynamo traced the same code again": 1}
    assert (m.compiles, m.executions) == (2, 3)


def test_dump_and_trace_of_a_compiled_model(tmp_path):
    dump.configure(tmp_path / "dump")
    trace.start(str(tmp_path / "trace.json"))
    try:
        def f(x):
            return torch.special.i0(x * 2) + 1

        x = torch.randn(4, 8)
        torch.testing.assert_close(fresh_compile(f)(x), f(x))
        path = pjrt.flush_trace()
    finally:
        trace.stop()
        dump.configure(None)
    folders = sorted(p.name for p in (tmp_path / "dump").iterdir())
    # Both segments of the graph carry its name; the second gets a suffix.
    assert len(folders) == 2 and folders[1] == folders[0] + "-2"
    assert re.fullmatch(r"inference_\d+", folders[0])
    for folder in folders:
        assert (tmp_path / "dump" / folder / "000.input.mlir").exists()
    events = [e for e in json.load(open(path))["traceEvents"] if e["ph"] == "X"]
    [fallback] = [e for e in events if e["cat"] == "fallback"]
    assert fallback["name"] == "aten.i0.default" and fallback["args"]["node"]
    names = [e["name"] for e in events]
    assert names.count("compile") == 2 and names.count(f"execute {folders[0]}") == 2
