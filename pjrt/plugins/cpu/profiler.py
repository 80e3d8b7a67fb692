"""Per-instruction wall time of cpu executions, for finding where a program spends its time.

```python
from pjrt.plugins.cpu.profiler import profile
with profile() as prof:
    exe(*args)
print(prof.report())          # slowest instructions first, with their source places
```

The executor times every instruction it runs while a profile is open (nested ``while``/``if``
bodies too, so a loop's time appears both on the loop and on its body's instructions).
Profiling is process-wide: executions on other threads during the block are included.

``timeline()`` keeps every instruction's interval, on its device and thread, instead of totals;
``timeline_events(exe, intervals)`` turns them into the events of a Chrome trace
(xla_core/cost/profile.py; ``openhlo run --trace``)::

    with timeline() as intervals:
        exe.execute_global(*args)
    trace = chrome_trace(timeline_events(exe, intervals), device_names(exe))

Under ``OPENHLO_TRACE`` (stablehlo/instrument/trace.py) the block is a ``profile`` span and each
instruction an event inside it, with its calls and total time: the executor keeps totals,
not start times, so the instructions are laid end to end, slowest first, from the block's
start (``args.aggregated`` says so).
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

from stablehlo.instrument import trace
from xla_core.cost.profile import OpEvent, op_event_args, op_keys, profile_keys

from pjrt.plugins.cpu.native_module import native


@dataclass
class Profile:
    # (where, calls, seconds), slowest first; filled when the block ends.
    rows: list = field(default_factory=list)

    def total_seconds(self) -> float:
        return sum(seconds for _, _, seconds in self.rows)

    def report(self, top: int = 20) -> str:
        lines = [f"{'ms':>9} {'calls':>7} {'%':>5}  instruction"]
        total = self.total_seconds() or 1.0
        for where, calls, seconds in self.rows[:top]:
            lines.append(f"{seconds * 1e3:9.3f} {calls:7d} {100 * seconds / total:5.1f}  {where}")
        if len(self.rows) > top:
            rest = sum(s for _, _, s in self.rows[top:])
            lines.append(f"{rest * 1e3:9.3f} {'':7} {100 * rest / total:5.1f}  "
                         f"({len(self.rows) - top} more)")
        return "\n".join(lines)


@contextlib.contextmanager
def profile():
    lib = native()
    lib.profile_reset()
    lib.set_profiling(True)
    result = Profile()
    start_ns = time.perf_counter_ns()
    try:
        yield result
    finally:
        lib.set_profiling(False)
        rows = [(where, calls, ns * 1e-9) for where, calls, ns in lib.profile_snapshot()]
        result.rows = sorted(rows, key=lambda r: -r[2])
        lib.profile_reset()
        _trace_rows(result.rows, start_ns, time.perf_counter_ns() - start_ns)


def _trace_rows(rows: list, start_ns: int, dur_ns: int) -> None:
    if trace.recorder() is None:
        return
    trace.event("profile", "profile", start_ns, dur_ns, instructions=len(rows))
    at = start_ns
    for where, calls, seconds in rows:
        ns = int(seconds * 1e9)
        trace.event(where, "instruction", at, ns, calls=calls, aggregated=True)
        at += ns


@dataclass(frozen=True)
class Interval:
    """One run of one instruction, as the executor recorded it (profiler.h ProfileEvent)."""
    where: str
    instr: int      # the instruction's identity within one executable
    instance: int   # replica-major index of the running instance
    thread: int
    role: str       # "executor", "communication"
    start_ns: int
    end_ns: int


@contextlib.contextmanager
def timeline():
    """Every instruction's interval while the block runs, in the list it yields (filled when
    the block ends). Process-wide, like ``profile``."""
    lib = native()
    lib.profile_reset()
    lib.set_profiling(True, timeline=True)
    intervals: list[Interval] = []
    try:
        yield intervals
    finally:
        lib.set_profiling(False)
        intervals.extend(Interval(*row) for row in lib.profile_timeline())
        lib.profile_reset()


def timeline_events(exe, intervals: list[Interval]) -> list[OpEvent]:
    """The trace events of ``intervals`` recorded while ``exe`` (a CpuExecutable) ran: each
    named by its instruction's key (keys count shared places in the order instructions first
    ran on their device), on the global id of its instance's device, with the op's kind,
    result types and collective bytes from the program the executable runs."""
    devices = [d.id for row in exe.device_assignment for d in row]
    program = exe.program
    ops = op_keys(program.module, program.func.name)
    by_instance: dict[int, list[Interval]] = {}
    for interval in sorted(intervals, key=lambda i: i.start_ns):
        by_instance.setdefault(interval.instance, []).append(interval)
    events = []
    for instance, runs in sorted(by_instance.items()):
        first_runs = list({run.instr: run.where for run in runs}.items())  # first-run order
        key_of = dict(zip((instr for instr, _ in first_runs),
                          profile_keys([where for _, where in first_runs])))
        for run in runs:
            key = key_of[run.instr]
            category, args = op_event_args(ops.get(key), run.where)
            # Another thread's share of an instruction (an async start's collective on the
            # communication thread) is measured under a key of its own.
            name = key if run.role == "executor" else f"{key} [{run.role} thread]"
            events.append(OpEvent(name, category, devices[instance], run.thread, run.role,
                                  run.start_ns, run.end_ns - run.start_ns, args))
    return events


def device_names(exe) -> dict[int, str]:
    """Trace labels of the devices of ``exe`` in this process: ``device 3 (process 1)``."""
    here = exe.client.process_index
    return {d.id: f"device {d.id} (process {d.process_index})"
            for row in exe.device_assignment for d in row if d.process_index == here}
