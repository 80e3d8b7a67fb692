"""The human memory report of a ``BufferAssignment`` (like XLA's memory-usage report).

A summary (peak = arguments + heap; the heap against its no-fragmentation
lower bound; results; intermediates without reuse; in-place reuses), then the
heap's buffers, largest first, each with its offset, size, live interval in
schedule positions and the values it holds (``#k`` = schedule position k).
"""
from __future__ import annotations

from collections import defaultdict


def _human(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def memory_report(assignment, limit: int = 40) -> str:
    """Summary plus the ``limit`` largest heap buffers of ``assignment``."""
    a = assignment
    position = {id(op): k for k, op in enumerate(a.schedule)}
    lines = [
        (f"Memory usage of @{a.function} ({len(a.schedule)} ops scheduled, "
         f"{len(a.inplace)} results in place)"),
        (f"  peak:           {_human(a.peak_bytes)} = arguments {_human(a.argument_bytes)}"
         f" + heap {_human(a.heap_bytes)}"),
        (f"  heap:           {_human(a.heap_bytes)} (most bytes live at once: "
         f"{_human(a.heap_lower_bound)})"),
        f"  outputs:        {_human(a.output_bytes)} (in the heap)",
        f"  intermediates:  {_human(a.intermediate_bytes)} without reuse",
    ]
    groups: dict[int, list] = defaultdict(list)
    for value, slot in a.slots.items():
        if slot.parameter is None:
            groups[slot.buffer].append((value, slot))
    rows = []
    for members in groups.values():
        start = min(s.interval[0] for _, s in members)
        end = max(s.interval[1] for _, s in members)
        names = ", ".join(_label(v, position) for v, _ in members)
        rows.append((members[0][1].size, members[0][1].offset, start, end, names))
    rows += [(s.size, s.offset, k, k, f"#{k} scratch of nested computations")
             for k, s in a.scratch.items()]
    rows.sort(key=lambda r: (-r[0], r[1]))
    lines.append(f"Heap buffers, largest first ({len(rows)}):")
    lines.append(f"  {'offset':>12}  {'size':>11}  {'live':>13}  values")
    for size, offset, start, end, names in rows[:limit]:
        lines.append(f"  {offset:>12}  {_human(size):>11}  {f'[{start}, {end}]':>13}  {names}")
    if len(rows) > limit:
        lines.append(f"  ... {len(rows) - limit} smaller buffers")
    return "\n".join(lines)


def _label(value, position: dict) -> str:
    op = value.owner
    k = position.get(id(op), "?")
    index = f":{value.index}" if len(op.results) > 1 else ""
    return f"#{k}{index} {op.name} {value.type}"
