"""Pipeline parallelism under torch.compile(openhlo): GPipe and 1F1B with 4 stages and 8
microbatches give eager PyTorch's whole-batch output, loss and every parameter gradient, each
stage's programs compiled for and run on its own devices (one each, or two with the stage's
layers sharded Megatron-style over them); bad batches and split points are clear errors."""
import copy

import numpy as np
import pytest
import torch

import pjrt
from frameworks.torch import pipelining as pp
from frameworks.torch import placement
from frameworks.torch import sharding as xs


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(*[layer for _ in range(4)
                                 for layer in (torch.nn.Linear(8, 8), torch.nn.Tanh())])


def _compiled_on(monkeypatch) -> list:
    """``(group, executable)`` of every program compiled under a placement, as compiled (from
    a fresh Dynamo cache: equal stages of an earlier test would reuse their programs)."""
    torch._dynamo.reset()
    compiled = []
    original = placement.Placement.compile

    def spy(self, module, num_partitions=1):
        executable = original(self, module, num_partitions)
        compiled.append((self.devices, executable))
        return executable
    monkeypatch.setattr(placement.Placement, "compile", spy)
    return compiled


def _check_against_eager(model, reference, schedule, x, y, loss_fn):
    losses = []
    out = schedule.step(x, target=y, losses=losses)
    expected = reference(x)
    loss = loss_fn(expected, y)
    loss.backward()
    torch.testing.assert_close(out, expected.detach(), rtol=1e-5, atol=1e-6)
    assert len(losses) == schedule.n_microbatches
    torch.testing.assert_close(torch.stack(losses).mean(), loss.detach(), rtol=1e-5, atol=1e-6)
    for (name, got), want in zip(model.named_parameters(), reference.parameters()):
        assert got.grad is not None, name
        torch.testing.assert_close(got.grad, want.grad, rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("schedule_class", [pp.ScheduleGPipe, pp.Schedule1F1B])
def test_pipeline_matches_eager(schedule_class, monkeypatch):
    compiled = _compiled_on(monkeypatch)
    model = _model()
    reference = copy.deepcopy(model)
    x, y = torch.randn(16, 8), torch.randn(16, 8)
    stages = [pp.PipelineStage(part, i, 4)
              for i, part in enumerate(pp.split_sequential(model, [2, 4, "6"]))]
    schedule = schedule_class(stages, n_microbatches=8, loss_fn=torch.nn.MSELoss())
    pjrt.reset_metrics()
    _check_against_eager(model, reference, schedule, x, y, torch.nn.MSELoss())
    assert pjrt.metrics().fallbacks == {}
    # a forward and a backward program per stage, each on the stage's device only
    groups = sorted(group for group, _ in compiled)
    assert groups == [(0,), (0,), (1,), (1,), (2,), (2,), (3,), (3,)]
    for group, executable in compiled:
        assert [d.id for d in executable.addressable_devices()] == list(group)
    expected_bubble = (4 - 1) / (8 + 4 - 1)
    assert schedule.bubble_fraction == pytest.approx(expected_bubble)


def test_spmd_inside_stages(monkeypatch):
    """4 stages x 2 devices; stages 1 and 2 split their Linear over their own two devices."""
    compiled = _compiled_on(monkeypatch)
    model = _model()
    reference = copy.deepcopy(model)
    x, y = torch.randn(16, 8), torch.randn(16, 8)
    parts = pp.split_sequential(model, [2, 4, 6])
    mesh = xs.Mesh(np.arange(2), (2,), ("model",))
    xs.mark_sharding(parts[1][0].weight, mesh, ("model", None))  # column-parallel
    xs.mark_sharding(parts[2][0].weight, mesh, (None, "model"))  # row-parallel
    stages = [pp.PipelineStage(part, i, 4, devices=(2 * i, 2 * i + 1))
              for i, part in enumerate(parts)]
    schedule = pp.Schedule1F1B(stages, n_microbatches=8, loss_fn=torch.nn.MSELoss())
    _check_against_eager(model, reference, schedule, x, y, torch.nn.MSELoss())
    sharded = [(group, exe) for group, exe in compiled if exe.num_partitions == 2]
    assert sorted(group for group, _ in sharded) == [(2, 3), (2, 3), (4, 5), (4, 5)]
    for group, executable in sharded:
        assert [d.id for d in executable.addressable_devices()] == list(group)
    row_parallel = [exe for group, exe in sharded if group == (4, 5)]
    assert any(op.name == "stablehlo.all_reduce" for exe in row_parallel
               for op in exe.module.walk())


def test_errors_name_the_problem():
    stages = [pp.PipelineStage(part, i, 2)
              for i, part in enumerate(pp.split_sequential(_model(), [4]))]
    schedule = pp.ScheduleGPipe(stages, n_microbatches=4, loss_fn=torch.nn.MSELoss())
    with pytest.raises(pp.PipelineError, match="the input of batch size 6 cannot be split into 4 "
                                               "equal microbatches"):
        schedule.step(torch.randn(6, 8), target=torch.randn(6, 8))
    with pytest.raises(pp.PipelineError, match="step needs target="):
        schedule.step(torch.randn(8, 8))
    with pytest.raises(pp.PipelineError, match=r"split point 9: expected the index \(1..7\)"):
        pp.split_sequential(_model(), [2, 9])
    with pytest.raises(pp.PipelineError, match="must be increasing"):
        pp.split_sequential(_model(), [4, 2])
    with pytest.raises(pp.PipelineError, match=r"stages share devices: \[\[0\], \[0\]\]"):
        pp.Schedule1F1B([pp.PipelineStage(stages[0].module, 0, 2, devices=(0,)),
                         pp.PipelineStage(stages[1].module, 1, 2, devices=(0,))],
                        n_microbatches=2, loss_fn=torch.nn.MSELoss())
    with pytest.raises(pp.PipelineError, match=r"stage 1: devices must be device ids"):
        pp.PipelineStage(stages[1].module, 1, 2, devices=())
    with pytest.raises(pp.PipelineError, match="num_microbatches must be a positive integer"):
        pp.ScheduleGPipe(stages, n_microbatches=0, loss_fn=torch.nn.MSELoss())
