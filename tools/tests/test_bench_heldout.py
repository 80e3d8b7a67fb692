"""tools/bench_heldout.py: held-out JAX programs on openhlo agree with XLA:CPU (the reference
here), and the report and JSON say what a user reads (figures are not asserted: a benchmark)."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("jax")

from tools import bench_heldout  # noqa: E402

# compositions the bench suite has none of: a scan, axis-0 reductions, a momentum step,
# cumulative sums, strided convolutions
PICKED = ["layer_scan", "column_softmax", "gelu_momentum_train", "cumulative", "strided_convnet"]


# run(), not main(): main points every compilation cache (JAX's config included) at a
# temporary folder for cold compile times, which would outlive it in this test process.
def test_held_out_programs_agree_with_xla():
    figures = json.loads(json.dumps(bench_heldout.run(PICKED, quick=True, budget=0.01,
                                                      progress=lambda line: None)))
    report = bench_heldout.format_report(figures)
    assert [p["name"] for p in figures["programs"]] == PICKED
    assert figures["summary"]["wrong"] == [], report
    assert all(p["ratio"] > 0 for p in figures["programs"])
    assert "geometric mean" in report and "load average" in report


def test_a_wrong_result_is_reported(monkeypatch):
    # A backend answer perturbed beyond the tolerance must be caught, not timed.
    from tools.bench import runners
    prepare = runners.OpenHLORunner.prepare

    def perturbed(self, instance, lowered):
        prepared = prepare(self, instance, lowered)
        call = prepared.call
        prepared.call = lambda: [o + 0.1 for o in call()]
        return prepared
    monkeypatch.setattr(runners.OpenHLORunner, "prepare", perturbed)
    figures = bench_heldout.run(["cumulative"], quick=True, budget=0.01, progress=lambda l: None)
    assert figures["summary"]["wrong"] == ["cumulative"]
    assert "WRONG: output 0: " in bench_heldout.format_report(figures)


def test_unknown_program_is_refused(capsys):
    with pytest.raises(SystemExit):
        bench_heldout.main(["no_such_program"])
    assert "unknown program no_such_program" in capsys.readouterr().err
