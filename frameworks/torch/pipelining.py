"""Pipeline parallelism for PyTorch on OpenHLO devices, in the spirit of
``torch.distributed.pipelining``; one process drives every device.

    from frameworks.torch import pipelining as pp
    parts = pp.split_sequential(model, [2, 4, 6])          # 4 stages, cut before layers 2, 4, 6
    stages = [pp.PipelineStage(part, i, 4) for i, part in enumerate(parts)]
    schedule = pp.Schedule1F1B(stages, n_microbatches=8, loss_fn=torch.nn.MSELoss())
    losses = []
    output = schedule.step(x, target=y, losses=losses)     # grads land in the parameters' .grad

Each stage's module (with the loss, for the last stage) is compiled with
``torch.compile(backend="openhlo")``, forward and backward, and every call of it runs inside
``placement.on_devices`` of its device group (default: device ``stage_index``; give
``devices=`` for a group), so its programs are compiled for and run on those virtual devices.
Inside a stage, ``sharding.mark_sharding`` with a mesh as large as the stage's group (logical
devices 0..k-1 = the group's devices in order) makes the stage's programs SPMD programs over
its group. The schedule (pjrt/pipelining: ``gpipe``, ``1f1b``) is run by pjrt's executor;
activations and gradients cross stages as (CPU) torch tensors, which the next stage's
compiled programs take as their inputs on its devices.

As in torch: ``step`` splits the batch (dim 0 of every input and of the target) into
``n_microbatches`` equal chunks, returns the last stage's output for the whole batch, appends
each microbatch's loss to ``losses``, and accumulates the parameters' gradients in ``.grad``;
with ``scale_grads=True`` (the default) the gradients are those of the mean of the
microbatch losses, which for a mean-reduced loss is the whole batch's loss.
"""
from __future__ import annotations

import collections
from collections.abc import Sequence

import torch

from pjrt.pipelining import PipelineError, make_schedule, run_schedule, simulate

from frameworks.torch import placement

__all__ = ["PipelineError", "PipelineStage", "Schedule1F1B", "ScheduleGPipe",
           "split_sequential"]


def split_sequential(model: torch.nn.Sequential, split_points: Sequence) -> list:
    """``model``'s children cut into ``len(split_points) + 1`` consecutive ``nn.Sequential``
    stages, a new stage starting at each split point (a child's index or name)."""
    if not isinstance(model, torch.nn.Sequential):
        raise PipelineError(f"split_sequential takes a torch.nn.Sequential, got "
                            f"{type(model).__name__}")
    names = [name for name, _ in model.named_children()]
    cuts = []
    for point in split_points:
        index = names.index(point) if isinstance(point, str) and point in names else point
        if isinstance(index, bool) or not isinstance(index, int) or not 0 < index < len(names):
            raise PipelineError(f"split point {point!r}: expected the index (1..{len(names) - 1})"
                                f" or name of one of the model's children {names}")
        cuts.append(index)
    if cuts != sorted(set(cuts)):
        raise PipelineError(f"split points {list(split_points)} must be increasing and distinct")
    bounds = [0, *cuts, len(names)]
    children = list(model.named_children())
    return [torch.nn.Sequential(collections.OrderedDict(children[a:b]))
            for a, b in zip(bounds, bounds[1:])]


class PipelineStage:
    """``module`` as stage ``stage_index`` of ``num_stages``, on ``devices`` (device ids of the
    pipeline's cpu client; default ``(stage_index,)``)."""

    def __init__(self, module: torch.nn.Module, stage_index: int, num_stages: int,
                 devices: Sequence[int] | None = None):
        if not 0 <= stage_index < num_stages:
            raise PipelineError(f"stage_index {stage_index} is not in 0..{num_stages - 1}")
        self.module = module
        self.stage_index = stage_index
        self.num_stages = num_stages
        self.devices = tuple(devices) if devices is not None else (stage_index,)
        if not self.devices or any(isinstance(d, bool) or not isinstance(d, int) or d < 0
                                   for d in self.devices):
            raise PipelineError(f"stage {stage_index}: devices must be device ids (integers "
                                f">= 0), got {devices!r}")
        self.is_last = stage_index == num_stages - 1
        self._compiled = None
        self._total = 0  # the pipeline's device count: set by the schedule
        self._saved: dict = {}  # microbatch -> (input, output or loss)
        self._loss_fn = None
        self._targets: list = []
        self._grad_scale = 1.0
        self.losses: list = []

    def _prepare(self, total: int, loss_fn, targets: list, grad_scale: float) -> None:
        if self._compiled is None or (self.is_last and loss_fn is not self._loss_fn):
            module = _WithLoss(self.module, loss_fn) if self.is_last else self.module
            self._compiled = torch.compile(module, backend="openhlo")
        self._total, self._loss_fn = total, loss_fn
        self._targets, self._grad_scale = targets, grad_scale
        self.losses = [None] * len(targets)

    # -- pjrt.pipelining.PipelineStage --------------------------------------------------
    def receive(self, value: torch.Tensor) -> torch.Tensor:
        # host tensors: the next compiled call takes it onto this stage's devices
        return value.detach()

    def forward(self, microbatch: int, x: torch.Tensor):
        x = x.requires_grad_(self.stage_index > 0)
        with placement.on_devices(self.devices, self._total):
            if self.is_last:
                y, loss = self._compiled(x, self._targets[microbatch])
                self.losses[microbatch] = loss.detach()
                self._saved[microbatch] = (x, loss)
                return y.detach()
            y = self._compiled(x)
        self._saved[microbatch] = (x, y)
        return y

    def backward(self, microbatch: int, grad) -> tuple:
        x, y = self._saved.pop(microbatch)
        seed = torch.full_like(y, self._grad_scale) if self.is_last else grad
        with placement.on_devices(self.devices, self._total):
            torch.autograd.backward(y, seed)
        # no parameter gradients to hand back: autograd accumulates them in .grad
        return (x.grad if self.stage_index > 0 else None), None


class _WithLoss(torch.nn.Module):
    """The last stage with the loss: one compiled graph for both."""

    def __init__(self, module: torch.nn.Module, loss_fn):
        super().__init__()
        self.module, self.loss_fn = module, loss_fn

    def forward(self, x, target):
        y = self.module(x)
        return y, self.loss_fn(y, target)


def _chunks(t: torch.Tensor, n: int, what: str) -> list:
    if not isinstance(t, torch.Tensor) or t.dim() == 0:
        got = "a scalar tensor" if isinstance(t, torch.Tensor) else type(t).__name__
        raise PipelineError(f"{what} must be a tensor with a batch dimension, got {got}")
    if t.shape[0] % n:
        raise PipelineError(f"{what} of batch size {t.shape[0]} cannot be split into {n} equal "
                            f"microbatches ({n} does not divide {t.shape[0]})")
    return list(t.chunk(n))


class _PipelineSchedule:
    schedule_name = ""

    def __init__(self, stages: Sequence[PipelineStage], n_microbatches: int, loss_fn,
                 scale_grads: bool = True):
        stages = list(stages)
        if loss_fn is None:
            raise PipelineError("a pipeline schedule needs loss_fn (training steps only)")
        for i, stage in enumerate(stages):
            if not isinstance(stage, PipelineStage) or stage.stage_index != i \
                    or stage.num_stages != len(stages):
                raise PipelineError(f"stage {i}: expected PipelineStage(module, {i}, "
                                    f"{len(stages)}), got {stage!r}")
        used = [d for stage in stages for d in stage.devices]
        if len(set(used)) != len(used):
            raise PipelineError(f"stages share devices: {[list(s.devices) for s in stages]}")
        self.schedule = make_schedule(self.schedule_name, len(stages), n_microbatches)
        self.stages = stages
        self.n_microbatches = n_microbatches
        self.loss_fn = loss_fn
        self.scale_grads = scale_grads
        self.num_devices = max(used) + 1

    @property
    def bubble_fraction(self) -> float:
        """The idle share of the schedule's timeline with equal forward and backward times."""
        return simulate(self.schedule).bubble_fraction

    def step(self, *args, target=None, losses: list | None = None) -> torch.Tensor:
        """One training step over the batch ``args[0]``; returns the last stage's output."""
        if len(args) != 1:
            raise PipelineError(f"step takes the first stage's input, got {len(args)} inputs")
        if target is None:
            raise PipelineError("step needs target= for the loss")
        m = self.n_microbatches
        inputs = _chunks(args[0], m, "the input")
        targets = _chunks(target, m, "the target")
        scale = 1.0 / m if self.scale_grads else 1.0
        for stage in self.stages:
            stage._prepare(self.num_devices, self.loss_fn, targets, scale)
        run = run_schedule(self.schedule, self.stages, inputs)
        if losses is not None:
            losses.extend(self.stages[-1].losses)
        return torch.cat(run.outputs)


class ScheduleGPipe(_PipelineSchedule):
    """Every microbatch's forward through all stages, then every backward."""
    schedule_name = "gpipe"


class Schedule1F1B(_PipelineSchedule):
    """One forward, one backward in steady state: a stage holds at most ``p - s``
    microbatches' activations."""
    schedule_name = "1f1b"
