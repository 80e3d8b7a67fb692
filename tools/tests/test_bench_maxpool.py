"""``python -m tools.bench_maxpool`` on one small shape with a tiny timing budget: both
poolings (with indices, values only) are checked bit for bit against eager inside the tool,
and the JSON holds their times and the load. Speed is not asserted."""
import json

from tools import bench_maxpool


def test_one_shape_with_and_without_indices(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENHLO_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "maxpool.json"
    assert bench_maxpool.main(["--shapes", "1x2x9x11", "--budget", "0.01",
                               "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    [row] = figures["rows"]
    assert row["shape"] == [1, 2, 9, 11]
    for kind in ("indices", "values"):
        assert row[kind]["openhlo_ms"] > 0 and row[kind]["eager_ms"] > 0
    assert len(figures["load_average"]) == 2
    assert "1x2x9x11" in capsys.readouterr().out
