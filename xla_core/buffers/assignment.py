"""Buffer assignment: where every value of a function body lives, and the peak.

``assign_buffers(func, schedule=None)`` walks the body in ``schedule`` (a list
of the body's ops; default: program order) and:

1. computes live ranges (``liveness.BlockGraph``);
2. shares storage in place: a result takes the buffer of an operand when
   ``inplace_pairs(op)`` allows the pair and the operand dies at this op and
   is not a block result; a function parameter only when it is donated
   (``tf.aliasing_output`` / ``jax.buffer_donor`` argument attribute) and dies
   here, the result then living in the caller's argument storage. Chains of
   in-place ops make one buffer whose interval spans them all;
3. packs every other buffer (temporaries, results, and per-op scratch for
   nested computations) into one heap with ``heap.pack``.

``peak_bytes`` = ``argument_bytes`` + ``heap_bytes``: the caller's arguments
are live throughout, everything the body defines is in the heap.
``intermediate_bytes`` is what the temporaries (values defined by ops that
are not results, plus scratch) would need with no reuse at all.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from stablehlo.ir.core import Func, Operation, Value
from xla_core.buffers.heap import pack
from xla_core.buffers.inplace import inplace_pairs
from xla_core.buffers.liveness import BlockGraph, BuffersError, NestedPeaks, module_of, value_bytes

_DONATION_ATTRS = ("tf.aliasing_output", "jax.buffer_donor")


@dataclass(frozen=True)
class Slot:
    """Where one value lives: ``offset`` into the heap (or into argument
    ``parameter``'s storage when it took a donated parameter's buffer), its
    ``size`` and live ``interval`` (schedule positions, inclusive)."""
    offset: int
    size: int
    interval: tuple[int, int]
    buffer: int
    parameter: int | None = None


@dataclass
class BufferAssignment:
    function: str
    schedule: list
    peak_bytes: int
    heap_bytes: int
    heap_lower_bound: int
    intermediate_bytes: int
    argument_bytes: int
    output_bytes: int
    slots: dict = field(default_factory=dict)        # Value -> Slot
    inplace: list = field(default_factory=list)      # (result Value, operand Value)
    scratch: dict = field(default_factory=dict)      # schedule position -> Slot

    def report(self, limit: int = 40) -> str:
        from xla_core.buffers.report import memory_report
        return memory_report(self, limit)


class _Buffers:
    """In-place groups: members, joint interval and size, parameter backing."""

    def __init__(self):
        self.members: list[list[Value]] = []
        self.intervals: list[list[int]] = []
        self.sizes: list[int] = []
        self.parameter: list[int | None] = []
        self.of: dict[Value, int] = {}

    def new(self, value: Value, size: int, interval, parameter=None) -> int:
        b = len(self.members)
        self.members.append([value])
        self.intervals.append(list(interval))
        self.sizes.append(size)
        self.parameter.append(parameter)
        self.of[value] = b
        return b

    def join(self, b: int, value: Value, interval) -> None:
        self.members[b].append(value)
        self.intervals[b][1] = max(self.intervals[b][1], interval[1])
        self.of[value] = b


def assign_buffers(func, schedule=None) -> BufferAssignment:
    """Assign every value of ``func``'s body (a ``Func`` or ``func.func`` op) to storage."""
    func = func if isinstance(func, Func) else Func(func)
    body = func.body
    if body is None:
        raise BuffersError(f"{func.op.where()}: @{func.name} has no body to assign")
    graph = BlockGraph(body, NestedPeaks(module_of(func.op)))
    order = _order(graph, schedule, func)
    ranges = graph.live_ranges(order)
    params = _parameters(func, graph, order)
    buffers = _Buffers()
    inplace: list[tuple[Value, Value]] = []
    for k, i in enumerate(order):
        op = graph.ops[i]
        taken = _inplace_choices(op, k, graph, ranges, params, buffers)
        for r, result in enumerate(op.results):
            v = graph.vid[result]
            if r in taken:
                b, o = taken[r]
                buffers.join(b, result, ranges[v])
                inplace.append((result, op.operands[o]))
            else:
                buffers.new(result, graph.sizes[v], ranges[v])
    return _pack(func, graph, order, ranges, buffers, inplace, params)


def _order(graph: BlockGraph, schedule, func: Func) -> list[int]:
    if schedule is None:
        return list(range(len(graph.ops)))
    index = {id(op): i for i, op in enumerate(graph.ops)}
    try:
        order = [index[id(op)] for op in schedule]
    except KeyError:
        raise BuffersError(f"{func.op.where()}: schedule names an op outside "
                           f"@{func.name}'s body") from None
    graph.check_order(order)
    return order


def _parameters(func: Func, graph: BlockGraph, order: list[int]) -> dict:
    """Parameter -> (index, size, donated, last use position; None when it is a result)."""
    params = {a: i for i, a in enumerate(graph.block.arguments)}
    last: dict[Value, int | None] = {}
    returned = set()
    for k, i in enumerate(order):
        op = graph.ops[i]
        for inner in (op.walk() if op.regions else (op,)):
            for v in inner.operands:
                if v in params:
                    last[v] = k
                    if i == graph.terminator:
                        returned.add(v)
    info = {}
    for a, i in params.items():
        attrs = func.arg_attrs(i)
        donated = any(attrs.get(name) is not None for name in _DONATION_ATTRS)
        info[a] = (i, value_bytes(a, func.op), donated,
                   None if a in returned else last.get(a))
    return info


def _inplace_choices(op: Operation, k: int, graph: BlockGraph, ranges, params,
                     buffers: _Buffers) -> dict:
    """result index -> (buffer it joins, index of the operand that buffer held)."""
    choices: dict = {}
    if not op.results:
        return choices
    used: set[int] = set()
    for r, o in inplace_pairs(op):
        if r in choices:
            continue
        operand = op.operands[o]
        if operand in graph.vid:
            v = graph.vid[operand]
            if ranges[v][1] != k or graph.is_output(v):
                continue
            b = buffers.of[operand]
        elif operand in params:
            index, size, donated, last = params[operand]
            if not donated or last != k:
                continue
            b = buffers.of.get(operand)
            if b is None:
                b = buffers.new(operand, size, (0, k), parameter=index)
        else:
            continue  # captured from an enclosing block: not ours
        if b in used or buffers.intervals[b][1] > k:
            continue
        used.add(b)
        choices[r] = (b, o)
    return choices


def _pack(func: Func, graph: BlockGraph, order, ranges, buffers: _Buffers, inplace, params):
    heap_ids = [b for b in range(len(buffers.sizes)) if buffers.parameter[b] is None]
    intervals = [tuple(buffers.intervals[b]) for b in heap_ids]
    sizes = [buffers.sizes[b] for b in heap_ids]
    scratch_at = [k for k, i in enumerate(order) if graph.scratch[i] > 0]
    intervals += [(k, k) for k in scratch_at]
    sizes += [graph.scratch[order[k]] for k in scratch_at]
    offsets, heap = pack(intervals, sizes)
    offset_of = dict(zip(heap_ids, offsets))
    slots = {}
    for b, members in enumerate(buffers.members):
        for value in members:
            if value in params:
                continue
            v = graph.vid[value]
            slots[value] = Slot(offset_of.get(b, 0), graph.sizes[v], ranges[v],
                                b, buffers.parameter[b])
    scratch = {k: Slot(off, size, (k, k), -1)
               for k, off, size in zip(scratch_at, offsets[len(heap_ids):], sizes[len(heap_ids):])}
    outputs = {v for v in range(len(graph.values)) if graph.is_output(v)}
    argument_bytes = sum(size for _, size, _, _ in params.values())
    return BufferAssignment(
        function=func.name, schedule=[graph.ops[i] for i in order],
        peak_bytes=argument_bytes + heap, heap_bytes=heap,
        heap_lower_bound=_most_live(intervals, sizes),
        intermediate_bytes=sum(s for v, s in enumerate(graph.sizes) if v not in outputs)
        + sum(graph.scratch),
        argument_bytes=argument_bytes, output_bytes=sum(graph.sizes[v] for v in outputs),
        slots=slots, inplace=inplace, scratch=scratch)


def _most_live(intervals, sizes) -> int:
    """Most bytes live at once: the heap size with no fragmentation."""
    events = sorted([(s, 0, size) for (s, _), size in zip(intervals, sizes)] +
                    [(e, 1, -size) for (_, e), size in zip(intervals, sizes)])
    current = peak = 0
    for _, _, delta in events:
        current += delta
        peak = max(peak, current)
    return peak
