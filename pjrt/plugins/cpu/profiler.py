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
