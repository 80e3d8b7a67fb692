"""``python -m tools.bench_checkpoint`` at a tiny size, for both frameworks (2 processes on
loopback, one timed save per mode): the workers read the last save of each mode back and
check it against the state they saved (a mismatch fails the job); the figures and the
report have both modes, and the progress lines came through while the job ran. Speed is
not asserted."""
import json

import pytest

from pjrt.c_api.loader import library_path
from pjrt.plugins.cpu.native_module import native
from tools import bench_checkpoint

pytestmark = pytest.mark.skipif(not native().HAVE_GLOO, reason="built without gloo")


@pytest.mark.parametrize("framework", [
    pytest.param("jax", marks=pytest.mark.skipif(
        library_path() is None, reason="pjrt/c_api/_openhlo_pjrt*.so is not built")),
    "torch"])
def test_a_tiny_state_across_two_processes(framework, tmp_path, capsys):
    out = tmp_path / "figures.json"
    assert bench_checkpoint.main([framework, "--mb", "2", "--runs", "1", "--dir",
                                  str(tmp_path), "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert figures["framework"] == framework and figures["processes"] == 2
    assert [p["process"] for p in figures["per_process"]] == [0, 1]
    assert figures["state_bytes"] >= 2 * 2 ** 20 * 0.99
    assert set(figures["modes"]) == {"async", "sync"}
    assert all(row["blocking_s"] > 0 for row in figures["modes"].values())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figures.json"]  # removed
    captured = capsys.readouterr()
    assert f"| {bench_checkpoint.SAVES[framework]['async']} |" in captured.out
    assert "async save 1/1: blocked" in captured.err and "sync save 1/1" in captured.err


def test_a_mode_s_figure_is_the_median_of_the_slowest_process_per_run():
    def times(blocking):
        return {"modes": {mode: {"blocking_s": blocking, "background_s": [0.0] * 3}
                          for mode in bench_checkpoint.MODES}}
    summary = bench_checkpoint.summarize([times([1.0, 5.0, 2.0]), times([3.0, 1.0, 1.0])])
    assert summary["async"]["blocking_s"] == 3.0  # median of 3, 5, 2
