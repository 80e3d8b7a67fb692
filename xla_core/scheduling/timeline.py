"""The simulated timeline of one block's order: when each op runs, when each collective
communicates, and how much of it the executing thread waits for (is exposed).

The model is the cpu runtime's (pjrt/plugins/cpu/README.md, async collectives): one
executing thread runs the ops in order; one communication thread per device runs started
collectives in the order they were started. An ``openhlo.async_start`` queues its
collective (it begins when both the start is reached and the previous collective is done);
its ``openhlo.async_done`` waits until it ends. A synchronous collective waits until the
communication thread is idle, then blocks the executing thread for its whole time. A
collective's exposed time is the part of its communication during which the executing
thread waits; the rest is hidden behind the ops that ran meanwhile (its ``overlaps``).
``Clock`` is the step-by-step form the scheduler advances; ``simulate`` runs it over an
order.

The two threads are modeled as running in parallel where the host has a core for each
(``LatencyEstimator.overlaps_compute``: ``HardwareDescription.communication_beside_compute``).
Where it has not, a started collective takes the executing thread's time as a synchronous
one does: it runs at its start, whole, and is exposed (no overlaps), so no order hides
any of it and the scheduler keeps the collectives synchronous. When the host's devices
oversubscribe its cores (``HardwareDescription.core_sharing`` > 1) every device's compute
and copies run on the same cores, and a step takes at least ``Clock.busy``, the device's
compute plus communication time (each already stretched by the sharing), whatever overlaps.
The scheduler ranks orders by ``now`` alone (``busy`` is the same for every order).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from stablehlo.ir.core import Operation
from stablehlo.ir.ops.async_collectives import (ASYNC_DONE, ASYNC_START, start_of,
                                                 wrapped_collective)
from xla_core.scheduling.estimator import COLLECTIVES, LatencyEstimator


@dataclass
class CollectiveRun:
    """One collective on the timeline: ``op`` (the start, or the synchronous collective),
    the wrapped ``collective``, and when it communicated."""
    op: Operation
    collective: Operation
    begin: float
    end: float
    exposed: float = 0.0
    overlaps: list = field(default_factory=list)   # ops the executing thread ran meanwhile

    @property
    def seconds(self) -> float:
        return self.end - self.begin


@dataclass
class Clock:
    """The executing thread's time ``now`` and the communication thread's ``comm_free``."""
    estimator: LatencyEstimator
    now: float = 0.0
    comm_free: float = 0.0
    runs: dict = field(default_factory=dict)       # start or sync collective -> CollectiveRun
    waits: list = field(default_factory=list)      # (from, to) the executing thread waited
    spans: list = field(default_factory=list)      # (op, from, to) of compute ops

    @property
    def busy(self) -> float:
        """Seconds the device's threads compute or communicate, overlapped or not."""
        return sum(b - a for _, a, b in self.spans) + \
            sum(run.seconds for run in self.runs.values())

    def end_of(self, start: Operation) -> float:
        """When the collective ``start`` queued ends (it must have been started)."""
        return self.runs[start].end

    def step(self, op: Operation) -> None:
        """Advance past ``op``."""
        if op.name == ASYNC_START and not self.estimator.overlaps_compute:
            self._synchronous(op, wrapped_collective(op))
        elif op.name == ASYNC_START:
            self._communicate(op, wrapped_collective(op))
        elif op.name == ASYNC_DONE:
            self._wait_until(self.runs[start_of(op)].end)
        elif op.name in COLLECTIVES:
            self._synchronous(op, op)
        else:
            seconds = self.estimator.op_seconds(op)
            if seconds > 0:
                self.spans.append((op, self.now, self.now + seconds))
            self.now += seconds

    def _synchronous(self, op: Operation, collective: Operation) -> None:
        """``collective`` with the executing thread waiting: once the communication thread
        is idle, for its whole time."""
        self._wait_until(self.comm_free)
        self._wait_until(self._communicate(op, collective).end)

    def _communicate(self, op: Operation, collective: Operation) -> CollectiveRun:
        begin = max(self.now, self.comm_free)
        run = CollectiveRun(op, collective, begin,
                            begin + self.estimator.collective_seconds(collective))
        self.comm_free = run.end
        self.runs[op] = run
        return run

    def _wait_until(self, until: float) -> None:
        if until > self.now:
            self.waits.append((self.now, until))
            self.now = until

    def finish(self) -> list[CollectiveRun]:
        """The collectives in the order they began, with exposed time and overlaps filled."""
        runs = sorted(self.runs.values(), key=lambda r: r.begin)
        for run in runs:
            run.exposed = sum(max(0.0, min(run.end, b) - max(run.begin, a))
                              for a, b in self.waits)
            run.overlaps = [op for op, a, b in self.spans
                            if min(run.end, b) - max(run.begin, a) > 0]
        return runs


def simulate(ops: Sequence[Operation], estimator: LatencyEstimator) -> Clock:
    """The clock after running ``ops`` (one block, in order); ``clock.now`` is the makespan."""
    clock = Clock(estimator)
    for op in ops:
        clock.step(op)
    return clock
