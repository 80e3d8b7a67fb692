"""Pipeline schedules as data: GPipe's simulated bubble is (p-1)/(m+p-1), 1F1B has the same
bubble with unit times but holds at most p - s microbatches per stage (GPipe: m); bad
schedules are refused naming the stage and microbatch; the executor runs a schedule on stages
of compiled StableHLO programs, each on its own cpu device, and matches numpy."""
import numpy as np
import pytest

import pjrt
from pjrt.pipelining import (SCHEDULES, B, F, PipelineError, Schedule, copy_to_devices,
                             make_schedule, run_schedule, simulate, validate)

SIZES = [(1, 1), (2, 3), (4, 8), (3, 12), (8, 4), (5, 5)]


@pytest.mark.parametrize("p,m", SIZES)
def test_gpipe_bubble_is_p_minus_1_over_m_plus_p_minus_1(p, m):
    timeline = simulate(make_schedule("gpipe", p, m))
    assert timeline.bubble_fraction == pytest.approx((p - 1) / (m + p - 1), abs=1e-12)
    assert timeline.makespan == 2 * (m + p - 1)


@pytest.mark.parametrize("p,m", SIZES)
def test_1f1b_same_bubble_less_memory(p, m):
    gpipe, one_f_one_b = make_schedule("gpipe", p, m), make_schedule("1f1b", p, m)
    assert simulate(one_f_one_b).bubble_fraction == pytest.approx(
        simulate(gpipe).bubble_fraction, abs=1e-12)
    assert gpipe.peak_in_flight() == (m,) * p
    assert one_f_one_b.peak_in_flight() == tuple(min(p - s, m) for s in range(p))
    assert all(peak <= p for peak in one_f_one_b.peak_in_flight())


def test_unequal_times_and_transfers_lengthen_the_timeline():
    schedule = make_schedule("gpipe", 2, 2)
    # stage 1 twice as slow: F F on stage 0 (0-2), stage 1 F at 1-3, 3-5, then B 5-7, 7-9;
    # stage 0's B waits for stage 1's: 7-8, 9-10
    timeline = simulate(schedule, forward_time=[1, 2], backward_time=[1, 2])
    assert timeline.makespan == 10
    assert simulate(schedule, transfer_time=0.5).makespan == 2 * (2 + 2 - 1) + 2 * 0.5


def test_schedule_text_and_registry():
    assert set(SCHEDULES.names()) == {"1f1b", "gpipe"}
    assert str(make_schedule("gpipe", 2, 2)).splitlines() == [
        "stage 0: F0 SEND_F0 F1 SEND_F1 RECV_B0 B0 RECV_B1 B1",
        "stage 1: RECV_F0 F0 RECV_F1 F1 B0 SEND_B0 B1 SEND_B1"]


@pytest.mark.parametrize("compute,message", [
    ([[B(0), F(0)], [F(0), B(0)]], r"stage 0: microbatch 0 has actions \[RECV_B0 B0 F0 SEND_F0\]"),
    ([[F(0), B(0), F(1)], [F(0), B(0), F(1), B(1)]], r"stage 0: microbatch 1 has actions"),
    ([[F(0), F(0), B(0), B(0)], [F(0), B(0)]], r"stage 0: microbatch 0 has actions"),
    ([[F(0), B(0), F(2), B(2)], [F(0), B(0)]], r"names microbatch 2, but there are 2"),
    ([[F(0), B(0), F(1), B(1)], [F(1), B(1), F(0), B(0)]],
     r"deadlocks: stage 0 at RECV_B0; stage 1 at RECV_F1"),
])
def test_invalid_schedules_are_refused(compute, message):
    with pytest.raises(PipelineError, match=message):
        validate(Schedule.from_compute("mine", 2, compute))


def test_missing_transfer_and_bad_counts_are_refused():
    good = make_schedule("gpipe", 2, 1)
    dropped = Schedule("mine", 2, 1, (good.actions[0][:1], good.actions[1]))  # no SEND_F0
    with pytest.raises(PipelineError, match=r"stage 0: microbatch 0 has actions \[F0\], "
                                            r"expected \[F0 SEND_F0 RECV_B0 B0\]"):
        validate(dropped)
    with pytest.raises(PipelineError, match="num_microbatches must be a positive integer, "
                                            "got 0"):
        make_schedule("gpipe", 4, 0)
    with pytest.raises(PipelineError, match="unknown pipeline schedule 'zb'; known: 1f1b, gpipe"):
        make_schedule("zb", 4, 8)


# ---- the executor on pjrt stages: y = tanh(w * x), elementwise, one cpu device each --------

FORWARD = """
func.func @main(%w: tensor<2x4xf32>, %x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %0 = stablehlo.multiply %w, %x : tensor<2x4xf32>
  %1 = stablehlo.tanh %0 : tensor<2x4xf32>
  return %1 : tensor<2x4xf32>
}"""

# (w, x, dy) -> (dw, dx): d = dy * (1 - tanh(w x)^2), dw = d * x, dx = d * w
BACKWARD = """
func.func @main(%w: tensor<2x4xf32>, %x: tensor<2x4xf32>, %dy: tensor<2x4xf32>)
    -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %0 = stablehlo.multiply %w, %x : tensor<2x4xf32>
  %1 = stablehlo.tanh %0 : tensor<2x4xf32>
  %2 = stablehlo.multiply %1, %1 : tensor<2x4xf32>
  %one = stablehlo.constant dense<1.0> : tensor<2x4xf32>
  %3 = stablehlo.subtract %one, %2 : tensor<2x4xf32>
  %d = stablehlo.multiply %dy, %3 : tensor<2x4xf32>
  %dw = stablehlo.multiply %d, %x : tensor<2x4xf32>
  %dx = stablehlo.multiply %d, %w : tensor<2x4xf32>
  return %dw, %dx : tensor<2x4xf32>, tensor<2x4xf32>
}"""

ADD = """
func.func @main(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %0 = stablehlo.add %a, %b : tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}"""


class ProgramStage:
    """A stage of compiled programs bound to one device; the last stage's loss is sum(y)."""

    def __init__(self, client, device, w, is_last):
        def compile(text):
            return client.compile(text, pjrt.CompileOptions(device_assignment=[[device.id]]))
        self.device, self.is_last = device, is_last
        self.forward_program, self.backward_program = compile(FORWARD), compile(BACKWARD)
        self.add_program = compile(ADD)
        self.w = client.buffer_from_numpy(w, device)
        self.ones = client.buffer_from_numpy(np.ones((2, 4), np.float32), device)
        self.saved: dict = {}
        self.seen_devices: set = set()

    def receive(self, value):
        return copy_to_devices(value, [self.device])

    def forward(self, mb, x):
        self.seen_devices.add(x.device)
        self.saved[mb] = x
        return self.forward_program.execute([self.w, x])[0]

    def backward(self, mb, grad):
        grad = self.ones if grad is None else grad
        self.seen_devices.add(grad.device)
        dw, dx = self.backward_program.execute([self.w, self.saved.pop(mb), grad])
        return dx, dw

    def accumulate(self, total, grads):
        return self.add_program.execute([total, grads])[0]


def _reference(ws, xs):
    """Outputs and summed weight gradients of sum(y) over microbatches, in numpy."""
    outputs, grads = [], [np.zeros_like(w) for w in ws]
    for x in xs:
        acts = [x]
        for w in ws:
            acts.append(np.tanh(w * acts[-1]))
        outputs.append(acts[-1])
        dy = np.ones_like(x)
        for s in reversed(range(len(ws))):
            d = dy * (1 - acts[s + 1] ** 2)
            grads[s] += d * acts[s]
            dy = d * ws[s]
    return outputs, grads


@pytest.mark.parametrize("name", ["gpipe", "1f1b"])
def test_executor_runs_stages_on_their_devices(name):
    p, m = 4, 8
    client = pjrt.make_client("cpu", num_devices=p)
    rng = np.random.default_rng(0)
    ws = [rng.standard_normal((2, 4)).astype(np.float32) for _ in range(p)]
    xs = [rng.standard_normal((2, 4)).astype(np.float32) for _ in range(m)]
    stages = [ProgramStage(client, client.devices()[s], ws[s], s == p - 1) for s in range(p)]
    inputs = [client.buffer_from_numpy(x, client.devices()[0]) for x in xs]
    run = run_schedule(make_schedule(name, p, m), stages, inputs)
    outputs, grads = _reference(ws, xs)
    for got, want in zip(run.outputs, outputs):
        assert got.device == client.devices()[p - 1]
        np.testing.assert_allclose(got.to_numpy(), want, rtol=1e-5, atol=1e-6)
    for s, (got, want) in enumerate(zip(run.grads, grads)):
        assert got.device == client.devices()[s]
        np.testing.assert_allclose(got.to_numpy(), want, rtol=1e-5, atol=1e-6)
        assert stages[s].seen_devices == {client.devices()[s]}


def test_executor_refuses_wrong_counts():
    schedule = make_schedule("gpipe", 2, 4)
    with pytest.raises(PipelineError, match=r"runs 4 microbatch\(es\), got 3 input"):
        run_schedule(schedule, [object(), object()], [0, 1, 2])
    with pytest.raises(PipelineError, match=r"has 2 stage\(s\), got 3 stage object"):
        run_schedule(schedule, [object()] * 3, [0, 1, 2, 3])
