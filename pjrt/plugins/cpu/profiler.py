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
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

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
    try:
        yield result
    finally:
        lib.set_profiling(False)
        rows = [(where, calls, ns * 1e-9) for where, calls, ns in lib.profile_snapshot()]
        result.rows = sorted(rows, key=lambda r: -r[2])
        lib.profile_reset()
