"""all-reduce-combiner: merge independent all-reduces into one variadic all_reduce.

Each collective pays a fixed cost (a rendezvous of every device, a launch on accelerators)
besides its bytes, so XLA merges all-reduces that could run together into one. After
partitioning, a data-parallel training step has one all-reduce per gradient (and one for the
loss); combined they are one collective moving the same bytes.

Candidates share a key: the reducer (a region applying one binary op, see
``region_monoid``), its element type, the replica groups, whether a channel is used and
``use_global_device_ids``. Walking each block in program order, an all-reduce joins the
open group of its key unless it depends on a member of it (a combined op cannot run before
its own input), or the group would pass ``threshold-bytes`` or ``max-count`` members; it
then starts a new group. XLA's defaults are kept (30 MiB + 7 bytes, 256 members).

A group of two or more becomes one all_reduce at the place of its last member; ops that
used an earlier member's result and stood before that place move after it (a stable
topological order of the block, so everything else keeps its order).
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from stablehlo.ir.core import Block, Module, Operation
from stablehlo.ir.regions import region_monoid
from stablehlo.ir.types import numpy_dtype

from xla_core.ir_utils import blocks_of, replace_uses
from xla_core.passes.base import Pass, PassContext

ALL_REDUCE = "stablehlo.all_reduce"


@dataclass(frozen=True)
class AllReduceCombinerPass(Pass):
    name = "all-reduce-combiner"
    threshold_bytes: int = 30 * 1024 * 1024 + 7
    max_count: int = 256

    def run(self, module: Module, ctx: PassContext) -> bool:
        changed = False
        for func in module.functions():
            if func.body is None:
                continue
            blocks = [func.body] + [b for op in func.body.operations for b in blocks_of(op)]
            for block in blocks:
                changed |= self._combine_block(block, func.op)
        return changed

    def _combine_block(self, block: Block, root: Operation) -> bool:
        groups = self._groups(block)
        merged = [g for g in groups if len(g) > 1]
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
        """Groups of combinable all-reduces of ``block``, in program order."""
        groups = []
        open_group: dict = {}  # key -> (members, bytes, bit mask of member ids)
        depends: dict = {}  # value -> bit mask of the all-reduces it depends on
        for index, op in enumerate(block.operations):
            mask = 0
            for inner in op.walk():
                for v in inner.operands:
                    mask |= depends.get(v, 0)
            key = _key(op) if op.name == ALL_REDUCE else None
            if key is not None:
                size = sum(_nbytes(r.type) for r in op.results)
                members, total, member_mask = open_group.get(key, ([], 0, 0))
                if (not members or mask & member_mask or total + size > self.threshold_bytes
                        or len(members) >= self.max_count):
                    members, total, member_mask = [], 0, 0
                    groups.append(members)
                members.append(op)
                open_group[key] = (members, total + size, member_mask | 1 << index)
                mask |= 1 << index
            for r in op.results:
                depends[r] = mask
        return groups


def _key(op: Operation):
    """What all-reduces must share to be combined, or None for one that is not combined."""
    if len(op.regions) != 1 or not op.results:
        return None
    monoid = region_monoid(op.regions[0])
    block = op.regions[0].blocks[0]
    if monoid is None or len(block.arguments) != 2:
        return None
    attrs = op.attributes
    groups = attrs.get("replica_groups")
    return (monoid.op, str(block.arguments[0].type), str(groups) if groups is not None else "",
            "channel_handle" in attrs, str(attrs.get("use_global_device_ids", "")))


def _nbytes(t) -> int:
    return math.prod(t.shape) * np.dtype(numpy_dtype(t.element_type)).itemsize


def _combined(group: list) -> Operation:
    """One all_reduce over every member's operands, with the first member's attributes (its
    channel) and reducer."""
    first = group[0]
    operands = [v for m in group for v in m.operands]
    types = [r.type for m in group for r in m.results]
    op = Operation(ALL_REDUCE, operands, types, dict(first.attributes), location=first.location)
    region = first.regions[0]
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
    assert len(order) == len(ops), "combining all-reduces made a cycle"
    return order
