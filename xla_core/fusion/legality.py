"""Legality: may producer P fuse into consumer C? Every refusal comes with a reason.

The rules follow the fusion contract (.notes/fusion_contract.md, summarized in
README.md): which ops are fusible, what a loop / reduction / output fusion may
hold, plus XLA's rules against harmful duplication and recomputation. Nothing
here looks at cost; profitability lives in ``priority.py``.

A ``Summary`` of a node (its dots, its reduction signature, the shapes its ops
produce, which of its values derive from expensive ops) is cached on the node,
so checking a candidate merge costs the sizes of the summaries, plus one walk
over the consumer for the recomputation rule.

Note [fusion around async pairs]
A fusion runs where its last op was (``FusionNode.last``; outline.py keeps that order),
so fusing moves every other op of it down to there. Between an ``openhlo.async_start``
and its ``openhlo.async_done`` lie the ops that overlap the collective; the ops the
start reads (transitively, in the block) must come before the start. So each op has a
bound (``async_bounds``): the position of the done of every window it lies in, and of
every start it feeds; a fusion whose last op is at or below the bound of one of its ops
would move that op out of its window (the overlap is lost) or a start below the fusion
(the window shrinks, or a cycle through the done appears), and is refused
(``check_async``). In particular no fusion joins an op that reads a done's result with
one of the ops that must run before that done. Ops before a start that it does not read
may still join a fusion in the window (more overlap) or after the done (outside any
window). Starts and dones themselves never fuse (they have effects).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from stablehlo.ir.attributes import attr_to_python
from stablehlo.ir.core import Operation
from stablehlo.ir.ops.async_collectives import ASYNC_DONE, start_of
from stablehlo.ir.ops.base import ELEMENTWISE, Effect, op_effects
from stablehlo.ir.regions import region_monoid
from stablehlo.ir.types import ComplexType, FloatType, QuantizedType, TensorType
from xla_core.cost import elementwise_weight
from xla_core.fusion.codegen_hook import GENERATE_ALL, CodegenHook
from xla_core.fusion.graph import TERMINATOR, FusionGraph, FusionNode, values_read
from xla_core.fusion.kinds import kind_for, reduced_shape, shape_text, squeeze

FUSION_NAME = "openhlo.fusion"

# Data-movement ops every fusion kind may hold (contract: "fusible ops").
_SHAPE_OPS = frozenset(f"stablehlo.{n}" for n in (
    "broadcast_in_dim", "reshape", "transpose", "iota", "constant", "slice", "concatenate",
    "pad", "reverse"))
# chlo elementwise ops that are not special functions.
_CHEAP_CHLO = frozenset(f"chlo.{n}" for n in (
    "conj", "square", "is_inf", "is_neg_inf", "is_pos_inf"))
# Weight >= 4 in the cost model's table: divide, sqrt, exp, log, tanh, pow, ...
_EXPENSIVE_WEIGHT = 4.0


def why_not_fusible(op: Operation) -> str | None:
    """None when ``op`` may join a fusion, else why not."""
    opdef = op.opdef
    if opdef is not None and op_effects(op) != Effect.PURE:
        return "it has side effects"
    for t in (*op.result_types, *op.operand_types):
        if not (isinstance(t, TensorType) and t.is_static):
            return f"it has a value of type {t} (fusions take static tensors)"
        if isinstance(t.element_type, QuantizedType):
            return "it has quantized values"
    if op.name in _SHAPE_OPS or op.name == "stablehlo.dot_general":
        return None
    if opdef is not None and opdef.has(ELEMENTWISE):
        return None
    if op.name == "stablehlo.reduce":
        return _why_not_fusible_reduce(op)
    if op.name == "stablehlo.composite" and getattr(op.attr("name"), "value", "") == FUSION_NAME:
        return "it is already a fusion"
    if op.regions:
        return f"{op.name} has regions (ops inside them are fused separately)"
    return f"{op.name} is not in the fusible set"


def _why_not_fusible_reduce(op: Operation) -> str | None:
    # Whether the backend generates this monoid on this element type is its hook's answer
    # (CodegenHook.why_not_op), asked with the same recogniser.
    if len(op.operands) != 2:
        return "a variadic reduce is not fusible"
    if region_monoid(op.regions[0]) is None:
        return "its body is not a single monoid op (add, multiply, maximum, minimum, and, or, xor)"
    rank = op.operands[0].type.rank
    dims = sorted(reduce_dims(op))
    if dims != list(range(rank - len(dims), rank)) and dims != list(range(len(dims))):
        return f"it reduces dims {dims}, neither a prefix nor a suffix of the operand's"
    return None


def reduce_dims(op: Operation) -> tuple:
    return tuple(sorted(int(d) for d in attr_to_python(op.attributes["dimensions"])))


def is_expensive(op: Operation) -> bool:
    """Ops XLA never duplicates (transcendentals, float divide, reduce, dot)."""
    if op.name in ("stablehlo.reduce", "stablehlo.dot_general"):
        return True
    if op.name.startswith("chlo."):
        return op.name not in _CHEAP_CHLO
    weight = elementwise_weight(op.name)
    if weight < _EXPENSIVE_WEIGHT or not op.results:
        return False
    # integer divide/remainder are cheap enough to recompute
    return isinstance(op.results[0].type.element_type, (FloatType, ComplexType))


@dataclass
class Summary:
    """What legality needs to know about a node's ops (mergeable without a walk)."""
    dots: tuple          # the dot_general ops
    reduction: tuple | None  # (input shape S, reduced dims R), None without reduce
    conflict: str | None  # why two of its reduces cannot share a fusion
    shapes: frozenset    # result shapes of ops other than constants and dots
    expensive: Operation | None


def summary(node: FusionNode) -> Summary:
    if node.summary is None:
        node.summary = _summarize(node.ops)
    return node.summary


def _summarize(ops: list[Operation]) -> Summary:
    dots, reduction, conflict, shapes, expensive = [], None, None, set(), None
    for op in ops:
        if op.name == "stablehlo.dot_general":
            dots.append(op)
        elif op.name != "stablehlo.constant":
            shapes.update(r.type.shape for r in op.results)
        if op.name == "stablehlo.reduce":
            sig = (op.operands[0].type.shape, reduce_dims(op))
            if reduction is not None and sig != reduction:
                conflict = _reduction_conflict(reduction, sig)
            reduction = reduction or sig
        if expensive is None and is_expensive(op):
            expensive = op
    return Summary(tuple(dots), reduction, conflict, frozenset(shapes), expensive)


def tainted(node: FusionNode) -> set:
    """Values computed inside ``node`` from an expensive op (cached on the node)."""
    if node.tainted is None:
        values: set = set()
        if summary(node).expensive is not None:
            for op in node.ops:
                if is_expensive(op) or any(v in values for v in op.operands):
                    values.update(op.results)
        node.tainted = values
    return node.tainted


def _reduction_conflict(a: tuple, b: tuple) -> str:
    return (f"reductions of different shapes or dims cannot share a fusion "
            f"({shape_text(a[0])} over {list(a[1])} vs {shape_text(b[0])} over {list(b[1])})")


def merge_summaries(a: Summary, b: Summary) -> Summary:
    """The summary of the union of two nodes' ops (an expensive op is never in both)."""
    conflict = a.conflict or b.conflict
    if a.reduction and b.reduction and a.reduction != b.reduction:
        conflict = conflict or _reduction_conflict(a.reduction, b.reduction)
    return Summary(a.dots + b.dots, a.reduction or b.reduction, conflict, a.shapes | b.shapes,
                   a.expensive or b.expensive)


def check_kind(s: Summary, op_set: set, names: dict,
               codegen: CodegenHook = GENERATE_ALL) -> str | None:
    """Why ops with merged summary ``s`` (the ops in ``op_set``) form no valid fusion;
    ``names`` are the values' printed names (``FusionGraph.names``); ``codegen`` is the
    backend's hook (codegen_hook.py)."""
    if s.conflict:
        return s.conflict
    if len(s.dots) > 1:
        return "two dots cannot share a fusion"
    if s.dots and s.reduction:
        return "a dot and a reduce cannot share a fusion"
    kind = kind_for(s)
    return kind.why_not(s, op_set, names) or codegen.why_not_kind(kind, s)


def check_outputs(s: Summary, outputs) -> str | None:
    """Why a fusion of kind ``kind_for(s)`` cannot return ``outputs``."""
    kind = kind_for(s)
    allowed, shapes = kind.result_shapes(s, sorted({v.type.shape for v in outputs}))
    bad = [shape for shape in shapes if shape not in allowed]
    if bad:
        return (f"a {kind.name} fusion cannot return both {shape_text(shapes[0])} and "
                f"{shape_text(bad[0] if bad[0] != shapes[0] else shapes[-1])} results")
    return None


def check_recompute(graph: FusionGraph, producer: FusionNode, consumer: FusionNode,
                    merged: Summary) -> str | None:
    """Refuse when an expensive value of ``producer`` would be recomputed per element
    of a broadcast in ``consumer`` (a per-row value broadcast back over its row in a
    reduction fusion is computed once per row, so it is fine)."""
    if summary(producer).expensive is None:
        return None
    values = tainted(producer)
    tainted_here = {v for v in producer.outputs if v in values}
    if not tainted_here:
        return None
    row = None
    if merged.reduction:
        row = (squeeze(reduced_shape(merged.reduction)), squeeze(merged.reduction[0]))
    for op in consumer.ops:
        if not any(v in tainted_here for v in op.operands):
            continue
        if op.name == "stablehlo.broadcast_in_dim":
            src, dst = math.prod(op.operands[0].type.shape), math.prod(op.results[0].type.shape)
            if dst > src and \
                    (squeeze(op.operands[0].type.shape), squeeze(op.results[0].type.shape)) != row:
                factor = dst // max(src, 1)
                return (f"it would recompute expensive {summary(producer).expensive.name} "
                        f"{factor}x through {graph.names[op.results[0]]} = broadcast_in_dim")
        tainted_here.update(op.results)
    return None


def async_bounds(graph: FusionGraph) -> dict[Operation, int]:
    """Per op of ``graph``'s block, the block position it must stay above (Note [fusion
    around async pairs]); ops without a bound are left out. Computed once per graph, from
    the block as it was given."""
    if graph.async_bounds is None:
        ops = graph.block.operations
        index = graph.index
        bounds: dict[Operation, int] = {}

        def bound(op: Operation, position: int) -> None:
            bounds[op] = min(bounds.get(op, position), position)

        for d, done in enumerate(ops):
            if done.name != ASYNC_DONE:
                continue
            start = start_of(done)
            s = index[start]
            for op in ops[s + 1:d]:
                bound(op, d)
            stack = [start]
            while stack:  # what the start reads, transitively within the block
                for v in values_read(stack.pop()):
                    feeder = v.owner
                    if isinstance(feeder, Operation) and index.get(feeder, s) < s and \
                            bounds.get(feeder, len(ops)) > s:
                        bound(feeder, s)
                        stack.append(feeder)
        graph.async_bounds = bounds
    return graph.async_bounds


def check_async(graph: FusionGraph, a: FusionNode, b: FusionNode) -> str | None:
    """Why ``a`` and ``b`` may not become one fusion for the async pairs of the block (Note
    [fusion around async pairs])."""
    bounds = async_bounds(graph)
    if not bounds:
        return None
    last = max(a.last, b.last)
    for op in (*a.ops, *b.ops):
        at = bounds.get(op)
        if at is not None and at <= last:
            limit = graph.block.operations[at]
            what = "the async done" if limit.name == ASYNC_DONE else "the async start it feeds"
            return (f"it would move {graph.names.get(op.results[0], op.name)} below "
                    f"{what} {graph.names.get(limit.results[0], limit.name)} (an async "
                    f"collective's overlap window)")
    return None


def why_not_fuse(graph: FusionGraph, producer: FusionNode, consumer: FusionNode,
                 n_consumers: int, max_operands: int) -> str | None:
    """Why ``producer`` may not be fused into ``consumer`` (one of ``n_consumers``)."""
    if not consumer.fusible:
        if consumer.why_not == TERMINATOR:
            return "its value is returned (a computation root is never duplicated)"
        return f"consumer {describe(consumer, graph.names)} is not fusible: {consumer.why_not}"
    reason = check_async(graph, producer, consumer)
    if reason is not None:
        return reason
    ps = summary(producer)
    if n_consumers > 1 and ps.expensive is not None:
        return (f"it would duplicate expensive {ps.expensive.name} into {n_consumers} "
                f"consumers")
    merged = merge_summaries(ps, summary(consumer))
    reason = check_kind(merged, producer.op_set | consumer.op_set, graph.names, graph.codegen)
    if reason is None:
        reason = check_recompute(graph, producer, consumer, merged)
    if reason is None:
        count = len(graph.merged_inputs(producer, consumer)) + len(consumer.outputs)
        if count > max_operands:
            reason = f"the fusion would have {count} operands and results (max {max_operands})"
    return reason


# -- naming for explanations --------------------------------------------------

def describe(node: FusionNode, names: dict) -> str:
    """``%7 (stablehlo.exponential @ f.mlir:12)``, with ``, N ops`` for a fusion; ``%7`` is the
    name ``names`` (``FusionGraph.names``: the printer's) gives the node's root value."""
    root = node.root
    name = names[root.results[0]] if root.results else root.name
    where = f" @ {root.location.file}:{root.location.line}" if root.location else ""
    size = f", {len(node.ops)} ops" if len(node.ops) > 1 else ""
    return f"{name} ({root.name}{where}{size})"
