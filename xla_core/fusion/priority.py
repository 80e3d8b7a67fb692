"""Profitability and the priority-fusion loop (xla-algorithms.md section 2.3).

The unit of work is a producer; the action fuses it into *all* its consumers,
so its values never touch memory. Its priority is the time saved::

    priority(P) = t(P) + sum_C t(C)  -  sum_C t(P fused into C)

where ``t`` is ``roofline_seconds`` on the chosen hardware, which charges every
kernel a step overhead: that is what makes fusing many small memory-bound ops
pay. A max-heap holds producers with priority >= 0; after each fusion the
changed consumers and their producers are re-prioritized (stale heap entries
are skipped by a per-node stamp). Ties go to the producer earlier in the block.

Fused costs are ``fusion_cost``'s formula (flops add, only boundary values
touch memory) computed from per-op and per-node caches, so a candidate costs
the size of the two nodes, not a fresh walk of the cost model.
"""
from __future__ import annotations

import heapq

from stablehlo.ir.core import Operation
from xla_core.cost import Cost, HardwareDescription, op_cost, roofline_seconds, type_bytes
from xla_core.fusion.explain import Explain
from xla_core.fusion.graph import TERMINATOR, FusionGraph, FusionNode
from xla_core.fusion.legality import merge_summaries, summary, why_not_fuse


class CostCache:
    """Times of nodes and candidate fusions on one hardware description."""

    def __init__(self, hw: HardwareDescription):
        self.hw = hw
        # op -> (flops, seconds as its own kernel, flops of matrix products)
        self._op: dict[Operation, tuple] = {}
        self._bytes: dict = {}
        self._type_bytes: dict = {}
        self._node: dict[int, tuple] = {}   # node id -> (version, seconds)
        # (producer id, version, consumer id, version, number of consumers) ->
        # (refusal reason or None, seconds of the producer fused into the consumer)
        self.pairs: dict[tuple, tuple] = {}

    def start_graph(self) -> None:
        """Forget node and pair times: node ids are only unique within one block's graph
        (the per-op times stay valid)."""
        self._node.clear()
        self.pairs.clear()

    def _op_entry(self, op: Operation) -> tuple:
        entry = self._op.get(op)
        if entry is None:
            cost = op_cost(op)
            entry = self._op[op] = (cost.flops, roofline_seconds(cost, self.hw),
                                    cost.matmul_flops)
        return entry

    def flops(self, op: Operation) -> float:
        return self._op_entry(op)[0]

    def matmul_flops(self, dots) -> float:
        """Flops of the matrix products ``dots`` (a node's, from its legality summary)."""
        return sum(self._op_entry(op)[2] for op in dots)

    def value_bytes(self, v) -> int:
        b = self._bytes.get(v)   # by value first: hashing a type costs more than this
        if b is None:
            b = self._type_bytes.get(v.type)
            if b is None:
                b = self._type_bytes[v.type] = type_bytes(v.type)
            self._bytes[v] = b
        return b

    def group_seconds(self, flops: float, inputs, outputs, matmul_flops: float = 0.0) -> float:
        """Time of one kernel doing ``flops`` (``matmul_flops`` of them in a matrix product)
        that reads ``inputs`` and writes ``outputs``.

        ``fusion_cost`` also charges constants inside a group; during fusion every
        constant is still outside (it is pulled in when the fusion is outlined),
        so its bytes are among the inputs'.
        """
        read = sum(self.value_bytes(v) for v in inputs)
        written = sum(self.value_bytes(v) for v in outputs)
        return roofline_seconds(Cost(flops, read, written, matmul_flops=matmul_flops), self.hw)

    def seconds(self, node: FusionNode) -> float:
        cached = self._node.get(node.id)
        if cached is not None and cached[0] == node.version:
            return cached[1]
        if node.is_fusion():
            # a fusion got its flops when it was merged
            seconds = self.group_seconds(node.flops, node.inputs, node.outputs,
                                         self.matmul_flops(summary(node).dots))
        else:
            seconds = self._op_entry(node.ops[0])[1]
        self._node[node.id] = (node.version, seconds)
        return seconds

    def merged_seconds(self, graph: FusionGraph, a: FusionNode, b: FusionNode,
                       outputs) -> float:
        """Time of one kernel holding the ops of ``a`` and ``b`` and returning ``outputs``."""
        flops = graph.flops(a) + graph.flops(b)
        if not a.op_set.isdisjoint(b.op_set):   # ops duplicated into both count once
            flops -= sum(self.flops(op) for op in a.op_set & b.op_set)
        dots = dict.fromkeys(summary(a).dots + summary(b).dots)
        return self.group_seconds(flops, graph.merged_inputs(a, b), outputs,
                                  self.matmul_flops(dots))


def producer_priority(graph: FusionGraph, costs: CostCache, producer: FusionNode,
                      max_operands: int) -> tuple[float, str | None, FusionNode | None]:
    """(seconds saved, refusal reason or None, the refusing consumer)."""
    consumers = graph.consumers(producer)
    n = len(consumers)
    fused = 0.0
    for c in consumers:
        # a fusion changes few pairs: the others are answered from the cache
        key = (producer.id, producer.version, c.id, c.version, n)
        answer = costs.pairs.get(key)
        if answer is None:
            reason = why_not_fuse(graph, producer, c, n, max_operands)
            seconds = costs.merged_seconds(graph, producer, c, c.outputs) if reason is None \
                else 0.0
            answer = costs.pairs[key] = (reason, seconds)
        if answer[0] is not None:
            return float("-inf"), answer[0], c
        fused += answer[1]
    unfused = costs.seconds(producer) + sum(costs.seconds(c) for c in consumers)
    return unfused - fused, None, None


def is_candidate(graph: FusionGraph, node: FusionNode) -> bool:
    """Fusible producers with consumers; constants join fusions at the end instead."""
    return (node.fusible and bool(node.outputs)
            and not (len(node.ops) == 1 and node.root.name == "stablehlo.constant"))


def priority_fusion(graph: FusionGraph, costs: CostCache, max_operands: int,
                    explain: Explain) -> int:
    """Run the priority-fusion loop on ``graph``; returns how many producers fused."""
    heap: list = []
    stamps: dict[int, int] = {}

    def push(node: FusionNode) -> None:
        stamp = stamps[node.id] = stamps.get(node.id, 0) + 1
        if not is_candidate(graph, node):
            return
        saved, reason, _ = producer_priority(graph, costs, node, max_operands)
        if reason is None and saved >= 0:
            heapq.heappush(heap, (-saved, node.last, node.id, stamp, node))

    for node in graph.alive():
        push(node)
    fused = 0
    while heap:
        neg_saved, _, node_id, stamp, node = heapq.heappop(heap)
        if node_id not in graph.nodes or stamps[node_id] != stamp:
            continue
        consumers = graph.consumers(node)
        explain.fused(node, consumers, -neg_saved)
        merged = [merge_summaries(summary(node), summary(c)) for c in consumers]
        changed = graph.fuse_into_consumers(node)
        for c, s in zip(changed, merged):
            c.summary = s
        fused += 1
        dirty: dict[FusionNode, None] = dict.fromkeys(changed)
        for c in changed:
            dirty.update(dict.fromkeys(graph.producers(c)))
        for d in dirty:
            push(d)
    return fused


def explain_refusals(graph: FusionGraph, costs: CostCache, max_operands: int,
                     explain: Explain) -> None:
    """One line per producer left unfused, with the reason."""
    if not explain.enabled:
        return
    for node in graph.alive():
        if not node.outputs:
            continue
        if not node.fusible:
            if graph.consumers(node) and node.why_not != TERMINATOR:
                explain.not_fusible(node)
            continue
        if not is_candidate(graph, node):
            continue
        if all(c.why_not == TERMINATOR for c in graph.consumers(node)):
            continue    # a result of the block: nothing to explain
        saved, reason, consumer = producer_priority(graph, costs, node, max_operands)
        if reason is not None:
            explain.refused(node, consumer, reason)
        elif saved < 0:
            explain.refused(node, None, f"not profitable (would cost {-saved * 1e6:.2f} us more)")
