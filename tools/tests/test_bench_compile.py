"""``python -m tools.bench_compile`` on two workloads at their small sizes: the cold compile
builds the kernels (in place, results XLA's), the warm start in a second process compiles
nothing, and the JSON holds the breakdown and the load. Times are not asserted."""
import json

from tools import bench_compile


def test_cold_and_warm_compiles_of_two_workloads(tmp_path, capsys):
    out = tmp_path / "compile.json"
    assert bench_compile.main(["--workloads", "mlp_train,softmax_xent", "--quick",
                               "--cache-root", str(tmp_path / "cache"),
                               "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    cold = {row["workload"]: row for row in figures["cold"]}
    warm = {row["workload"]: row for row in figures["warm"]}
    assert set(cold) == set(warm) == {"mlp_train", "softmax_xent"}
    for name, row in cold.items():
        ours = row["openhlo"]
        assert row["mismatch"] is None
        assert not ours["deferred"] and ours["libraries_compiled"] == 1
        assert len(ours["unit_compile_ms"]) >= 1
        assert 0 < ours["returns_ms"] <= ours["in_place_ms"]
        assert row["xla"]["ms"] > 0
        # The second process finds the program and its kernels in the caches.
        assert not warm[name]["openhlo"]["deferred"]
        assert warm[name]["openhlo"]["libraries_compiled"] == 0
    assert len(figures["load_average"]) == 2
    assert "softmax_xent" in capsys.readouterr().out


def test_unknown_workload_is_a_usage_error(capsys):
    import pytest
    with pytest.raises(SystemExit) as exc:
        bench_compile.main(["--workloads", "nope"])
    assert exc.value.code == 2
    assert "unknown workloads ['nope']" in capsys.readouterr().err
