"""A small ``python -m tools.bench_checkpoint_torch`` under torchrun (2 processes on
loopback): the workers read the first run's checkpoints back and check them against the state
before reporting; the report has the three rows. Speed is not asserted."""
import pytest

from pjrt.plugins.cpu.native_module import native
from tools import bench_checkpoint_torch

pytestmark = pytest.mark.skipif(not native().HAVE_GLOO, reason="built without gloo")


def test_a_small_state_across_two_processes(tmp_path):
    figures = bench_checkpoint_torch.measure(megabytes=32, runs=1, directory=str(tmp_path))
    assert figures["processes"] == 2 and figures["bytes"] == 32 * 1024 * 1024
    assert figures["save_s"] > 0 and 0 < figures["async_blocking_s"] <= figures["async_total_s"]
    text = bench_checkpoint_torch.report(figures)
    assert "| dcp.save (blocks throughout) |" in text and "async_save, blocking" in text
    assert list(tmp_path.iterdir()) == []  # the checkpoints were removed
