"""remat: recompute values instead of keeping them live, to bring a function's peak memory
under a limit (the role of XLA's HloRematerialization).

``remat{memory-limit=64MiB}`` works on each public function's body in its present order, so
it runs last: after fusion and the memory (or latency-hiding) schedule, with no ``cse`` after
it. First it moves the ops that free more than they define up to just after the ops they
must follow (``scheduler.hoist``: a training step's weight update right after its gradient,
not at the end with the others), which never raises the peak: the schedule minimized the
peak only, and once recomputation has lowered it, the other stretches of the order matter.
Then it sweeps the order; at each position whose live bytes exceed the target it rewrites
one value at a time until they do not or nothing helps, then moves on:

* a candidate is a value ``v`` defined before the position and read after it (not at it): its
  uses after the position read a copy recomputed right before the first of them, so ``v`` is
  free from its last earlier use until then;
* operands of the copy that are dead by then either live longer (their bytes count against
  what is freed) or are recomputed too, up to ``block-size`` ops in all (XLA's block remat);
* a rewrite may not push an earlier position over the target that was not, nor any position
  over the present peak; the cheapest per byte freed wins (cost: the recomputed ops'
  roofline time on ``hardware``, xla_core.cost; bytes: those freed at the position, times
  the positions of the gap over the target, so a value freed across a long stretch of excess
  counts for all of it), ties to the most bytes;
* a copy is not moved on again (it sits where its value is needed: moving it would move the
  excess with it), though a later chain may compute it once more, as XLA denylists its copies;
* after the sweep, a copy that computes what an earlier op computes (a copy of the same op on
  the same operands, or the op itself) is dropped, its readers reading the earlier results,
  where keeping those live until then puts no position over the target: the sweep freed the
  value for one position at a time, and the excess a second copy was made for may have gone
  since (the 16-layer MLP of tools/bench_remat recomputes 10 ops instead of 17).

Plans are made on the live bytes of the schedule (``BlockGraph.peak``, no in-place sharing:
what a runtime that frees each value after its last use holds) and checked against the
packed heap of ``assign_buffers``, what ``exe.memory_stats()`` reports (arguments + heap):
when the packing overshoots the limit, the pass plans again, from the hoisted order, for
fewer live bytes, and keeps the best plan; a plan that does not lower the peak is undone.

Only pure ops without regions or nested computations are recomputed (``dce``'s purity;
fusions included); constants are not, since a backend keeps them for the executable's life.
A copy computes the bits of the original. Copies carry the unit attribute ``openhlo.remat``,
and ``cse`` never merges an op that has it, so a later cse does not undo the recomputation.

When the peak stays over the limit, the pass keeps the best it found and logs a warning
with it (logger ``openhlo.remat``). A function it rewrote gets ``openhlo.remat_summary =
{limit, peak_before, peak_after, recomputed}`` (peaks as ``assign_buffers`` reports them;
``recomputed``: ops copied), which ``exe.memory_stats()`` reports as the peak without remat.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import numpy as np

from stablehlo.errors import OpenHLOError
from stablehlo.ir.attributes import DictAttr, IntegerAttr, UnitAttr
from stablehlo.ir.core import Func, Module
from stablehlo.ir.types import I64, TensorType
from xla_core.buffers.assignment import assign_buffers
from xla_core.buffers.liveness import BlockGraph, NestedPeaks, is_fusion
from xla_core.buffers.scheduler import hoist
from xla_core.cost import hardware, op_cost, roofline_seconds
from xla_core.ir_utils import clone_operation
from xla_core.passes.base import Pass, PassContext

LOG = logging.getLogger("openhlo.remat")

CLONE_ATTR = "openhlo.remat"
SUMMARY_ATTR = "openhlo.remat_summary"
# Tighter live-byte targets tried when the packed heap overshoots the plan (fragmentation).
_ROUNDS = 4


class RematError(OpenHLOError):
    """A memory limit the remat pass cannot read."""


def parse_limit(text: str) -> int:
    """``"64MiB"``, ``"512MB"``, ``"4096"`` -> bytes (the units of ``--memory-limit``)."""
    from xla_core.spmd.auto_sharding import parse_bytes
    try:
        return parse_bytes(text)
    except OpenHLOError as exc:
        raise RematError(f"remat: {exc}") from None


def remat_summary(func: Func) -> dict:
    """``{limit, peak_before, peak_after, recomputed}`` of ``func`` (a ``Func``) as the remat
    pass left it, or {} when the pass did not rewrite it."""
    summary = func.op.attributes.get(SUMMARY_ATTR)
    if not isinstance(summary, DictAttr):
        return {}
    return {name: attr.value for name, attr in summary.items}


def with_memory_limit(passes: list, limit: int) -> list:
    """``passes`` (a pipeline ending in its schedule) made to keep the peak under ``limit``
    bytes: fusion forms no multi-output fusions (one kernel reading several layers' values,
    such as the reductions of every layer's bias gradient, keeps them all live until the last
    exists, which no recomputation can undo), and remat runs last."""
    from xla_core.fusion import FusionPass
    return [replace(p, multi_output=False) if isinstance(p, FusionPass) else p
            for p in passes] + [RematerializationPass(memory_limit=str(limit))]


@dataclass(frozen=True)
class RematerializationPass(Pass):
    """Recompute values to keep each public function's peak under ``memory_limit``."""
    name = "remat"
    memory_limit: str = ""  # bytes, with a unit or without; empty: do nothing
    hardware: str = "generic-cpu"
    block_size: int = 8

    def run(self, module: Module, ctx: PassContext) -> bool:
        if not self.memory_limit:
            return False
        limit = parse_limit(self.memory_limit)
        if self.block_size < 1:
            raise RematError(f"remat: block-size must be positive, got {self.block_size}")
        seconds = _RecomputeTime(module, hardware(self.hardware))
        fused = {op.attributes["decomposition"].name for op in module.walk() if is_fusion(op)}
        changed = False
        for func in module.functions():
            if func.visibility == "public" and func.body is not None and \
                    func.name not in fused:
                changed |= _FunctionRemat(func, module, limit, seconds, self.block_size).run()
        return changed


class _RecomputeTime:
    """Roofline seconds of recomputing one op, memoized per op."""

    def __init__(self, module: Module, hw):
        self.module, self.hw, self._memo = module, hw, {}

    def __call__(self, op) -> float:
        key = id(op)
        if key not in self._memo:
            self._memo[key] = (op, roofline_seconds(op_cost(op, module=self.module), self.hw))
        return self._memo[key][1]


@dataclass
class _Step:
    value: int          # vid of the value recomputed
    at: int             # position of its first use that reads the copy
    ops: list           # op indices recomputed, in program order


class _FunctionRemat:
    def __init__(self, func: Func, module: Module, limit: int, seconds: _RecomputeTime,
                 block_size: int):
        self.func, self.module, self.limit = func, module, limit
        self.seconds, self.block_size = seconds, block_size
        self._log: list = []  # what _apply did, for _undo: copies, (op, operands before)
        self._origin: dict = {}  # copy -> the op of the program it recomputes

    def run(self) -> bool:
        before = assign_buffers(self.func)
        if before.peak_bytes <= self.limit:
            return False
        scheduled = list(self.func.body.operations)
        self._hoist()
        # Each round plans from the hoisted program for fewer live bytes than the last,
        # while the packed heap overshoots (fragmentation); the best round is kept.
        target = self.limit - before.argument_bytes
        best = (before.peak_bytes, None)
        for _ in range(_ROUNDS):
            live_peak, recomputed = self._plan(target)
            peak = assign_buffers(self.func).peak_bytes
            if peak < best[0]:
                best = (peak, target)
            self._undo()
            if peak <= self.limit or live_peak > target or target <= 0:
                break  # under the limit, or the live bytes cannot go lower
            target -= peak - self.limit
        peak, target = best
        if target is None:
            LOG.warning("remat: @%s needs %d bytes, over the limit of %d, and no "
                        "recomputation lowers it", self.func.name, peak, self.limit)
            self.func.body.operations[:] = scheduled  # the hoist alone did not lower it
            return False
        _, recomputed = self._plan(target)
        self._log.clear()
        if peak > self.limit:
            LOG.warning("remat: @%s needs %d bytes, over the limit of %d: the best found "
                        "(recomputing %d ops) is %d bytes", self.func.name,
                        before.peak_bytes, self.limit, recomputed, peak)
        previous = remat_summary(self.func)
        first = previous.get("peak_before", before.peak_bytes)
        done = previous.get("recomputed", 0)
        self.func.op.attributes[SUMMARY_ATTR] = DictAttr((
            ("limit", IntegerAttr(self.limit, I64)),
            ("peak_before", IntegerAttr(first, I64)),
            ("peak_after", IntegerAttr(peak, I64)),
            ("recomputed", IntegerAttr(done + recomputed, I64))))
        return True

    def _hoist(self) -> None:
        """Move the ops that free more than they define up (``scheduler.hoist``: a weight
        update right after its gradient): the order's other stretches get lower, which
        recomputation needs once the peak is lowered to them."""
        graph = BlockGraph(self.func.body, NestedPeaks(self.module))
        order = hoist(graph, list(range(len(graph.ops))))
        self.func.body.operations[:] = [graph.ops[i] for i in order]

    def _plan(self, target: int) -> tuple[int, int]:
        """Sweep the schedule: at each position whose live bytes exceed ``target``, recompute
        values live across it (best first) until it is under or nothing helps there; later
        positions (the copies' among them) come after. Returns the live peak reached and the
        ops recomputed."""
        recomputed = 0
        k = 0
        graph = BlockGraph(self.func.body, NestedPeaks(self.module))
        live = _live_bytes(graph)
        while k < len(live):
            step = self._best_step(graph, live, target, k) if live[k] > target else None
            if step is None:
                k += 1
                continue
            self._apply(graph, step)
            recomputed += len(step.ops)
            graph = BlockGraph(self.func.body, NestedPeaks(self.module))
            live = _live_bytes(graph)
        while self._reuse_a_copy(graph, live, target):
            recomputed -= 1
            graph = BlockGraph(self.func.body, NestedPeaks(self.module))
            live = _live_bytes(graph)
        return (int(live.max()) if len(live) else 0), recomputed

    def _reuse_a_copy(self, graph: BlockGraph, live: np.ndarray, target: int) -> bool:
        """Drop one copy that computes what an earlier op computes (the same op of the
        program, on the same operands): its readers read the earlier results, kept live
        until then, where that puts no position over ``target``. The sweep frees a value
        for one position at a time, so a later position may have it recomputed again
        while the first copy, kept on, would have fitted. Returns whether one was dropped."""
        n = len(graph.ops)
        ranges = graph.live_ranges(range(n))
        latest: dict = {}  # (op of the program, operands) -> index of its latest computation
        for b, op in enumerate(graph.ops):
            if not op.results:
                continue
            key = (self._origin.get(op, op), tuple(op.operands))
            a = latest.get(key)
            latest[key] = b
            if a is None or CLONE_ATTR not in op.attributes:
                continue
            end = max(ranges[v][1] for v in graph.defs[b])
            changed = live.astype(np.int64)
            for va, vb in zip(graph.defs[a], graph.defs[b]):
                changed[ranges[va][1] + 1:end + 1] += graph.sizes[va]
                changed[ranges[vb][0]:ranges[vb][1] + 1] -= graph.sizes[vb]
            grown = changed > live
            if np.any(changed[grown] > target):
                continue
            self._redirect(graph, b, dict(zip(op.results, graph.ops[a].results)))
            del self.func.body.operations[b]  # a copy: _undo forgets it like the others
            op.parent = None
            return True
        return False

    def _redirect(self, graph: BlockGraph, b: int, to: dict) -> None:
        """Make the readers of op ``b``'s results (inside regions too) read ``to``'s values."""
        for v in graph.defs[b]:
            for k in graph.users[v]:
                for op in graph.ops[k].walk():
                    if any(o in to for o in op.operands):
                        self._log.append((op, list(op.operands)))
                        op.operands = [to.get(o, o) for o in op.operands]

    def _best_step(self, graph: BlockGraph, live: np.ndarray, target: int, k: int):
        """The cheapest recomputation per byte it frees at position ``k`` (times the positions
        over ``target`` in the gap), of a value defined before ``k`` and next used after it,
        that leaves no earlier position over the target that was not already; None when none
        frees anything."""
        n = len(graph.ops)
        ranges = graph.live_ranges(range(n))
        over = np.concatenate(([0], np.cumsum(live > target)))  # positions < j over target
        best = None
        for v, users in enumerate(graph.users):
            i = graph.def_op[v]
            if i >= k or ranges[v][1] <= k or graph.sizes[v] == 0 or \
                    not self._recomputable(graph, i) or k in users:
                continue
            a = max([i] + [u for u in users if u < k])
            b = min(u for u in users if u > k)
            for ops, extended in self._variants(graph, i, b, ranges):
                freed = _freed(graph, live, target, v, a, b, k, ops, extended, ranges)
                if freed <= 0:
                    continue
                cost = sum(self.seconds(graph.ops[j]) for j in ops)
                # bytes freed over the gap, where they matter: at positions over the target
                span = freed * int(over[b] - over[a + 1])
                key = (cost / span, -span)
                if best is None or key < best[0]:
                    best = (key, _Step(v, b, ops))
        return best[1] if best is not None else None

    def _variants(self, graph: BlockGraph, i: int, b: int, ranges):
        """``(ops recomputed, operands kept live longer)`` for recomputing op ``i`` before
        position ``b``: the op alone, then with the producers of its dead operands, up to
        ``block_size`` ops."""
        ops = [i]
        while True:
            inside = {v for j in ops for v in graph.defs[j]}
            inputs = {v for j in ops for v in graph.uses[j] if v not in inside}
            dead = sorted(v for v in inputs if ranges[v][1] < b)
            yield sorted(ops), dead
            producers = sorted({graph.def_op[v] for v in dead
                                if self._recomputable(graph, graph.def_op[v], copies=True)})
            if not producers or len(ops) + len(producers) > self.block_size:
                return
            ops = ops + producers

    @staticmethod
    def _recomputable(graph: BlockGraph, i: int, copies: bool = False) -> bool:
        """Whether op ``i`` may be recomputed: to free its own value (``copies`` false), or
        as a step towards another (``copies`` true: a copy may be computed again there)."""
        op = graph.ops[i]
        if graph.ordered[i] or i == graph.terminator or op.regions or graph.scratch[i]:
            return False
        # A copy is not copied again: it sits where its value is needed, and moving it on
        # would only move the excess with it (XLA denylists its remat copies likewise).
        if op.name == "stablehlo.constant" or not graph.def_bytes[i] or \
                (CLONE_ATTR in op.attributes and not copies):
            return False
        if op.name in ("func.call", "stablehlo.composite") and not is_fusion(op):
            return False
        return all(isinstance(r.type, TensorType) for r in op.results)

    def _apply(self, graph: BlockGraph, step: _Step) -> None:
        mapping: dict = {}
        copies = []
        for j in step.ops:
            copy = clone_operation(graph.ops[j], mapping)
            copy.attributes[CLONE_ATTR] = UnitAttr()
            self._origin[copy] = self._origin.get(graph.ops[j], graph.ops[j])
            copies.append(copy)
        old = graph.values[step.value]
        new = mapping[old]
        for k in graph.users[step.value]:
            if k < step.at:
                continue
            for op in graph.ops[k].walk():  # uses inside regions too
                if old in op.operands:
                    self._log.append((op, list(op.operands)))
                    op.operands = [new if v is old else v for v in op.operands]
        block = self.func.body
        for copy in copies:
            copy.parent = block
            self._log.append(copy)
        block.operations[step.at:step.at] = copies

    def _undo(self) -> None:
        """Put the program back as it was before the first ``_apply`` not yet undone."""
        copies = set()
        for entry in reversed(self._log):
            if isinstance(entry, tuple):
                entry[0].operands = entry[1]
            else:
                entry.parent = None
                copies.add(entry)
        block = self.func.body
        block.operations[:] = [op for op in block.operations if op not in copies]
        self._log.clear()
        self._origin.clear()


def _live_bytes(graph: BlockGraph) -> np.ndarray:
    """Bytes live at each position of the block's present order (as ``BlockGraph.peak``)."""
    n = len(graph.ops)
    change = np.zeros(n + 1, np.int64)
    for v, (start, end) in enumerate(graph.live_ranges(range(n))):
        change[start] += graph.sizes[v]
        change[end + 1] -= graph.sizes[v]
    return np.cumsum(change[:n]) + np.asarray(graph.scratch, np.int64) - \
        np.asarray(graph.handover, np.int64)


def _freed(graph: BlockGraph, live: np.ndarray, target: int, v: int, a: int, b: int, k: int,
           ops: list, extended: list, ranges) -> int:
    """Bytes that recomputing ``v`` (by ``ops``) before position ``b`` frees at position
    ``k``: ``v`` is free after ``a``, the ``extended`` operands live on to ``b``, where the
    copies' other results are live too. 0 when that would put a position before ``k`` over
    ``target`` that was not, or any position over the present peak."""
    low = min([a + 1] + [ranges[o][1] + 1 for o in extended])
    window = live[low:b + 1]
    changed = window.copy()
    changed[a + 1 - low:b - low] -= graph.sizes[v]
    for o in extended:
        changed[ranges[o][1] + 1 - low:] += graph.sizes[o]
    changed[-1] += sum(graph.def_bytes[j] for j in ops) - graph.sizes[v]
    freed = int(window[k - low] - changed[k - low])
    if freed <= 0:
        return 0
    ceiling = np.full(len(window), max(target, int(live.max())), np.int64)
    ceiling[:k - low] = np.maximum(window[:k - low], target)
    return 0 if np.any(changed > ceiling) else freed
