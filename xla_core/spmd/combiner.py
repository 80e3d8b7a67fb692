"""Collective combiners: merge independent collectives of one kind into one variadic op.

Each collective pays a fixed cost (a rendezvous of every device, a launch on accelerators)
besides its bytes, so XLA merges collectives that could run together into one. After
partitioning, a data-parallel training step has one all-reduce per gradient (and one for the
loss), an FSDP step one all-gather per weight and one reduce-scatter per gradient; combined
they are one collective per kind moving the same bytes.

One framework serves three passes, as XLA's combiners share their grouping:

* ``all-reduce-combiner``: key = the reducer (a region applying one binary op, see
  ``region_monoid``) and its element type;
* ``all-gather-combiner``: key = ``all_gather_dim`` and, with
  ``combine-different-dtypes=false``, the element type (XLA's default merges element types:
  a variadic all_gather gives each operand its own);
* ``reduce-scatter-combiner``: key = the reducer, its element type and
  ``scatter_dimension``.

Every kind adds the replica groups (as written: ``[[0,1]]`` and ``[[1,0]]`` differ), whether
a channel is used, ``use_global_device_ids`` and the pipelined marker. Ops of other
dimensions stay apart: XLA can merge them through layout bitcasts (``combine_by_dim=false``),
which here would be transposes that copy, so the dimension is always part of the key.

The pipelined marker is the unit attribute ``openhlo.pipelined`` (``PIPELINED``): a
collective-pipelining pass sets it on the collectives it moved across loop iterations. A
pipelined op never merges with one that is not (openxla/xla#21966: combining them
serialized the pipelined op behind the others and undid the overlap).

Walking each block in program order, a candidate joins the open group of its key unless the
merged op could not run where the group's last member stands, or the group would pass
``threshold-bytes`` (result bytes) or ``max-count`` members; it then starts a new group. An
op larger than the threshold by itself is left alone and leaves its key's group open, as in
XLA. XLA's defaults are kept (30 MiB + 7 bytes, 256 members). With
``combine-while-loops=false`` the blocks of ``stablehlo.while`` regions are skipped (XLA's
option of that name; deeper regions still combine).

With ``overlap-hardware=NAME`` (a hardware description, ``xla_core.cost.hardware``) the
combiner also keeps the overlap the latency-hiding scheduler could give each op, as XLA's GPU
pipeline does by dry-running its scheduler and combining the collectives it leaves
synchronous. Each op has a window: from the op in the block defining its last operand to its
first reader. A merged op can start only when all members can and must be done when the
first is needed, so merging takes from the members the compute between their starts and
between their first readers (the ops' estimated seconds on NAME less the per-kernel step
overhead, which fusion mostly removes; collectives not counted). Kept apart, the candidate
could hide behind that compute, but costs one more collective latency: it joins the group
unless the compute lost exceeds its own estimated time (latency + moved bytes / bandwidth,
the scheduler's estimate) plus that latency; otherwise it starts a new group. An FSDP step's
weight gathers, each needed by another layer's matmuls, so stay apart and each hides behind the
compute before its use; collectives with no compute between them (or too little to hide
anything) merge as before.

A group of two or more becomes one op at the place of its last member; ops that used an
earlier member's result and stood before that place move after it (a stable topological
order of the block, so everything else keeps its order).
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import ClassVar, Iterator, Optional

import numpy as np

from stablehlo.ir.core import Block, Module, Operation
from stablehlo.ir.regions import region_monoid
from stablehlo.ir.types import numpy_dtype

from xla_core.ir_utils import replace_uses
from xla_core.passes.base import Pass, PassContext

ALL_REDUCE = "stablehlo.all_reduce"
ALL_GATHER = "stablehlo.all_gather"
REDUCE_SCATTER = "stablehlo.reduce_scatter"
WHILE = "stablehlo.while"

# Set by collective pipelining on the collectives it moved across iterations; see above.
PIPELINED = "openhlo.pipelined"

# XLA's kDefault{AllReduce,AllGather,ReduceScatter}CombineThreshold and its count cap.
DEFAULT_THRESHOLD_BYTES = 30 * 1024 * 1024 + 7
DEFAULT_MAX_COUNT = 256


@dataclass(frozen=True)
class CollectiveCombinerPass(Pass):
    """The shared part: grouping by key, the dependency check, the thresholds, placing the
    combined op and rewiring users. A kind sets ``op_name`` and ``kind_key``."""
    op_name: ClassVar[str] = ""
    threshold_bytes: int = DEFAULT_THRESHOLD_BYTES
    max_count: int = DEFAULT_MAX_COUNT
    combine_while_loops: bool = True
    overlap_hardware: str = ""

    def kind_key(self, op: Operation) -> Optional[tuple]:
        """What this kind's ops must share besides what every kind's must (``_key``), or None
        for an op that is never combined."""
        raise NotImplementedError

    def run(self, module: Module, ctx: PassContext) -> bool:
        changed = False
        for func in module.functions():
            if func.body is None:
                continue
            for block in list(self._blocks(func.body)):
                changed |= self._combine_block(block, func.op)
        return changed

    def _blocks(self, block: Block) -> Iterator[Block]:
        """``block`` and the blocks nested in it, less a while's own blocks with
        ``combine-while-loops=false`` (blocks nested deeper in those still count)."""
        yield block
        for op in block.operations:
            for region in op.regions:
                for inner in region.blocks:
                    if op.name == WHILE and not self.combine_while_loops:
                        yield from (b for o in inner.operations for b in self._nested(o))
                    else:
                        yield from self._blocks(inner)

    def _nested(self, op: Operation) -> Iterator[Block]:
        for region in op.regions:
            for block in region.blocks:
                yield from self._blocks(block)

    def _key(self, op: Operation) -> Optional[tuple]:
        if op.name != self.op_name or not op.results:
            return None
        kind = self.kind_key(op)
        if kind is None:
            return None
        attrs = op.attributes
        return kind + (_groups_key(attrs.get("replica_groups")), "channel_handle" in attrs,
                       str(attrs.get("use_global_device_ids", "")), PIPELINED in attrs)

    def _combine_block(self, block: Block, root: Operation) -> bool:
        merged = [g for g in self._groups(block) if len(g) > 1]
        if not merged:
            return False
        replacements, placed = {}, {}
        for group in merged:
            combined = _combined(group)
            results = iter(combined.results)
            for member in group:
                for r in member.results:
                    replacements[r] = next(results)
            placed[id(group[-1])] = combined
            for member in group:
                member.parent = None
        dropped = {id(m) for g in merged for m in g}
        ops = []
        for op in block.operations:
            if id(op) in placed:
                ops.append(placed[id(op)])
            elif id(op) not in dropped:
                ops.append(op)
        for op in ops:
            op.parent = block
        block.operations[:] = ops
        replace_uses(root, replacements)  # first: the order below follows the new uses
        block.operations[:] = _stable_topological(ops)
        return True

    def _groups(self, block: Block) -> list:
        """Groups of combinable ops of ``block``, in program order.

        Dependencies are bit masks over op positions. A member's result carries only its own
        bit; what its group reads is kept per group, because once merged, reading any member
        means waiting for every member's inputs. ``_waits_for`` follows those edges, so two
        groups never each wait for the other (a cycle no placement could order)."""
        groups: list = []
        sizes: list = []
        members: list = []  # per group: mask of its members
        reads: list = []  # per group: mask of what its members read
        windows: list = []  # per group: (min, max) of its members' starts and first reads
        open_group: dict = {}  # key -> group index
        depends: dict = {}  # value -> mask of the members it depends on
        overlap = _Overlap(block, self.overlap_hardware) if self.overlap_hardware else None
        for index, op in enumerate(block.operations):
            mask = 0
            for inner in op.walk():
                for v in inner.operands:
                    mask |= depends.get(v, 0)
            key = self._key(op)
            size = sum(_nbytes(r.type) for r in op.results) if key is not None else 0
            if key is None or size > self.threshold_bytes:
                for r in op.results:
                    depends[r] = mask
                continue
            g = open_group.get(key)
            window = overlap.window(index) if overlap else None
            if g is not None and (sizes[g] + size > self.threshold_bytes
                                  or len(groups[g]) >= self.max_count
                                  or _waits_for(mask, members[g], members, reads)
                                  or (overlap and overlap.loses(windows[g], window))):
                g = None
            if g is None:
                g = open_group[key] = len(groups)
                groups.append([])
                sizes.append(0)
                members.append(0)
                reads.append(0)
                windows.append(window)
            elif overlap:
                windows[g] = _merged(windows[g], window)
            groups[g].append(op)
            sizes[g] += size
            members[g] |= 1 << index
            reads[g] |= mask
            for r in op.results:
                depends[r] = 1 << index
        return groups


class _Overlap:
    """The windows of a block's collectives and the compute merging them takes away (see
    the module doc), with the estimates of one hardware description."""

    def __init__(self, block: Block, hardware_name: str):
        from xla_core.cost import hardware
        from xla_core.scheduling.estimator import COLLECTIVES, CostModelEstimator
        description = hardware(hardware_name)
        estimator = CostModelEstimator(description)
        self.estimator = estimator
        self.latency = estimator.latency
        ops = block.operations
        self.position = {}  # value -> index of the block op defining it
        for i, op in enumerate(ops):
            for r in op.results:
                self.position[r] = i
        self.first_reader = {}  # block op index -> index of the first block op reading it
        self.elapsed = [0.0]  # seconds of compute before each block op
        for i, op in enumerate(ops):
            for inner in op.walk():
                for v in inner.operands:
                    j = self.position.get(v)
                    if j is not None and j != i:
                        self.first_reader.setdefault(j, i)
            # fusion, later, merges most ops into few kernels: their work counts, not the
            # per-kernel overhead each would pay alone
            seconds = 0.0 if op.name in COLLECTIVES else max(
                estimator.op_seconds(op) - description.step_overhead, 0.0)
            self.elapsed.append(self.elapsed[-1] + seconds)
        self.ops = ops

    def window(self, index: int) -> tuple:
        """(start, start, first read, first read, seconds) of the collective at ``index``:
        the position after its last operand's definition, that of its first reader (the
        block's end if none), and its estimated seconds (the scheduler's estimate)."""
        op = self.ops[index]
        defined = [self.position[v] for inner in op.walk()
                   for v in inner.operands if v in self.position]
        start = max(defined, default=-1) + 1
        need = self.first_reader.get(index, len(self.ops))
        return (start, start, need, need, self.estimator.collective_seconds(op))

    def loses(self, group: tuple, window: tuple) -> bool:
        """Whether merging ``window`` into ``group`` takes more compute from their windows
        than the candidate's own time plus the latency merging saves."""
        merged = _merged(group, window)
        lost = (self.elapsed[merged[1]] - self.elapsed[merged[0]]
                + self.elapsed[merged[3]] - self.elapsed[merged[2]])
        return lost > self.latency + window[4]


def _merged(group: tuple, window: tuple) -> tuple:
    return (min(group[0], window[0]), max(group[1], window[1]),
            min(group[2], window[2]), max(group[3], window[3]), group[4] + window[4])


def _waits_for(mask: int, target: int, members: list, reads: list) -> bool:
    """Whether an op reading ``mask`` would wait, through merged groups, for a member in
    ``target``."""
    seen = mask
    grew = True
    while grew and not seen & target:
        grew = False
        for group_members, group_reads in zip(members, reads):
            if seen & group_members and (group_members | group_reads) & ~seen:
                seen |= group_members | group_reads
                grew = True
    return bool(seen & target)


def _groups_key(groups) -> tuple:
    """The replica groups by value, ids in the order written (an array's text elides the
    middle of a large one)."""
    array = getattr(groups, "array", None)
    if array is None:
        return (str(groups) if groups is not None else "",)
    return (array.shape, np.ascontiguousarray(array).tobytes())


def _reducer_key(op: Operation) -> Optional[tuple]:
    """The reducer's binary op and element type, or None when the region is not one
    binary op of its two arguments."""
    if len(op.regions) != 1:
        return None
    monoid = region_monoid(op.regions[0])
    block = op.regions[0].blocks[0]
    if monoid is None or len(block.arguments) != 2:
        return None
    return (monoid.op, str(block.arguments[0].type))


def _dimension(op: Operation, name: str) -> int:
    attr = op.attributes.get(name)
    return int(getattr(attr, "value", attr))


@dataclass(frozen=True)
class AllReduceCombinerPass(CollectiveCombinerPass):
    name = "all-reduce-combiner"
    op_name = ALL_REDUCE

    def kind_key(self, op: Operation) -> Optional[tuple]:
        return _reducer_key(op)


@dataclass(frozen=True)
class AllGatherCombinerPass(CollectiveCombinerPass):
    name = "all-gather-combiner"
    op_name = ALL_GATHER
    combine_different_dtypes: bool = True

    def kind_key(self, op: Operation) -> Optional[tuple]:
        dim = _dimension(op, "all_gather_dim")
        if self.combine_different_dtypes:
            return (dim,)
        return (dim, tuple(str(r.type.element_type) for r in op.results))


@dataclass(frozen=True)
class ReduceScatterCombinerPass(CollectiveCombinerPass):
    name = "reduce-scatter-combiner"
    op_name = REDUCE_SCATTER

    def kind_key(self, op: Operation) -> Optional[tuple]:
        reducer = _reducer_key(op)
        return None if reducer is None else reducer + (_dimension(op, "scatter_dimension"),)


def _nbytes(t) -> int:
    return math.prod(t.shape) * np.dtype(numpy_dtype(t.element_type)).itemsize


def _combined(group: list) -> Operation:
    """One op over every member's operands, its results in member order, with the first
    member's attributes (its channel, dimension, marker) and reducer, if any."""
    first = group[0]
    operands = [v for m in group for v in m.operands]
    types = [r.type for m in group for r in m.results]
    op = Operation(first.name, operands, types, dict(first.attributes), location=first.location)
    for region in first.regions:
        region.parent = None
        op.add_region(region)
    return op


def _stable_topological(ops: list) -> list:
    """``ops`` in an order where every op follows the ops defining what it reads (in its
    regions too), as close to the given order as that allows; the terminator stays last."""
    defined_by = {r: i for i, op in enumerate(ops) for r in op.results}
    waiting = [0] * len(ops)
    readers: list = [[] for _ in ops]
    for i, op in enumerate(ops):
        sources = {defined_by[v] for inner in op.walk() for v in inner.operands
                   if v in defined_by and defined_by[v] != i}
        waiting[i] = len(sources)
        for s in sources:
            readers[s].append(i)
    ready = [i for i in range(len(ops)) if not waiting[i]]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(ops[i])
        for j in readers[i]:
            waiting[j] -= 1
            if not waiting[j]:
                heapq.heappush(ready, j)
    assert len(order) == len(ops), "combining collectives made a cycle"
    return order
