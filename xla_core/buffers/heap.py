"""Heap simulator: pack buffers with live intervals into one arena.

Global decreasing-size best fit (XLA's ``GlobalDecreasingSizeBestFitHeap``):
buffers are placed one at a time in a fixed order; for each one, the chunks
already taken by buffers whose intervals overlap its own are subtracted from
the address space and the smallest free gap that fits is chosen (else the end
of the heap). Two orders are tried, keep the smaller heap:

* spatial: size descending, then interval length descending, then index;
* temporal: interval length descending, then size descending, then index.

Intervals are inclusive ``[start, end]`` op positions; two buffers may share
bytes only when their intervals are disjoint. Offsets are multiples of
``alignment``. Zero-sized buffers sit at offset 0 and take no space.
"""
from __future__ import annotations

import numpy as np

ALIGNMENT = 64
_FEW = 24  # below this many overlapping buffers, per-call numpy overhead dominates


def pack(intervals: list[tuple[int, int]], sizes: list[int],
         alignment: int = ALIGNMENT) -> tuple[list[int], int]:
    """Offsets for every buffer and the heap size, the better of both orders."""
    n = len(sizes)
    lengths = [end - start for start, end in intervals]
    spatial = sorted(range(n), key=lambda b: (-sizes[b], -lengths[b], b))
    temporal = sorted(range(n), key=lambda b: (-lengths[b], -sizes[b], b))
    best = None
    for order in (spatial, temporal):
        offsets, heap = _best_fit(order, intervals, sizes, alignment)
        if best is None or heap < best[1]:
            best = (offsets, heap)
    return best if best is not None else ([], 0)


def _best_fit(order: list[int], intervals, sizes, alignment: int) -> tuple[list[int], int]:
    n = len(order)
    starts = np.empty(n, np.int64)
    ends = np.empty(n, np.int64)
    lows = np.empty(n, np.int64)
    highs = np.empty(n, np.int64)
    placed = 0
    offsets = [0] * n
    heap = 0
    for b in order:
        size = -(-sizes[b] // alignment) * alignment
        if size == 0:
            continue
        start, end = intervals[b]
        offset = _fit(starts[:placed], ends[:placed], lows[:placed], highs[:placed],
                      start, end, size)
        offsets[b] = offset
        heap = max(heap, offset + size)
        starts[placed], ends[placed] = start, end
        lows[placed], highs[placed] = offset, offset + size
        placed += 1
    return offsets, heap


def _fit(starts, ends, lows, highs, start: int, end: int, size: int) -> int:
    """The start of the smallest free gap of at least ``size`` bytes during [start, end]."""
    live = np.flatnonzero((starts <= end) & (ends >= start))
    if live.size == 0:
        return 0
    if live.size <= _FEW:
        return _fit_few(sorted(zip(lows[live].tolist(), highs[live].tolist())), size)
    by_offset = np.argsort(lows[live], kind="stable")
    low = lows[live][by_offset]
    reach = np.maximum.accumulate(highs[live][by_offset])  # end of the taken prefix
    gap_start = np.concatenate(([0], reach[:-1]))
    gap = low - gap_start
    fits = np.flatnonzero(gap >= size)
    if fits.size == 0:
        return int(reach[-1])
    return int(gap_start[fits[np.argmin(gap[fits])]])


def _fit_few(taken: list[tuple[int, int]], size: int) -> int:
    """``_fit`` over a short sorted list of taken chunks, in plain Python."""
    best, best_gap, reach = None, None, 0
    for low, high in taken:
        gap = low - reach
        if gap >= size and (best_gap is None or gap < best_gap):
            best, best_gap = reach, gap
        reach = max(reach, high)
    return reach if best is None else best
