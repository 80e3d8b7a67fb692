"""Pipeline schedules as data: for each stage, the ordered list of its actions.

A stage's actions are ``F(mb)`` (forward of microbatch ``mb``), ``B(mb)`` (its backward) and
the transfers around them: ``RECV_F(mb)`` before a forward that takes the previous stage's
activation, ``SEND_F(mb)`` after a forward whose activation the next stage takes, and
``RECV_B(mb)`` / ``SEND_B(mb)`` likewise for gradients, which flow from the last stage to the
first. Schedules are made by name from ``SCHEDULES`` (``gpipe``, ``1f1b``) or built by hand
with ``Schedule.from_compute`` (the transfers are inserted) and checked by ``validate``: every
microbatch has one forward and one backward per stage, its forward first, every transfer
where the stages need it, and the stages together do not deadlock (timeline.py simulates
them). Invariant: a ``Schedule`` returned by ``make_schedule`` has passed ``validate``.
"""
from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from stablehlo.errors import OpenHLOError
from stablehlo.registry import Registry


class PipelineError(OpenHLOError):
    """A schedule, stage layout or batch that a pipeline cannot run; the message names the
    stage, action or argument."""


class Kind(enum.Enum):
    FORWARD = "F"
    BACKWARD = "B"
    SEND_F = "SEND_F"
    RECV_F = "RECV_F"
    SEND_B = "SEND_B"
    RECV_B = "RECV_B"


COMPUTE = (Kind.FORWARD, Kind.BACKWARD)


@dataclass(frozen=True)
class Action:
    kind: Kind
    microbatch: int

    def __str__(self) -> str:  # F3, SEND_B0: torch.distributed.pipelining's spelling
        return f"{self.kind.value}{self.microbatch}"


def F(mb: int) -> Action:
    return Action(Kind.FORWARD, mb)


def B(mb: int) -> Action:
    return Action(Kind.BACKWARD, mb)


@dataclass(frozen=True)
class Schedule:
    """``actions[stage]`` is that stage's ordered action list."""
    name: str
    num_stages: int
    num_microbatches: int
    actions: tuple

    @classmethod
    def from_compute(cls, name: str, num_microbatches: int,
                     compute: Sequence[Sequence[Action]]) -> "Schedule":
        """A schedule from each stage's order of F and B actions, with the transfers each
        needs inserted around them (a forward receives its input just before it runs and
        sends its output right after; the same for backwards)."""
        last = len(compute) - 1
        actions = []
        for stage, order in enumerate(compute):
            listed = []
            for action in order:
                mb = action.microbatch
                if action.kind is Kind.FORWARD:
                    listed += [Action(Kind.RECV_F, mb)] if stage > 0 else []
                    listed += [action] + ([Action(Kind.SEND_F, mb)] if stage < last else [])
                elif action.kind is Kind.BACKWARD:
                    listed += [Action(Kind.RECV_B, mb)] if stage < last else []
                    listed += [action] + ([Action(Kind.SEND_B, mb)] if stage > 0 else [])
                else:
                    raise PipelineError(f"stage {stage}: from_compute takes F and B actions "
                                        f"only, got {action}")
            actions.append(tuple(listed))
        return cls(name, len(compute), num_microbatches, tuple(actions))

    def compute(self, stage: int) -> list:
        """``stage``'s F and B actions in order (its transfers left out)."""
        return [a for a in self.actions[stage] if a.kind in COMPUTE]

    def peak_in_flight(self) -> tuple:
        """Per stage, the most microbatches whose forward has run and backward not yet: the
        activations the stage holds at its peak."""
        peaks = []
        for stage in range(self.num_stages):
            live = peak = 0
            for action in self.compute(stage):
                live += 1 if action.kind is Kind.FORWARD else -1
                peak = max(peak, live)
            peaks.append(peak)
        return tuple(peaks)

    def __str__(self) -> str:
        return "\n".join(f"stage {s}: " + " ".join(map(str, acts))
                         for s, acts in enumerate(self.actions))


SCHEDULES: Registry = Registry("pipeline schedule")


@SCHEDULES.register("gpipe")
def gpipe(num_stages: int, num_microbatches: int) -> Schedule:
    """Every forward, then every backward (GPipe): each stage holds all microbatches'
    activations at once."""
    m = num_microbatches
    return Schedule.from_compute("gpipe", m, [[F(i) for i in range(m)] + [B(i) for i in range(m)]
                                              for _ in range(num_stages)])


@SCHEDULES.register("1f1b")
def one_f_one_b(num_stages: int, num_microbatches: int) -> Schedule:
    """1F1B (PipeDream-Flush): stage s runs ``p - s`` warm-up forwards (at most m), then
    alternates one backward and one forward, then drains the remaining backwards; a stage
    never holds more than ``p - s`` microbatches' activations."""
    m, p = num_microbatches, num_stages
    compute = []
    for stage in range(p):
        warmup = min(p - stage, m)
        order = [F(i) for i in range(warmup)]
        for i in range(m - warmup):
            order += [B(i), F(warmup + i)]
        order += [B(i) for i in range(m - warmup, m)]
        compute.append(order)
    return Schedule.from_compute("1f1b", m, compute)


def make_schedule(name: str, num_stages: int, num_microbatches: int) -> Schedule:
    """The registered schedule ``name`` for ``num_stages`` stages and ``num_microbatches``
    microbatches, validated."""
    for what, value in (("num_stages", num_stages), ("num_microbatches", num_microbatches)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise PipelineError(f"{what} must be a positive integer, got {value!r}")
    if name not in SCHEDULES:
        raise PipelineError(f"unknown pipeline schedule {name!r}; known: "
                            f"{', '.join(SCHEDULES.names())}")
    schedule = SCHEDULES.get(name)(num_stages, num_microbatches)
    validate(schedule)
    return schedule


def validate(schedule: Schedule) -> None:
    """Raise PipelineError unless every stage runs each microbatch's forward once, then its
    backward once, with the transfers its neighbours expect, and the stages can run it to the
    end without waiting on each other forever."""
    p, m = schedule.num_stages, schedule.num_microbatches
    if p < 1 or m < 1:
        raise PipelineError(f"schedule {schedule.name!r}: {p} stage(s) and {m} microbatch(es); "
                            f"both must be at least 1")
    if len(schedule.actions) != p:
        raise PipelineError(f"schedule {schedule.name!r} is for {p} stage(s) but lists actions "
                            f"for {len(schedule.actions)}")
    for stage in range(p):
        _check_stage(schedule, stage)
    from pjrt.pipelining.timeline import simulate
    simulate(schedule)  # raises on a deadlock, naming where each stage waits


def _expected(stage: int, last: int, mb: int) -> list:
    """The actions ``stage`` must run for microbatch ``mb``, in the order they must come."""
    before_f = [Action(Kind.RECV_F, mb)] if stage > 0 else []
    after_f = [Action(Kind.SEND_F, mb)] if stage < last else []
    before_b = [Action(Kind.RECV_B, mb)] if stage < last else []
    after_b = [Action(Kind.SEND_B, mb)] if stage > 0 else []
    return before_f + [F(mb)] + after_f + before_b + [B(mb)] + after_b


def _check_stage(schedule: Schedule, stage: int) -> None:
    where = f"schedule {schedule.name!r}, stage {stage}"
    m, last = schedule.num_microbatches, schedule.num_stages - 1
    per_mb: dict = {}
    for action in schedule.actions[stage]:
        if not isinstance(action, Action):
            raise PipelineError(f"{where}: {action!r} is not an Action")
        if not 0 <= action.microbatch < m:
            raise PipelineError(f"{where}: {action} names microbatch {action.microbatch}, but "
                                f"there are {m} (0..{m - 1})")
        per_mb.setdefault(action.microbatch, []).append(action)
    for mb in range(m):
        got, expected = per_mb.get(mb, []), _expected(stage, last, mb)
        if got != expected:
            raise PipelineError(f"{where}: microbatch {mb} has actions "
                                f"[{' '.join(map(str, got))}], expected "
                                f"[{' '.join(map(str, expected))}] in this order (forward "
                                f"before backward, each once, with its transfers)")
