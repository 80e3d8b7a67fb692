"""A small run of ``python -m tools.bench_checkpoint_jax`` (2 processes on loopback, a 4 MiB
state, one timed save per mode): both managers save and the workers check that the last
save restores to the state it saved; the figures and the report have both modes. Speed is
not asserted."""
import json

import pytest

from pjrt.c_api.loader import library_path
from pjrt.plugins.cpu.native_module import native
from tools import bench_checkpoint_jax

pytestmark = [pytest.mark.skipif(library_path() is None,
                                 reason="pjrt/c_api/_openhlo_pjrt*.so is not built"),
              pytest.mark.skipif(not native().HAVE_GLOO, reason="built without gloo")]


def test_small_state_across_two_processes(tmp_path, capsys):
    out = tmp_path / "figures.json"
    assert bench_checkpoint_jax.main(["--mb", "4", "--runs", "1", "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert figures["processes"] == 2 and len(figures["per_process"]) == 2
    assert figures["state_bytes"] >= 4 * 2 ** 20
    assert set(figures["modes"]) == {"async", "sync"}
    assert all(row["blocking_s"] > 0 for row in figures["modes"].values())
    text = capsys.readouterr().out
    assert "| async |" in text and "| sync |" in text
