"""A 2-size slice of ``python -m tools.bench_allreduce`` under torchrun (2 processes on
loopback): both all-reduces (ours across processes, torch.distributed's gloo) give the sum of
every process's contribution, which the workers check for every size before timing; the
report has a row per size. Speed is not asserted."""
import pytest

from pjrt.plugins.cpu.native_module import native
from tools import bench_allreduce

pytestmark = pytest.mark.skipif(not native().HAVE_GLOO, reason="built without gloo")


def test_two_sizes_across_two_processes():
    sizes = [4096, 256 * 1024]
    figures = bench_allreduce.measure(sizes=sizes, processes=(), quick=True)
    rows = figures["allreduce"]["rows"]
    assert figures["allreduce"]["processes"] == 2
    assert [row["bytes"] for row in rows] == sizes
    assert all(row["repeats"] >= 5 and row["ours_s"] > 0 and row["torch_gloo_s"] > 0
               for row in rows)
    text = bench_allreduce.report(figures)
    assert "| 4 KiB |" in text and "| 256 KiB |" in text

