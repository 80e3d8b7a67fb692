"""Multi-output fusion, run after priority fusion (xla-algorithms.md section 2.5).

Priority fusion leaves a producer alone when it cannot go into *all* its
consumers (an expensive producer with several consumers, or one whose value
is also returned or read by a dot). Two steps recover the traffic:

* producer-consumer: the producer joins one consumer and its value becomes an
  extra result of the fusion (layer norm's mean and rstd, needed again by the
  backward pass, leave the same fusion as the normalized rows);
* sibling: fusions reading the same operand merge, so it is read once.

Both keep the graph acyclic (``FusionGraph.reaches``), obey the kind rules of
``legality.py`` (results included) and happen only when one kernel is faster
than two (``t(merged) < t(a) + t(b)``, overheads included).
"""
from __future__ import annotations

from stablehlo.ir.types import TensorType
from xla_core.fusion.explain import Explain
from xla_core.fusion.graph import FusionGraph, FusionNode
from xla_core.fusion.legality import (
    check_async,
    check_kind,
    check_outputs,
    check_recompute,
    merge_summaries,
    summary,
)
from xla_core.fusion.priority import CostCache, is_candidate


def why_not_merge(graph: FusionGraph, a: FusionNode, b: FusionNode,
                  max_operands: int) -> str | None:
    """Why ``a`` and ``b`` cannot become one multi-output fusion (``a`` may feed ``b``)."""
    reason = check_async(graph, a, b)
    if reason is not None:
        return reason
    merged = merge_summaries(summary(a), summary(b))
    reason = check_kind(merged, a.op_set | b.op_set, graph.names, graph.codegen)
    outputs = graph.merged_outputs(a, b)
    if reason is None:
        reason = check_outputs(merged, outputs)
    if reason is None:
        reason = check_recompute(graph, a, b, merged)
    if reason is None:
        count = len(graph.merged_inputs(a, b)) + len(outputs)
        if count > max_operands:
            reason = f"the fusion would have {count} operands and results (max {max_operands})"
    if reason is None and _creates_cycle(graph, a, b):
        reason = "it would create a cycle"
    return reason


def _creates_cycle(graph: FusionGraph, a: FusionNode, b: FusionNode) -> bool:
    """A path a -> x -> ... -> b (or b -> ... -> a) through some other node x."""
    for start, target in ((a, b), (b, a)):
        if graph.reaches([c for c in graph.consumers(start) if c is not target], target):
            return True
    return False


def _merge(graph: FusionGraph, a: FusionNode, b: FusionNode) -> FusionNode:
    merged = merge_summaries(summary(a), summary(b))
    graph.merge(a, b).summary = merged
    return b


def _saving(graph: FusionGraph, costs: CostCache, a: FusionNode, b: FusionNode) -> float:
    merged = costs.merged_seconds(graph, a, b, graph.merged_outputs(a, b))
    return costs.seconds(a) + costs.seconds(b) - merged


def multi_output_fusion(graph: FusionGraph, costs: CostCache, max_operands: int,
                        explain: Explain) -> None:
    _producer_consumer(graph, costs, max_operands, explain)
    _siblings(graph, costs, max_operands, explain)


def _producer_consumer(graph: FusionGraph, costs: CostCache, max_operands: int,
                       explain: Explain) -> None:
    for producer in graph.alive():
        if producer.id not in graph.nodes or not is_candidate(graph, producer):
            continue
        best, refusal = None, None
        for consumer in graph.consumers(producer):
            if not consumer.fusible:
                continue
            saved = _saving(graph, costs, producer, consumer)
            if saved <= 0 or (best is not None and saved <= best[0]):
                continue
            reason = why_not_merge(graph, producer, consumer, max_operands)
            if reason is None:
                best = (saved, consumer)
            elif refusal is None:
                refusal = (consumer, reason)
        if best is not None:
            explain.merged(producer, best[1], "producer-consumer", best[0])
            _merge(graph, producer, best[1])
        elif refusal is not None:
            explain.refused(producer, refusal[0], f"no multi-output fusion: {refusal[1]}")


def _sibling_candidate(graph: FusionGraph, node: FusionNode) -> bool:
    # output (dot) fusions keep to their epilogue; constants have no operands
    return node.id in graph.nodes and is_candidate(graph, node) and not summary(node).dots


def _siblings(graph: FusionGraph, costs: CostCache, max_operands: int,
              explain: Explain) -> None:
    for value in list(graph.users):
        t = value.type
        if not (isinstance(t, TensorType) and t.is_static) or t.num_elements <= 1 \
                or value not in graph.users:
            continue
        siblings = [n for n in graph.users[value] if _sibling_candidate(graph, n)]
        if len(siblings) < 2:
            continue
        siblings.sort(key=lambda n: (n.last, n.id))
        keeper = siblings[0]
        for other in siblings[1:]:
            if not _sibling_candidate(graph, other) or not _sibling_candidate(graph, keeper):
                continue
            saved = _saving(graph, costs, other, keeper)
            if saved > 0 and why_not_merge(graph, other, keeper, max_operands) is None:
                explain.merged(other, keeper, "sibling", saved)
                keeper = _merge(graph, other, keeper)
