"""Outlining: turn the fusion graph's multi-op nodes into ``openhlo.fusion`` composites.

Each fusion becomes a private ``@fused_<kind>_<n>`` function holding clones of
its ops (block order), its inputs as parameters (in order of first use) and
its outputs as results, called by one ``stablehlo.composite`` (the contract in
README.md). Small constants (scalars and splats) read by a fusion are cloned
into it; originals nobody reads any more are dropped.

The composite takes the place of the fusion's last op. A multi-output fusion
may return a value that an op between its first and last op reads, so the
block is then re-sorted topologically, keeping the original order wherever the
dependencies allow (see ``_stable_topological_order``).
"""
from __future__ import annotations

import heapq

import numpy as np

from stablehlo.ir.attributes import DenseElementsAttr, DictAttr, StringAttr, SymbolRefAttr
from stablehlo.ir.core import Module, Operation, make_func
from stablehlo.ir.types import FunctionType
from xla_core.fusion.explain import Explain
from xla_core.fusion.graph import FusionGraph, FusionNode
from xla_core.fusion.kinds import FusionKind, kind_for
from xla_core.fusion.legality import FUSION_NAME, summary
from xla_core.ir_utils import clone_operation, replace_uses

MAX_PULLED_CONSTANT_ELEMENTS = 8


class FusionNamer:
    """Unique ``fused_<kind>_<n>`` names, counting past those already in the module."""

    def __init__(self, module: Module):
        self.taken = {f.name for f in module.functions()}
        self.next = 0

    def __call__(self, kind: FusionKind) -> str:
        while f"fused_{kind.name}_{self.next}" in self.taken:
            self.next += 1
        name = f"fused_{kind.name}_{self.next}"
        self.taken.add(name)
        self.next += 1
        return name


def is_small_constant(op: Operation) -> bool:
    """A scalar-like constant worth cloning into every fusion that reads it."""
    if op.name != "stablehlo.constant":
        return False
    attr = op.attributes.get("value")
    if not isinstance(attr, DenseElementsAttr):
        return False
    array = np.asarray(attr.array)
    if array.size <= MAX_PULLED_CONSTANT_ELEMENTS:
        return True
    first = array.reshape(-1)[:1]
    return bool(np.all(array == first)) if array.dtype.kind != "f" else \
        bool(np.array_equal(array, np.broadcast_to(first.reshape(()), array.shape),
                            equal_nan=True))


def outline_block(module: Module, graph: FusionGraph, namer: FusionNamer,
                  explain: Explain) -> int:
    """Replace every multi-op node of ``graph`` by a composite; returns how many."""
    block = graph.block
    terminator = graph.terminator
    fusions = [n for n in graph.alive() if n.is_fusion()]
    if not fusions:
        return 0
    replacements: dict = {}
    placed: dict[Operation, int] = {}       # composite -> block position key
    fused_ops: set[Operation] = set()
    pulled: set[Operation] = set()
    for node in fusions:
        composite = _outline(module, graph, node, namer, explain, pulled, replacements)
        placed[composite] = node.last
        fused_ops.update(node.ops)
    keep = []
    for i, op in enumerate(block.operations):
        if op in fused_ops:
            continue
        keep.append((i, op))
    keyed = keep + [(key, op) for op, key in placed.items()]
    for _, op in keyed:
        replace_uses(op, replacements)
    ordered = _stable_topological_order(keyed, terminator)
    still_read = {v for op in ordered for inner in op.walk() for v in inner.operands}
    block.operations[:] = []
    for op in ordered:
        if op in pulled and not any(r in still_read for r in op.results):
            continue
        block.append(op)
    return len(fusions)


def _outline(module: Module, graph: FusionGraph, node: FusionNode, namer: FusionNamer,
             explain: Explain, pulled: set, replacements: dict) -> Operation:
    ops = list(node.ops)
    constants = [graph.provider[v].root for v in node.inputs
                 if v in graph.provider and is_small_constant(graph.provider[v].root)]
    pulled.update(constants)
    inside = set(ops)
    if constants:
        ops = sorted(set(ops) | set(constants), key=graph.index.__getitem__)
        inside.update(constants)
    produced = {r for op in ops for r in op.results}
    inputs: dict = {}
    for op in ops:
        for v in op.operands:
            if v not in produced:
                inputs[v] = None
    outputs = sorted(node.outputs, key=lambda v: (graph.index[v.owner], v.index))
    kind = kind_for(summary(node))
    name = namer(kind)
    ftype = FunctionType(tuple(v.type for v in inputs), tuple(v.type for v in outputs))
    func = make_func(name, ftype, visibility="private")
    func.location = node.root.location
    body = func.regions[0].blocks[0]
    mapping = dict(zip(inputs, body.arguments))
    for op in ops:
        body.append(clone_operation(op, mapping))
    body.append(Operation("func.return", [mapping[v] for v in outputs], (),
                          location=node.root.location))
    module.body.append(func)
    composite = Operation(
        "stablehlo.composite", list(inputs), ftype.results,
        {"name": StringAttr(FUSION_NAME),
         "composite_attributes": DictAttr((("kind", StringAttr(kind.name)),)),
         "decomposition": SymbolRefAttr(name)},
        location=node.root.location)
    for old, new in zip(outputs, composite.results):
        new.name_hint = old.name_hint
        replacements[old] = new
    explain.made(name, kind.name, len(ops), len(inputs), len(outputs))
    return composite


def _stable_topological_order(keyed: list, terminator: Operation | None) -> list:
    """Ops ordered so every value is defined before use, preferring smaller keys.

    ``keyed`` holds (key, op); keys are original block positions (a composite
    takes its last op's). Kahn's algorithm with a heap on the key: when the
    original order is already valid, it is kept.
    """
    keyed = sorted(((k, i, op) for i, (k, op) in enumerate(keyed) if op is not terminator))
    owner = {r: entry for entry in keyed for r in entry[2].results}
    waiting: dict = {entry: 0 for entry in keyed}
    readers: dict = {}
    for entry in keyed:
        deps = {owner[v] for inner in entry[2].walk() for v in inner.operands if v in owner}
        deps.discard(entry)
        waiting[entry] = len(deps)
        for d in deps:
            readers.setdefault(d, []).append(entry)
    ready = [entry for entry in keyed if waiting[entry] == 0]
    heapq.heapify(ready)
    ordered = []
    while ready:
        entry = heapq.heappop(ready)
        ordered.append(entry[2])
        for r in readers.get(entry, ()):
            waiting[r] -= 1
            if waiting[r] == 0:
                heapq.heappush(ready, r)
    if len(ordered) != len(keyed):
        raise RuntimeError("internal error: fusion outlining produced a cyclic block")
    return ordered + ([terminator] if terminator is not None else [])
