"""Sizes, dependencies and live ranges of the values of one block.

``BlockGraph`` numbers the values an op of the block defines (``vid`` 0..V-1)
and records, per op (program order, ``index`` 0..N-1):

* ``uses[i]``: the distinct values of this block the op reads, counting values
  read anywhere inside its regions (implicit capture): a value used in a
  while body is used by the while op;
* ``defs[i]``: the values it defines; ``preds[i]``: the ops it must follow
  (defining ops of its uses, plus the previous op with an effect when the op
  has one, see Note [ordered ops], plus the ops of an async window, see Note
  [async windows]); the terminator must come last besides;
* ``scratch[i]``: bytes its nested computations need while it runs (the peak
  of a while/if/case body, of a called function), added at this op only;
* ``handover[i]``: bytes of its operands whose storage its results take over: an
  ``openhlo.async_done``'s future, the buffer the collective wrote, is its result,
  so at the done the two are one buffer, not both live. (Likewise an
  ``openhlo.async_start``'s region, the collective, writes into the start's future:
  it adds no scratch.)

Block arguments (function parameters, loop-carried values) and values captured
from enclosing blocks are not ours to free: they are live throughout and are
left out of the block's values. Values the terminator reads (the results) live
to the end. A value is live over ``[defining op position, last use position]``
in a schedule (inclusive), so an op's operands and results are live together;
a value nothing reads lives at its definition only.

Note [ordered ops]
An op with an effect (``dce``'s ``Purity`` says it is not pure: side effects,
collectives, custom calls, rng, ...) or one that touches a token keeps its
place relative to every other such op: each depends on the one before it.
The terminator stays last.

Note [async windows]
The ops between an ``openhlo.async_start`` and its ``openhlo.async_done`` are the work
that overlaps the collective (xla_core/spmd/async_collectives.py placed them there): each
follows the start, and the done follows each, so a memory schedule never moves work out
of the window (which would leave the collective nothing to overlap). A graph built with
``async_windows=False`` (the latency-hiding scheduler's, xla_core/scheduling) has neither
rule, and its dones leave the chain of Note [ordered ops] too (a done only waits; the
starts keep their order, which fixes the order every device's communication thread runs
the collectives in): the windows are then the scheduler's to choose.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from stablehlo.errors import OpenHLOError
from stablehlo.ir.attributes import SymbolRefAttr
from stablehlo.ir.core import Block, Module, Operation, Value
from stablehlo.ir.ops.async_collectives import ASYNC_DONE, ASYNC_START
from stablehlo.ir.ops.base import TERMINATOR
from stablehlo.ir.types import TensorType, TokenType, TupleType, Type
from xla_core.cost.estimates import CostModelError, type_bytes
from xla_core.passes.dce import Purity

FUSION = "openhlo.fusion"


class BuffersError(OpenHLOError):
    """A value whose size is unknown (dynamic shape) or an IR shape we cannot analyse."""


@lru_cache(maxsize=4096)
def _sized(t: Type) -> int | str:
    """``type_bytes`` memoized per type (programs repeat a few types), or why it fails."""
    try:
        return type_bytes(t)
    except CostModelError as exc:
        return str(exc)


def value_bytes(value: Value, op: Operation) -> int:
    """Bytes ``value`` occupies (tuples: their parts; tokens: 0); ``op`` is named on failure."""
    size = _sized(value.type)
    if isinstance(size, str):
        raise BuffersError(f"{op.where()}: cannot size {value.type}: {size}")
    return size


def same_storage(a: Type, b: Type) -> bool:
    """Whether element i of ``a`` and of ``b`` sit at the same bytes: same static shape and size."""
    if not (isinstance(a, TensorType) and isinstance(b, TensorType)) or a.shape != b.shape:
        return False
    size_a, size_b = _sized(a), _sized(b)
    return isinstance(size_a, int) and size_a == size_b


def _has_token(t: Type) -> bool:
    if isinstance(t, TokenType):
        return True
    return isinstance(t, TupleType) and any(_has_token(e) for e in t.types)


def module_of(op: Operation) -> Module | None:
    """The module ``op`` sits in, found through its parents."""
    while op is not None:
        if op.name == "builtin.module":
            return Module(op)
        block = op.parent
        region = block.parent if block is not None else None
        op = region.parent if region is not None else None
    return None


def is_fusion(op: Operation) -> bool:
    name = op.attributes.get("name")
    return op.name == "stablehlo.composite" and getattr(name, "value", None) == FUSION


@lru_cache(maxsize=None)
def _kernel_composites() -> frozenset:
    # imported here: the passes that build them import this module
    from stablehlo.attention import ATTENTION, ATTENTION_GRAD
    from xla_core.quantization.weight_only_dot import WEIGHT_ONLY_DOT
    return frozenset({ATTENTION, ATTENTION_GRAD, WEIGHT_ONLY_DOT})


def runs_as_one_kernel(op: Operation) -> bool:
    """A fusion, or a composite that the passes build only for backends with a kernel of its
    name (fuse-attention's flash attention, weight-only-dot): the temporaries of its
    decomposition (attention's L x L scores) never exist while it runs."""
    name = op.attributes.get("name")
    return is_fusion(op) or (op.name == "stablehlo.composite"
                             and getattr(name, "value", None) in _kernel_composites())


class NestedPeaks:
    """Memoized bytes the nested computations of an op need while it runs.

    A fusion or another composite run as one kernel needs nothing (its body lives in
    registers/thread-local storage: ``runs_as_one_kernel``); a region op needs the largest
    peak among its blocks; a call or another composite needs the peak of its callee's body.
    """

    def __init__(self, module: Module | None):
        self.purity = Purity(module) if module is not None else None
        self._funcs = {f.name: f for f in module.functions()} if module is not None else {}
        self._memo: dict[str, int] = {}
        self.pure_by_name: dict[str, bool] = {}  # region-free ops that name no function

    def of_op(self, op: Operation) -> int:
        peak = 0
        for region in op.regions:
            for block in region.blocks:
                peak = max(peak, self.of_block(block))
        if op.name in ("func.call", "stablehlo.composite") and not runs_as_one_kernel(op):
            target = op.attributes.get("callee" if op.name == "func.call" else "decomposition")
            if isinstance(target, SymbolRefAttr):
                peak = max(peak, self.of_function(target.name))
        return peak

    def of_function(self, name: str) -> int:
        if name not in self._memo:
            func = self._funcs.get(name)
            self._memo[name] = 0  # in progress: a recursive call adds nothing more
            if func is not None and func.body is not None:
                self._memo[name] = self.of_block(func.body)
        return self._memo[name]

    def of_block(self, block: Block) -> int:
        graph = BlockGraph(block, self)
        return graph.peak(range(len(graph.ops)))


@dataclass
class BlockGraph:
    """Values, uses, dependencies and scratch of one block (see the module doc)."""
    block: Block
    nested: NestedPeaks
    async_windows: bool = True               # Note [async windows]
    ops: list = field(init=False)
    vid: dict = field(init=False)            # Value -> vid
    values: list = field(init=False)         # vid -> Value
    sizes: list = field(init=False)          # vid -> bytes
    def_op: list = field(init=False)         # vid -> op index
    users: list = field(init=False)          # vid -> op indices (distinct, ascending)
    uses: list = field(init=False)
    defs: list = field(init=False)
    preds: list = field(init=False)
    scratch: list = field(init=False)
    ordered: list = field(init=False)        # op index -> has an effect (Note [ordered ops])
    def_bytes: list = field(init=False)      # op index -> bytes of its results
    handover: list = field(init=False)       # op index -> operand bytes its results reuse
    terminator: int | None = field(init=False)

    def __post_init__(self):
        self.ops = list(self.block.operations)
        self.vid, self.values, self.sizes, self.def_op = {}, [], [], []
        self.uses, self.defs, self.preds, self.scratch, self.ordered = [], [], [], [], []
        last = self.ops[-1] if self.ops else None
        self.terminator = (len(self.ops) - 1 if last is not None and last.opdef is not None
                           and last.opdef.has(TERMINATOR) else None)
        self.users = []
        previous_ordered = None
        open_starts: list[int] = []  # starts whose done has not come yet (Note [async windows])
        for index, op in enumerate(self.ops):
            used = self._uses_of(op)
            self.uses.append(used)
            for v in used:
                self.users[v].append(index)
            preds = {self.def_op[v] for v in used}
            self.ordered.append(self._is_ordered(op))
            if self.ordered[-1] and (self.async_windows or op.name != ASYNC_DONE):
                if previous_ordered is not None:
                    preds.add(previous_ordered)
                previous_ordered = index
            if self.async_windows:
                self._keep_in_windows(op, index, preds, open_starts)
            self.preds.append(sorted(preds))
            self.defs.append([self._define(r, index, op) for r in op.results])
            # a start's region is the collective writing into the start's future: no more
            self.scratch.append(0 if op.name == ASYNC_START else self.nested.of_op(op))
        self.def_bytes = [sum(self.sizes[v] for v in defs) for defs in self.defs]
        self.handover = [self.sizes[self.vid[op.operands[0]]]
                         if op.name == ASYNC_DONE and op.operands[0] in self.vid else 0
                         for op in self.ops]

    def _keep_in_windows(self, op: Operation, index: int, preds: set, open_starts: list) -> None:
        """Add the dependencies of Note [async windows] to ``preds`` (op ``index``)."""
        preds.update(open_starts)
        if op.name == ASYNC_DONE and op.operands[0] in self.vid:
            start = self.def_op[self.vid[op.operands[0]]]
            preds.update(range(start + 1, index))
            open_starts.remove(start)
        elif op.name == ASYNC_START:
            open_starts.append(index)

    def _define(self, value: Value, index: int, op: Operation) -> int:
        v = len(self.values)
        self.vid[value] = v
        self.values.append(value)
        self.sizes.append(value_bytes(value, op))
        self.def_op.append(index)
        self.users.append([])
        return v

    def _uses_of(self, op: Operation) -> list[int]:
        vid = self.vid
        used = {vid[v] for v in op.operands if v in vid}
        if op.regions:
            for inner in op.walk():
                used.update(vid[v] for v in inner.operands if v in vid)
        return sorted(used)

    def _is_ordered(self, op: Operation) -> bool:
        if not self._is_pure(op):
            return True
        return any(_has_token(v.type) for v in op.operands) or \
            any(_has_token(v.type) for v in op.results)

    def _is_pure(self, op: Operation) -> bool:
        purity = self.nested.purity
        if purity is None:
            return False
        if op.regions or op.name in ("func.call", "stablehlo.composite"):
            return purity.is_pure(op)
        memo = self.nested.pure_by_name
        if op.name not in memo:
            memo[op.name] = purity.is_pure(op)
        return memo[op.name]

    # -- schedules ---------------------------------------------------------

    def is_output(self, v: int) -> bool:
        users = self.users[v]  # ascending, so the terminator comes last
        return self.terminator is not None and bool(users) and users[-1] == self.terminator

    def live_ranges(self, order) -> list[tuple[int, int]]:
        """``[start, end]`` positions of every value in the schedule ``order``."""
        pos = [0] * len(self.ops)
        for k, i in enumerate(order):
            pos[i] = k
        ranges = []
        for v, users in enumerate(self.users):
            start = pos[self.def_op[v]]
            end = max((pos[u] for u in users), default=start)
            ranges.append((start, end))
        return ranges

    def peak(self, order) -> int:
        """Largest sum of live value bytes (plus scratch) at any op of ``order``."""
        order = list(order)
        pos = [0] * len(self.ops)
        for k, i in enumerate(order):
            pos[i] = k
        freed = [0] * len(order)  # bytes whose last reader is at each position
        sizes, def_op = self.sizes, self.def_op
        for v, users in enumerate(self.users):
            end = max([pos[u] for u in users]) if users else pos[def_op[v]]
            freed[end] += sizes[v]
        current = peak = 0
        def_bytes, scratch, handover = self.def_bytes, self.scratch, self.handover
        for k, i in enumerate(order):
            current += def_bytes[i]
            peak = max(peak, current + scratch[i] - handover[i])
            current -= freed[k]
        return peak

    def check_order(self, order) -> None:
        """Raise if ``order`` is not a permutation respecting every dependency."""
        pos = {i: k for k, i in enumerate(order)}
        if sorted(pos) != list(range(len(self.ops))):
            raise BuffersError("schedule is not a permutation of the block's ops")
        if self.terminator is not None and pos[self.terminator] != len(self.ops) - 1:
            raise BuffersError(f"{self.ops[self.terminator].where()}: terminator not last")
        for i, preds in enumerate(self.preds):
            for p in preds:
                if pos[p] >= pos[i]:
                    raise BuffersError(f"{self.ops[i].where()}: scheduled before "
                                       f"{self.ops[p].where()} it depends on")
