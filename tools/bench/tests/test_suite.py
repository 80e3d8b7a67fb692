"""A wrong result is a failure, not a time; an exception is an error naming the runner."""
from tools.bench.runners import Prepared, XlaRunner
from tools.bench.suite import bench_workload
from tools.bench.workloads import WORKLOADS


class _Wrong:
    def prepare(self, instance, lowered):
        return Prepared(lambda: [instance.inputs[0] + 2], 0.0, lambda: None)


class _Broken:
    def prepare(self, instance, lowered):
        raise RuntimeError("no kernel for add")


def test_mismatch_and_error_are_reported_not_timed():
    logs = []
    record = bench_workload(WORKLOADS["tiny_dispatch"],
                            {"xla": XlaRunner(), "wrong": _Wrong(), "broken": _Broken()},
                            quick=True, budget=0.01, log=logs.append)
    results = record["results"]
    assert results["xla"]["status"] == "ok" and results["xla"]["median_s"] > 0
    assert results["wrong"]["status"] == "mismatch" and "median_s" not in results["wrong"]
    assert "16 of 16 elements differ" in results["wrong"]["message"]
    assert results["broken"] == {"status": "error",
                                 "message": "RuntimeError: no kernel for add"}
    assert any(line.startswith("  MISMATCH wrong on tiny_dispatch") for line in logs)
    assert any(line.startswith("  ERROR broken on tiny_dispatch") for line in logs)
    assert record["flops"] == 16 and record["bytes"] > 0
