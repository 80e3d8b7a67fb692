"""Runs a schedule's actions on stages, one process driving every device group.

A stage (``PipelineStage``) owns its computation on its own devices: ``forward(mb, x)``
returns its output and keeps what its backward needs; ``backward(mb, grad)`` returns the
gradient of its input and the gradients of its parameters for that microbatch (the last
stage starts from its loss: ``grad`` is None; frameworks whose autograd accumulates into
the parameters return None for them); ``receive(value)`` moves a value onto the stage's
devices. The executor walks the simulated timeline's order (Timeline.order), so every
action finds its inputs: a SEND moves the value to the receiving stage's devices right
away (the runtime copies device to device; executions and copies are asynchronous, so
stages on different devices overlap), the RECV hands it to the stage. Parameter gradients
are summed over microbatches on the stage's devices (``PipelineStage.accumulate``).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pjrt.api import Buffer, Device
from pjrt.pipelining.schedules import Kind, PipelineError, Schedule, validate
from pjrt.pipelining.timeline import simulate


class PipelineStage(Protocol):
    def forward(self, microbatch: int, value: Any) -> Any: ...

    def backward(self, microbatch: int, grad: Any) -> tuple: ...

    def receive(self, value: Any) -> Any: ...

    def accumulate(self, total: Any, grads: Any) -> Any:
        """``total + grads``; needed only by stages whose backward returns parameter
        gradients."""


@dataclass
class PipelineRun:
    """What a run produced: the last stage's output per microbatch, and per stage its
    parameter gradients summed over microbatches (None where the stage returned none)."""
    outputs: list
    grads: list


def run_schedule(schedule: Schedule, stages: Sequence[PipelineStage],
                 microbatches: Sequence) -> PipelineRun:
    """Run ``schedule`` on ``stages`` (one per schedule stage) with the first stage's inputs
    ``microbatches`` (one per microbatch)."""
    p, m = schedule.num_stages, schedule.num_microbatches
    if len(stages) != p:
        raise PipelineError(f"schedule {schedule.name!r} has {p} stage(s), got {len(stages)} "
                            f"stage object(s)")
    if len(microbatches) != m:
        raise PipelineError(f"schedule {schedule.name!r} runs {m} microbatch(es), got "
                            f"{len(microbatches)} input(s)")
    validate(schedule)
    last = p - 1
    in_transit: dict = {}  # (kind, receiving stage, mb) -> value on the receiver's devices
    inbox: dict = {}       # (kind, stage, mb) -> received value, until F/B takes it
    outbox: dict = {}      # (kind, stage, mb) -> value computed, until SEND moves it
    outputs: list = [None] * m
    grads: list = [None] * p
    for entry in simulate(schedule).order():
        stage, kind, mb = entry.stage, entry.action.kind, entry.action.microbatch
        if kind is Kind.FORWARD:
            x = stages[0].receive(microbatches[mb]) if stage == 0 else \
                inbox.pop((Kind.FORWARD, stage, mb))
            y = stages[stage].forward(mb, x)
            if stage == last:
                outputs[mb] = y
            else:
                outbox[(Kind.FORWARD, stage, mb)] = y
        elif kind is Kind.BACKWARD:
            grad = None if stage == last else inbox.pop((Kind.BACKWARD, stage, mb))
            grad_input, param_grads = stages[stage].backward(mb, grad)
            if param_grads is not None:
                grads[stage] = param_grads if grads[stage] is None else \
                    stages[stage].accumulate(grads[stage], param_grads)
            if stage > 0:
                outbox[(Kind.BACKWARD, stage, mb)] = grad_input
        elif kind in (Kind.SEND_F, Kind.SEND_B):
            direction = Kind.FORWARD if kind is Kind.SEND_F else Kind.BACKWARD
            to = stage + 1 if kind is Kind.SEND_F else stage - 1
            value = outbox.pop((direction, stage, mb))
            in_transit[(direction, to, mb)] = stages[to].receive(value)
        else:  # RECV_F / RECV_B
            direction = Kind.FORWARD if kind is Kind.RECV_F else Kind.BACKWARD
            inbox[(direction, stage, mb)] = in_transit.pop((direction, stage, mb))
    return PipelineRun(outputs, grads)


def copy_to_devices(value, devices: Sequence[Device]):
    """``value`` (a Buffer, or one Buffer per device of a group: the pieces of a sharded
    value) on ``devices``, piece i on device i: the runtime's device-to-device copy, which
    returns at once. Backends' ``receive`` for pjrt-level stages."""
    if isinstance(value, Buffer):
        return value if value.device == devices[0] else value.copy_to_device(devices[0])
    pieces = list(value)
    if len(pieces) != len(devices):
        raise PipelineError(f"a value in {len(pieces)} piece(s) cannot move to a stage of "
                            f"{len(devices)} device(s) ({', '.join(map(str, devices))})")
    return [b if b.device == d else b.copy_to_device(d) for b, d in zip(pieces, devices)]
