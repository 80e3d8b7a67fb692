"""``python -m tools.bench_loop_overhead`` on two bodies with small trip counts and a tiny
timing budget: each loop stays in the executor, its results match the numpy loop at every
trip count, and the JSON holds the rows and the load. Speed is not asserted."""
import json

import numpy as np
import pytest

from tools import bench_loop_overhead


def test_two_bodies_run_in_the_executor_and_match_numpy(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENHLO_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "overhead.json"
    assert bench_loop_overhead.main(["--bodies", "v3_op1,v1_op5", "--steps", "7,40",
                                     "--budget", "0.01", "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    rows = {row["body"]: row for row in figures["rows"]}
    assert set(rows) == {"v3_op1", "v1_op5"}
    for row in rows.values():
        assert row["interpreted"]
        assert row["max_abs_diff"] == 0.0
        assert set(row["ns_per_iteration"]) == {"7", "40"}
    # main's constant and while; the condition's compare; the body's constant, add and ops
    assert rows["v3_op1"]["instructions"] == 2 + 1 + 3
    assert rows["v1_op5"]["instructions"] == 2 + 1 + 7
    assert len(figures["load_average"]) == 2
    assert "v1_op5" in capsys.readouterr().out


def test_numpy_loop_rotates_the_values_through_the_ops():
    a = np.array([0.5, -0.5, 0.25, 1.0], np.float32)
    b = np.array([1.0, 0.0, -1.0, 0.5], np.float32)
    x0, x1, x2 = (np.arange(4, dtype=np.float32) + 4 * k for k in range(3))
    three = bench_loop_overhead.numpy_loop(bench_loop_overhead.Body(3, 1), 4, a, b,
                                           [x0, x1, x2])
    for got, want in zip(three, [x1[::-1], x2[::-1], x0[::-1][::-1]]):
        np.testing.assert_array_equal(got, want)
    (five,) = bench_loop_overhead.numpy_loop(bench_loop_overhead.Body(1, 5), 1, a, b, [x0])
    np.testing.assert_array_equal(five, np.abs(x0[::-1] * a + b))


@pytest.mark.parametrize("argv, message", [
    (["--bodies", "nope"], "unknown bodies ['nope']"),
    (["--steps", "1,10"], "trip counts of at least 2"),
    (["--steps", "ten"], "--steps takes integers"),
])
def test_bad_arguments_are_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        bench_loop_overhead.main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
