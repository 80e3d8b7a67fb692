"""memory-schedule: reorder each block's ops to lower its simulated peak memory.

Two heuristics propose a legal topological order of a ``BlockGraph`` (data
dependencies, effect order, terminator last):

* ``list_schedule``: top-down greedy; among ready ops pick the one with the
  highest ``bytes freed - bytes defined`` (an operand is freed when this op is
  its last unscheduled reader and it is not a block result), ties in program
  order. Priorities only grow (an operand's last reader appears when its other
  readers are scheduled), so a lazy heap keeps this O(E log N).
* ``dfs_schedule``: post-order depth-first search from the ops nobody reads
  (the terminator last), visiting operands with more extra users first, then
  larger cumulative size, then program order, so that a heavy subtree is
  finished and freed before the next one starts.

``sink`` then moves ops that define more than they free (broadcasts of
constants, iotas) down to their first reader, which the greedy list scheduler
otherwise runs too early. ``best_schedule`` simulates program order and the
proposals (program order and list also after sinking) and keeps the lowest
peak, program order on ties, so the pass never makes the peak worse.
Inner blocks (while/if/case bodies) are scheduled before the op holding them,
whose scratch is their peak.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

from stablehlo.ir.core import Block, Module
from xla_core.buffers.liveness import BlockGraph, BuffersError, NestedPeaks, is_fusion
from xla_core.passes.base import Pass, PassContext


def _free_bytes(graph: BlockGraph, i: int, remaining: list) -> int:
    sizes = graph.sizes
    freed = sum(sizes[v] for v in graph.uses[i]
                if remaining[v] == 1 and not graph.is_output(v))
    return freed - graph.def_bytes[i]


def _successors(graph: BlockGraph) -> list[list[int]]:
    succs: list[list[int]] = [[] for _ in graph.ops]
    for i, preds in enumerate(graph.preds):
        for p in preds:
            succs[p].append(i)
    return succs


def list_schedule(graph: BlockGraph) -> list[int]:
    """Greedy order by bytes freed minus bytes defined (see the module doc)."""
    n = len(graph.ops)
    succs = _successors(graph)
    waiting = [len(p) for p in graph.preds]
    remaining = [len(u) for u in graph.users]
    priority = [0] * n
    ready: list[tuple[int, int]] = []
    in_ready = [False] * n
    done = [False] * n

    def push(i: int) -> None:
        priority[i] = _free_bytes(graph, i, remaining)
        in_ready[i] = True
        heapq.heappush(ready, (-priority[i], i))

    for i in range(n):
        if waiting[i] == 0 and i != graph.terminator:
            push(i)
    order = []
    while ready:
        neg, i = heapq.heappop(ready)
        if not in_ready[i] or -neg != priority[i]:
            continue  # stale entry: scheduled already, or its priority has grown
        in_ready[i] = False
        done[i] = True
        order.append(i)
        for v in graph.uses[i]:
            remaining[v] -= 1
            if remaining[v] == 1:
                last = next(u for u in graph.users[v] if not done[u])
                if in_ready[last]:
                    push(last)
        for s in succs[i]:
            waiting[s] -= 1
            if waiting[s] == 0 and s != graph.terminator:
                push(s)
    if graph.terminator is not None:
        order.append(graph.terminator)
    if len(order) != n:
        raise BuffersError("dependency cycle in block")
    return order


def dfs_schedule(graph: BlockGraph) -> list[int]:
    """Post-order DFS from unread ops, heavy operand subtrees first (see the module doc)."""
    n = len(graph.ops)
    succs = _successors(graph)
    extra_users = [0] * n
    total_size = [0] * n
    for i in range(n):  # program order is topological
        readers = sum(len(graph.users[v]) for v in graph.defs[i])
        extra_users[i] = max(readers - 1, 0) + sum(extra_users[p] for p in graph.preds[i])
        total_size[i] = graph.def_bytes[i] + sum(total_size[p] for p in graph.preds[i])
    operand_order = [sorted(p, key=lambda q: (-extra_users[q], -total_size[q], q))
                     for p in graph.preds]
    roots = [i for i in range(n) if not succs[i] and i != graph.terminator]
    if graph.terminator is not None:
        roots.append(graph.terminator)
    visited = [False] * n
    order = []
    for root in roots:
        if visited[root]:
            continue
        visited[root] = True
        stack = [(root, iter(operand_order[root]))]
        while stack:
            op, it = stack[-1]
            for p in it:
                if not visited[p]:
                    visited[p] = True
                    stack.append((p, iter(operand_order[p])))
                    break
            else:
                stack.pop()
                order.append(op)
    return order


def sink(graph: BlockGraph, order: list[int]) -> list[int]:
    """``order`` with expanding ops moved down to just before their first reader.

    An op is held back when it is pure, has readers, and defines more bytes
    than it frees (the operands it is the last reader of): a broadcast of a
    constant, an iota. Emitting it later shortens its results' lives by more
    than it lengthens its operands'. Held ops are emitted, in their order,
    just before the first op that needs them.
    """
    pos = _positions(order)
    last_use = [max((pos[u] for u in users), default=-1) for users in graph.users]
    held: set[int] = set()
    out: list[int] = []
    for i in order:
        if _expands(graph, i, pos[i], last_use):
            held.add(i)
            continue
        if not held or not any(p in held for p in graph.preds[i]):
            out.append(i)
            continue
        stack = [i]
        while stack:
            j = stack[-1]
            pending = sorted((p for p in graph.preds[j] if p in held), key=lambda p: -pos[p])
            if pending:
                held.difference_update(pending)
                stack.extend(pending)
                continue
            out.append(stack.pop())
    return out


def _expands(graph: BlockGraph, i: int, at: int, last_use: list[int]) -> bool:
    defined = graph.def_bytes[i]
    if not defined or graph.ordered[i] or graph.scratch[i] or i == graph.terminator:
        return False
    if not any(graph.users[v] for v in graph.defs[i]):
        return False
    sizes = graph.sizes
    return defined > sum([sizes[v] for v in graph.uses[i] if last_use[v] == at])


def hoist(graph: BlockGraph, order: list[int]) -> list[int]:
    """``order`` with shrinking ops moved up, each to just after the last op it must follow.

    The dual of ``sink``: an op is moved when it is pure, holds no nested computation, and
    frees more bytes (the operands it is the last reader of) than it defines: a training
    step's weight update, which reads an activation and its gradient and writes a small
    output. Run right after its operands' other readers, instead of wherever the order put
    it, it frees them across the whole stretch in between, where it only adds its results.
    The peak of a stretch does not matter to ``best_schedule`` unless it is the peak, but it
    does to recomputation (``remat``), which lowers the peak until another stretch is the
    highest. A move that would raise the order's peak is not made.
    """
    order = list(order)
    pos = _positions(order)
    peak = graph.peak(order)
    for k in range(len(order)):
        to = _hoisted_position(graph, order, pos, k)
        if to is None:
            continue
        moved = order[:to] + [order[k]] + order[to:k] + order[k + 1:]
        moved_peak = graph.peak(moved)
        if moved_peak <= peak:
            order, peak, pos = moved, moved_peak, _positions(moved)
    return order


def _positions(order: list[int]) -> list[int]:
    pos = [0] * len(order)
    for k, i in enumerate(order):
        pos[i] = k
    return pos


def _hoisted_position(graph: BlockGraph, order: list[int], pos: list[int],
                      k: int) -> int | None:
    """Where ``hoist`` moves the op at position ``k`` of ``order`` (``pos``: op index ->
    position), or None to leave it."""
    i = order[k]
    if graph.ordered[i] or graph.scratch[i] or i == graph.terminator or graph.ops[i].regions:
        return None
    after = max((pos[p] for p in graph.preds[i]), default=-1)
    freed = 0
    for v in graph.uses[i]:
        others = [pos[u] for u in graph.users[v] if u != i]
        if graph.is_output(v) or max(others, default=-1) > k:
            continue
        freed += graph.sizes[v]
        after = max([after] + others)
    if freed <= graph.def_bytes[i] or after + 1 >= k:
        return None
    return after + 1


def best_schedule(graph: BlockGraph) -> tuple[list[int], int]:
    """The lowest-peak order among program order and the list schedule, each as is and
    after ``sink``, and the DFS schedule; the earliest on ties, so program order unless
    something is lower."""
    program = list(range(len(graph.ops)))
    listed = list_schedule(graph)
    # DFS already emits each operand subtree right before its reader: sinking adds little.
    candidates = [sink(graph, program), listed, sink(graph, listed), dfs_schedule(graph)]
    best, best_peak = program, graph.peak(program)
    tried = [program]
    for candidate in candidates:
        if candidate in tried:
            continue
        tried.append(candidate)
        peak = graph.peak(candidate)
        if peak < best_peak:
            best, best_peak = candidate, peak
    return best, best_peak


def schedule_block(block: Block, nested: NestedPeaks) -> bool:
    """Schedule ``block`` and, first, every block nested in it; returns whether any moved."""
    changed = False
    for op in block.operations:
        for region in op.regions:
            for inner in region.blocks:
                changed |= schedule_block(inner, nested)
    try:
        graph = BlockGraph(block, nested)
    except BuffersError:
        # A dynamically shaped value has no size to schedule by: keep program order.
        return changed
    order, _ = best_schedule(graph)
    if order != list(range(len(graph.ops))):
        block.operations[:] = [graph.ops[i] for i in order]
        changed = True
    return changed


@dataclass(frozen=True)
class MemorySchedulePass(Pass):
    """Reorder every block of every function to lower its simulated peak memory."""
    name = "memory-schedule"

    def run(self, module: Module, ctx: PassContext) -> bool:
        nested = NestedPeaks(module)
        # A fusion body's values live in registers while its kernel runs: no order to pick.
        fused = {op.attributes["decomposition"].name for op in module.walk() if is_fusion(op)}
        changed = False
        for func in module.functions():
            if func.body is not None and func.name not in fused:
                changed |= schedule_block(func.body, nested)
        return changed
