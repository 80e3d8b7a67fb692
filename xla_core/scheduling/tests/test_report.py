"""The timeline and the schedule report with a fixed estimator (every compute op 1 s, every
collective 2 s, as XLA's scheduler tests fix their latencies): exposed and hidden time,
overlaps by printed name, the JSON shape; a measured time replacing an estimate."""
from __future__ import annotations

import json

import pytest

import stablehlo
from xla_core.scheduling import MeasuredEstimator, schedule_report
from xla_core.testing.collective_text import SUM_OVER_PAIR as SUM

T = "tensor<4xf32>"


def pair(handle: str, operand: str) -> str:
    return f"""  {handle} = "openhlo.async_start"({operand}) ({{
  ^bb0(%a: {T}):
    %r = "stablehlo.all_reduce"(%a) {SUM} : ({T}) -> {T}
    stablehlo.return %r : {T}
  }}) : ({T}) -> !openhlo.future<{T}>"""


# one compute op under the all-reduce (2 s): 1 s hidden, 1 s exposed; then a synchronous
# all-reduce: all exposed
PROGRAM = f"""func.func @main(%x: {T}) -> ({T}, {T}) {{
{pair("%h", "%x")}
  %y = stablehlo.multiply %x, %x : {T}
  %d = "openhlo.async_done"(%h) : (!openhlo.future<{T}>) -> {T}
  %s = "stablehlo.all_reduce"(%y) {SUM} : ({T}) -> {T}
  return %d, %s : {T}, {T}
}}"""


class Fixed:
    """1 s per compute op (0 for the pair's ops and the terminator), 2 s per collective;
    a started collective runs beside the compute unless ``overlaps_compute`` is false."""

    def __init__(self, overlaps_compute: bool = True):
        self.overlaps_compute = overlaps_compute

    def op_seconds(self, op):
        return 0.0 if op.name.startswith("openhlo.") or op.name == "func.return" else 1.0

    def collective_seconds(self, collective):
        return 2.0


def test_report_shape_exposed_time_and_overlaps():
    module = stablehlo.parse(PROGRAM)
    report = json.loads(json.dumps(schedule_report(module, Fixed())))
    assert set(report) == {"collectives", "exposed_fraction", "overlaps_compute", "estimator"}
    assert report["estimator"] == "cost model" and report["overlaps_compute"] is True
    first, second = report["collectives"]
    assert {"kind", "bytes", "overlaps", "estimated_s", "exposed_s"} <= set(first)
    assert first["kind"] == "all-reduce" and first["bytes"] == 16
    assert first["overlaps"] == ["%1"]  # the multiply, as print_module names it
    assert (first["estimated_s"], first["exposed_s"]) == (2.0, 1.0)
    assert (second["estimated_s"], second["exposed_s"], second["overlaps"]) == (2.0, 2.0, [])
    assert report["exposed_fraction"] == pytest.approx(3.0 / 4.0)


def test_a_measured_time_replaces_the_estimate_and_is_recorded():
    module = stablehlo.parse(PROGRAM)
    multiply = next(op for op in module.walk() if op.name == "stablehlo.multiply")
    measured = MeasuredEstimator(Fixed(), lambda op: 2.0 if op is multiply else None)
    report = schedule_report(module, measured)
    assert report["collectives"][0]["exposed_s"] == 0.0  # 2 s of compute hide it
    assert measured.replaced == {multiply: (1.0, 2.0)}


def test_cost_model_prices_a_collective_by_transport():
    from xla_core.cost import hardware
    from xla_core.scheduling import CostModelEstimator, SchedulingError
    module = stablehlo.parse(PROGRAM)
    sync = next(op for op in module.lookup("main").body.operations
                if op.name == "stablehlo.all_reduce")
    hw = hardware("generic-cpu")
    # a ring all-reduce over 2 devices moves 2 (n-1)/n = 1 times its 16 bytes
    local = CostModelEstimator(hw, module).collective_seconds(sync)
    assert local == pytest.approx(hw.collective_latency + 16 / hw.collective_bandwidth)
    remote = CostModelEstimator(hw, module, "network").collective_seconds(sync)
    assert remote == pytest.approx(hw.network_latency + 16 / hw.network_bandwidth)
    with pytest.raises(SchedulingError, match="transport"):
        CostModelEstimator(hw, module, "carrier-pigeon")


def test_busy_counts_compute_and_communication_even_when_they_overlap():
    from xla_core.scheduling import simulate
    module = stablehlo.parse(PROGRAM)
    clock = simulate(module.lookup("main").body.operations, Fixed())
    # the pair's all-reduce (0-2 s) under the multiply (0-1 s), the done at 2 s, then the
    # synchronous all-reduce (2-4 s): 4 s elapse, 1 + 2 + 2 s of work
    assert clock.now == 4.0
    assert clock.busy == 5.0


def test_cost_model_shares_the_host_among_its_devices():
    from xla_core.cost import hardware
    from xla_core.scheduling import CostModelEstimator
    module = stablehlo.parse(PROGRAM)
    ops = module.lookup("main").body.operations
    multiply = next(op for op in ops if op.name == "stablehlo.multiply")
    sync = next(op for op in ops if op.name == "stablehlo.all_reduce")
    hw = hardware("generic-cpu")    # 4 cores
    overhead = hw.step_overhead
    alone = CostModelEstimator(hw, module)
    crowded = CostModelEstimator(hw.shared_by(12), module)
    # a multiply is bound by a copy on one thread, a collective by its own thread's copies:
    # 12 devices on 4 cores stretch both 3x (the kernel launch overhead is not shared)
    assert crowded.op_seconds(multiply) - overhead == \
        pytest.approx(3 * (alone.op_seconds(multiply) - overhead))
    assert crowded.collective_seconds(sync) == pytest.approx(3 * alone.collective_seconds(sync))
    assert CostModelEstimator(hw.shared_by(4), module).op_seconds(multiply) == \
        alone.op_seconds(multiply)

def test_without_a_core_for_communication_a_started_collective_is_all_exposed():
    # the pair's all-reduce runs at its start, whole (0-2 s), the multiply after it (2-3 s),
    # then the synchronous one (3-5 s): nothing overlaps, every second is exposed
    from xla_core.scheduling import simulate
    module = stablehlo.parse(PROGRAM)
    clock = simulate(module.lookup("main").body.operations, Fixed(overlaps_compute=False))
    assert clock.now == clock.busy == 5.0
    report = schedule_report(module, Fixed(overlaps_compute=False))
    assert report["overlaps_compute"] is False and report["exposed_fraction"] == 1.0
    assert [c["overlaps"] for c in report["collectives"]] == [[], []]


def test_the_devices_of_a_host_leave_a_core_for_communication_or_not():
    from xla_core.cost import hardware
    from xla_core.scheduling import CostModelEstimator
    module = stablehlo.parse(PROGRAM)
    hw = hardware("generic-cpu")    # 4 cores: an executing and a communication thread each
    assert CostModelEstimator(hw, module).overlaps_compute
    assert CostModelEstimator(hardware("generic-cpu", devices_per_host=2), module) \
        .overlaps_compute
    crowded = CostModelEstimator(hardware("generic-cpu", devices_per_host=3), module)
    assert not crowded.overlaps_compute
    assert not MeasuredEstimator(crowded, lambda op: None).overlaps_compute
