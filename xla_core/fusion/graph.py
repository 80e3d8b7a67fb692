"""The fusion graph of one block: nodes are groups of ops that will become one kernel.

Every op of the block starts as its own node (the terminator too, as a node
that never fuses). A node knows its ``inputs`` (values it reads from outside:
other nodes' results, block arguments, values of enclosing blocks) and its
``outputs`` (values it computes that something outside it reads). ``users``
maps a value to the nodes that read it from outside; a value has at most one
node providing it.

Two ways to merge, both keeping the graph acyclic by construction or by a
prior ``reaches`` check:

* ``fuse_into_consumers(p)``: the priority-fusion step. ``p``'s ops are put
  into every consumer (copied when there are several, see Note [duplicated
  ops]) and ``p`` disappears; its values become internal everywhere. This
  cannot create a cycle: no node reads ``p``'s values any more.
* ``merge(a, b)``: multi-output fusion; ``a`` is absorbed by ``b`` and the
  values still read outside stay outputs. The caller checks ``reaches``.

Note [pruning reaches by position]
The block is in topological order, so a value's provider has an op before the op reading it:
on an edge ``x -> y``, ``x.first < y.last``. That bounds only one step back: a merged node
may hold ops far apart (a multi-output fusion of ops 324 and 387), a path may enter it at
its late op and leave at its early one, and a node all of whose ops come after ``target``'s
may still feed it. So the bound follows the spans: the node before ``target`` starts before
``b = target.last``; any node starting before ``b`` ends by ``max(last of the nodes starting
before b)``, and the node before it starts before that. At the fixed point of this, every
node on a path to ``target`` starts before ``b``; ``_spans`` answers the maximum from a
prefix-maximum tree, updated as merges widen nodes (entries of nodes merged away stay:
they only make the bound larger, never wrong).

Note [duplicated ops]
An op fused into several consumers is listed in each of them; the ops are
shared references, cloned only when a fusion is outlined. No value of a
duplicated op is ever provided to anyone any more, so every node reading it
holds its own copy, and merging two nodes that both hold it keeps one.
"""
from __future__ import annotations

from stablehlo.ir.core import Block, Operation, Value
from stablehlo.text.names import printed_names
from xla_core.fusion.codegen_hook import GENERATE_ALL, CodegenHook

TERMINATOR = "it is the block's terminator"


class FusionNode:
    """A group of ops of one block; ``ops`` are in block order."""
    __slots__ = (
        "first",
        "flops",
        "fusible",
        "id",
        "inputs",
        "last",
        "op_set",
        "ops",
        "outputs",
        "summary",
        "tainted",
        "version",
        "why_not",
    )

    def __init__(self, node_id: int, op: Operation, index: int, inputs: dict,
                 why_not: str | None):
        self.id = node_id
        self.ops: list[Operation] = [op]
        self.op_set: set[Operation] = {op}
        self.inputs: dict[Value, None] = inputs
        self.outputs: dict[Value, None] = {}
        self.fusible = why_not is None
        self.why_not = why_not
        self.first = index          # smallest block index of its ops
        self.last = index           # largest block index: the root's position
        self.version = 0            # bumped on every change (stale heap entries)
        self.summary = None         # legality caches, reset on change
        self.tainted = None
        self.flops: float | None = None  # total over ops, computed when first needed

    @property
    def root(self) -> Operation:
        """The op that comes last in the block (the consumer everything fused into)."""
        return self.ops[-1]

    def is_fusion(self) -> bool:
        return len(self.ops) > 1

    def __repr__(self) -> str:
        return f"<FusionNode #{self.id} {[op.name for op in self.ops]}>"


def _outermost(block: Block) -> Operation:
    """The op at the top of ``block``'s parents (the module op inside a module)."""
    op = block.parent.parent
    while op.parent is not None:  # op -> its block -> that block's region -> the region's op
        op = op.parent.parent.parent
    return op


class FusionGraph:
    """Nodes, value users and value providers of one block."""

    def __init__(self, block: Block, why_not_fusible, flops, names: dict | None = None,
                 codegen: CodegenHook = GENERATE_ALL):
        """``why_not_fusible(op)`` returns None for an op that may join fusions, else a
        reason; ``flops(op)`` is an op's cost in flops (summed per node). ``names`` (value ->
        ``"%3"``) name values in explanations and refusal reasons: the printer's names of the
        module before fusion (``printed_names``); None numbers from the outermost op now.
        ``codegen``: the backend's hook (codegen_hook.py), which legality asks what a fusion
        may hold besides ``why_not_fusible``."""
        self.block = block
        self.codegen = codegen
        self.names = names if names is not None else printed_names(_outermost(block))
        self._flops = flops
        self.index: dict[Operation, int] = {}
        self.nodes: dict[int, FusionNode] = {}
        self.users: dict[Value, dict[FusionNode, None]] = {}
        self.provider: dict[Value, FusionNode] = {}
        self.terminator: Operation | None = None
        self.async_bounds: dict | None = None  # legality.async_bounds, once asked
        self._spans = _PrefixMax(len(block.operations))  # first -> last of every node
        for i, op in enumerate(block.operations):
            self.index[op] = i
            is_terminator = i == len(block.operations) - 1 and op.name.endswith("return")
            why_not = TERMINATOR if is_terminator else \
                why_not_fusible(op) or codegen.why_not_op(op)
            if is_terminator:
                self.terminator = op
            node = FusionNode(i, op, i, dict.fromkeys(values_read(op)), why_not)
            self.nodes[i] = node
            for v in node.inputs:
                self.users.setdefault(v, {})[node] = None
            for r in op.results:
                self.provider[r] = node
            self._spans.raise_to(i, i)
        for node in self.nodes.values():
            node.outputs = {r: None for r in node.ops[0].results if r in self.users}

    # -- queries -------------------------------------------------------------

    def consumers(self, node: FusionNode) -> list[FusionNode]:
        """Nodes reading any of ``node``'s outputs (a deterministic order: dicts keep
        insertion order)."""
        seen: dict[FusionNode, None] = {}
        for v in node.outputs:
            seen.update(self.users.get(v, {}))
        return list(seen)

    def producers(self, node: FusionNode) -> list[FusionNode]:
        """Nodes providing ``node``'s inputs (block arguments have none)."""
        seen: dict[FusionNode, None] = {}
        for v in node.inputs:
            p = self.provider.get(v)
            if p is not None:
                seen[p] = None
        return list(seen)

    def reaches(self, starts: list[FusionNode], target: FusionNode) -> bool:
        """Whether a path (of no edges when ``target`` is among them) leads from a node of
        ``starts`` to ``target``. See Note [pruning reaches by position]."""
        bound = self._feeding_bound(target)
        stack, seen = list(starts), set(starts)
        while stack:
            node = stack.pop()
            if node is target:
                return True
            for c in self.consumers(node):
                if c not in seen and (c is target or c.first < bound):
                    seen.add(c)
                    stack.append(c)
        return False

    def _feeding_bound(self, target: FusionNode) -> int:
        """A block position that the first op of every node on a path to ``target`` comes
        before: the fixed point of ``b -> max(last of the nodes starting before b)``, from
        ``target.last`` on."""
        bound = target.last
        while True:
            further = self._spans.max_before(bound)
            if further <= bound:
                return bound
            bound = further

    def flops(self, node: FusionNode) -> float:
        if node.flops is None:
            node.flops = sum(self._flops(op) for op in node.ops)
        return node.flops

    def alive(self) -> list[FusionNode]:
        return sorted(self.nodes.values(), key=lambda n: (n.last, n.id))

    # -- merging -------------------------------------------------------------

    def fuse_into_consumers(self, producer: FusionNode) -> list[FusionNode]:
        """Put ``producer`` into each of its consumers; returns them (now changed)."""
        consumers = self.consumers(producer)
        for c in consumers:
            new_inputs = {v: None for v in c.inputs if v not in producer.outputs}
            new_inputs.update(producer.inputs)
            c.inputs = new_inputs
            self._add_ops(c, producer)
            for v in producer.inputs:
                self.users[v][c] = None
        for v in producer.inputs:
            del self.users[v][producer]
        for v in producer.outputs:
            del self.users[v]
            del self.provider[v]
        self._remove(producer)
        return consumers

    def merged_inputs(self, a: FusionNode, b: FusionNode) -> dict:
        """Inputs of ``a`` and ``b`` merged (values flowing between them drop out)."""
        merged = {v: None for v in a.inputs if v not in b.outputs}
        merged.update((v, None) for v in b.inputs if v not in a.outputs)
        return merged

    def merged_outputs(self, a: FusionNode, b: FusionNode) -> dict:
        """Outputs of ``a`` and ``b`` merged that something else still reads."""
        return {v: None for v in (*a.outputs, *b.outputs)
                if any(u is not a and u is not b for u in self.users[v])}

    def merge(self, a: FusionNode, b: FusionNode) -> FusionNode:
        """Absorb ``a`` into ``b`` keeping every value read elsewhere (multi-output)."""
        inputs = self.merged_inputs(a, b)
        outputs = self.merged_outputs(a, b)
        for v in a.inputs:
            users = self.users[v]
            del users[a]
            if v not in b.outputs:      # else it flows b -> a, internal now
                users[b] = None
        for v in b.inputs:
            if v in a.outputs:          # flows a -> b, internal now
                del self.users[v][b]
        for v in a.outputs:
            self.provider[v] = b
        for v in (*a.outputs, *b.outputs):
            if v in self.users and not self.users[v]:
                del self.users[v]
                del self.provider[v]
        b.inputs, b.outputs = inputs, outputs
        self._add_ops(b, a)
        self._remove(a)
        return b

    def _add_ops(self, node: FusionNode, other: FusionNode) -> None:
        new = [op for op in other.ops if op not in node.op_set]
        if new:
            node.flops = self.flops(node) + sum(self._flops(op) for op in new)
            node.op_set.update(new)
            node.ops = sorted(node.ops + new, key=self.index.__getitem__)
        node.first = min(node.first, other.first)
        node.last = max(node.last, other.last)
        self._spans.raise_to(node.first, node.last)
        node.version += 1
        node.summary = node.tainted = None

    def _remove(self, node: FusionNode) -> None:
        del self.nodes[node.id]
        node.version += 1


class _PrefixMax:
    """Maxima of values at positions ``0..n-1`` that only ever rise: a Fenwick tree whose
    queries are "the largest value at a position before ``i``" (-1 when none)."""

    def __init__(self, n: int):
        self.tree = [-1] * (n + 1)

    def raise_to(self, position: int, value: int) -> None:
        i = position + 1
        while i < len(self.tree):
            if self.tree[i] < value:
                self.tree[i] = value
            i += i & -i

    def max_before(self, position: int) -> int:
        best, i = -1, position
        while i > 0:
            best = max(best, self.tree[i])
            i -= i & -i
        return best


def values_read(op: Operation) -> list[Value]:
    """Operands, then values an op's regions capture from outside it."""
    if not op.regions:
        return list(op.operands)
    inner: set[Value] = set()
    captured: list[Value] = []
    for nested in op.walk():
        for region in nested.regions:
            for block in region.blocks:
                inner.update(block.arguments)
        inner.update(nested.results)
    for nested in op.walk():
        if nested is op:
            continue
        captured.extend(v for v in nested.operands if v not in inner)
    return list(op.operands) + captured
