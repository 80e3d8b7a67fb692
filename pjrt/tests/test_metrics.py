"""pjrt.metrics(): compiles, executions, transfers and recompilations counted once each, on
the cpu backend and the interpreter; reset_metrics() starts over."""
import numpy as np
import pytest

import pjrt

PROGRAM = """
module @scale {
  func.func @main(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
    %0 = stablehlo.multiply %x, %x : tensor<2x3xf32>
    %1 = stablehlo.add %0, %x : tensor<2x3xf32>
    return %1 : tensor<2x3xf32>
  }
}
"""


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENHLO_CACHE_DIR", str(tmp_path / "cache"))
    pjrt.reset_metrics()
    yield
    pjrt.reset_metrics()


@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
def test_compiled_once_executed_three_times(backend):
    exe = pjrt.make_client(backend).compile(PROGRAM)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for _ in range(3):
        [out] = exe(x)
        np.testing.assert_array_equal(out, x * x + x)
    m = pjrt.metrics()
    assert (m.compiles, m.executions, m.recompilations) == (1, 3, {})
    assert m.compile_seconds > 0
    pjrt.reset_metrics()
    assert (pjrt.metrics().compiles, pjrt.metrics().executions) == (0, 0)
    exe(x)
    assert pjrt.metrics().executions == 1


def test_buffers_count_transfers_with_bytes():
    client = pjrt.make_client("cpu")
    exe = client.compile(PROGRAM)
    x = np.ones((2, 3), np.float32)
    buffer = client.buffer_from_numpy(x)
    [out] = exe.execute([buffer])
    exe.execute([x])  # a host argument is transferred first
    np.testing.assert_array_equal(out.to_numpy(), x * x + x)
    m = pjrt.metrics()
    assert m.executions == 2
    assert (m.transfers_to_device, m.bytes_to_device) == (2, 2 * x.nbytes)
    assert (m.transfers_to_host, m.bytes_to_host) == (1, x.nbytes)


def test_same_program_again_is_a_recompilation_and_a_cache_hit():
    client = pjrt.make_client("cpu")
    client.compile(PROGRAM)
    client.compile(PROGRAM)  # served by the persistent cache (a fresh folder per test)
    m = pjrt.metrics()
    assert (m.compiles, m.compile_cache_hits) == (2, 1)
    assert m.recompilations == {"same program compiled again": 1}
    pjrt.reset_metrics()  # zeroes the counts but remembers what was compiled
    assert pjrt.metrics().recompilations == {}
    client.compile(PROGRAM)
    assert pjrt.metrics().recompilations == {"same program compiled again": 1}


def test_report_lists_every_counter():
    client = pjrt.make_client("cpu")
    client.compile(PROGRAM)(np.zeros((2, 3), np.float32))
    client.compile(PROGRAM)
    pjrt.make_client("cpu").compile(PROGRAM)  # another client's first compile of it
    text = str(pjrt.metrics())
    assert text == pjrt.metrics().report()
    lines = dict(line.strip().split("  ", 1) for line in text.splitlines()[1:])
    assert lines["compiles"].strip() == "3"
    assert lines["executions"].strip() == "1"
    assert lines["recompilations: same program compiled again"].strip() == "1"
    assert lines["host->device transfers"].strip() == "0 (0 B)"
