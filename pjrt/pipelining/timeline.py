"""A schedule played out in time: when each action starts and ends, and the bubble.

Each stage runs its actions in order, one at a time. A forward or backward takes the stage's
forward or backward time (1 unless given); a send takes no stage time and its value arrives
``transfer_time`` later; a receive waits for that arrival. The simulation is the longest
path through the dependency graph, computed by sweeping the stages until none can move on:
a stage that cannot is waiting for a send that no stage can reach, which is a deadlock.

The bubble fraction is the idle share of the stages' time until the last action ends:
``1 - sum(busy) / (p * makespan)``; for GPipe with equal times it is (p-1)/(m+p-1).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pjrt.pipelining.schedules import Action, Kind, PipelineError, Schedule

# which send a receive waits for: (kind of the send, stage offset of the sender)
_SENDER = {Kind.RECV_F: (Kind.SEND_F, -1), Kind.RECV_B: (Kind.SEND_B, +1)}


@dataclass(frozen=True)
class TimedAction:
    stage: int
    action: Action
    start: float
    end: float
    sequence: int  # position in a dependency order (a send before its receive)


@dataclass(frozen=True)
class Timeline:
    schedule: Schedule
    entries: tuple  # TimedAction, in the order the simulation resolved them

    @property
    def makespan(self) -> float:
        return max(e.end for e in self.entries)

    def busy(self, stage: int) -> float:
        return sum(e.end - e.start for e in self.entries if e.stage == stage)

    @property
    def bubble_fraction(self) -> float:
        total = self.schedule.num_stages * self.makespan
        return 1.0 - sum(self.busy(s) for s in range(self.schedule.num_stages)) / total

    def order(self) -> list:
        """Every action in an order that runs them correctly one at a time: by start time,
        ties in dependency order."""
        return sorted(self.entries, key=lambda e: (e.start, e.sequence))


def _per_stage(value, num_stages: int, what: str) -> list:
    if isinstance(value, (int, float)):
        values = [float(value)] * num_stages
    else:
        values = [float(v) for v in value]
        if len(values) != num_stages:
            raise PipelineError(f"{what}: {len(values)} value(s) for {num_stages} stage(s)")
    if any(v < 0 for v in values):
        raise PipelineError(f"{what} must not be negative, got {values}")
    return values


def simulate(schedule: Schedule, forward_time: float | Sequence[float] = 1.0,
             backward_time: float | Sequence[float] = 1.0,
             transfer_time: float = 0.0) -> Timeline:
    """The timeline of ``schedule``; times are per action (one number, or one per stage)."""
    p = schedule.num_stages
    durations = {Kind.FORWARD: _per_stage(forward_time, p, "forward_time"),
                 Kind.BACKWARD: _per_stage(backward_time, p, "backward_time")}
    sent: dict = {}  # (send kind, sender stage, microbatch) -> arrival time
    clock = [0.0] * p
    position = [0] * p
    entries: list = []
    moved = True
    while moved:
        moved = False
        for stage in range(p):
            while position[stage] < len(schedule.actions[stage]):
                action = schedule.actions[stage][position[stage]]
                start = clock[stage]
                if action.kind in _SENDER:
                    send_kind, offset = _SENDER[action.kind]
                    arrival = sent.get((send_kind, stage + offset, action.microbatch))
                    if arrival is None:
                        break  # waits for the neighbour
                    start = max(start, arrival)
                end = start + durations[action.kind][stage] if action.kind in durations \
                    else start
                if action.kind in (Kind.SEND_F, Kind.SEND_B):
                    sent[(action.kind, stage, action.microbatch)] = end + transfer_time
                entries.append(TimedAction(stage, action, start, end, len(entries)))
                clock[stage] = end
                position[stage] += 1
                moved = True
    stuck = [(s, schedule.actions[s][position[s]]) for s in range(p)
             if position[s] < len(schedule.actions[s])]
    if stuck:
        waits = "; ".join(f"stage {s} at {a}" for s, a in stuck)
        raise PipelineError(f"schedule {schedule.name!r} deadlocks: {waits} (each waits for a "
                            f"send its neighbour never reaches)")
    return Timeline(schedule, tuple(entries))
