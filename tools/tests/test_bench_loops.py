"""``python -m tools.bench_loops`` on two of its loops with a tiny timing budget: each loop
is checked against XLA's result, reported as compiled whole, and the JSON holds the rows and
the load. Speed is not asserted."""
import json

from tools import bench_loops


def test_two_loops_against_xla(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENHLO_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "loops.json"
    assert bench_loops.main(["--loops", "tanh_loop,scan_outputs", "--budget", "0.01",
                             "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    rows = {row["loop"]: row for row in figures["rows"]}
    assert set(rows) == {"tanh_loop", "scan_outputs"}
    for row in rows.values():
        assert row["compiled_whole"]
        assert row["max_abs_diff"] < 1e-4
        assert row["openhlo_ms"] > 0 and row["xla_ms"] > 0
    assert len(figures["load_average"]) == 2
    assert "scan_outputs" in capsys.readouterr().out


def test_unknown_loop_is_a_usage_error(capsys):
    import pytest
    with pytest.raises(SystemExit) as exc:
        bench_loops.main(["--loops", "nope"])
    assert exc.value.code == 2
    assert "unknown loops ['nope']" in capsys.readouterr().err
