"""collective-pipeliner: collectives of a loop over layers moved one iteration early or late.

A scan over stacked layers partitioned with FSDP shardings gathers each layer's weights at
the top of the iteration that uses them, and reduces each layer's weight gradient at the
bottom of the iteration that computed it: either way the layer's compute waits for the
network. Moving the collective across the iteration boundary lets it run during another
layer's compute (XLA's collective_pipeliner; its directions are named the other way round).

* **forward mode** (all_gather): an all_gather whose operand is computed, in the body, only
  from the induction variable, loop-invariant carried values, constants and values from
  outside the loop (``dynamic_slice(stacked_weights, i)``), is computed for iteration i+1
  at the top of iteration i: a prologue before the loop gathers iteration 0's, the loop
  carries the gathered value to the iteration that uses it. The last iteration is peeled
  (the loop runs one trip fewer and a copy of the original body follows it, using the
  carried value), so nothing gathers past the end.
* **backward mode** (reduce_scatter, all_reduce): a collective whose result only feeds,
  through ops that read nothing else computed in the iteration (a transpose, a reshape),
  the update of a ``dynamic_update_slice`` into a carried accumulator that nothing else
  reads, is finished in the next iteration: the loop carries the unreduced value and the
  update's indices, iteration i+1 starts the collective at its top and writes the
  accumulator at its bottom. The first iteration is peeled (a copy of the body without the
  collective precedes the loop, which starts one step later), and an epilogue after the
  loop finishes the last.

The moved collectives (prologue, loop and epilogue copies) carry the ``openhlo.pipelined``
marker, so the combiners never merge them with collectives that were not moved. Each
collective runs on the same values as before and the accumulator is written in the same
order, so results are bit-identical. Only counted loops are pipelined (``counted_while``:
a constant start, step and limit); loops of unknown trip count, or of fewer than two trips,
where nothing would overlap, are left alone. A loop with both kinds is pipelined forward,
then backward (each peel costs one trip). The ``all-gather`` and ``reduce`` options turn
the two modes off.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from stablehlo.ir.attributes import UnitAttr, dense
from stablehlo.ir.core import Module, Operation, Value
from stablehlo.ir.ops.base import Effect, op_effects
from stablehlo.ir.types import numpy_dtype

from xla_core.cost.estimates import CountedWhile, counted_while
from xla_core.ir_utils import clone_operation, replace_uses
from xla_core.passes.base import Pass, PassContext
from xla_core.spmd.combiner import ALL_GATHER, ALL_REDUCE, PIPELINED, REDUCE_SCATTER, WHILE

DYNAMIC_UPDATE_SLICE = "stablehlo.dynamic_update_slice"
CONSTANT = "stablehlo.constant"


@dataclass(frozen=True)
class CollectivePipelinerPass(Pass):
    name = "collective-pipeliner"
    all_gather: bool = True
    reduce: bool = True

    def run(self, module: Module, ctx: PassContext) -> bool:
        changed = False
        for func in module.functions():
            if func.body is None:
                continue
            # inner loops first: an outer loop's peeled copies then copy them pipelined
            loops = [op for op in func.body.walk() if op.name == WHILE]
            for loop in reversed(loops):
                if self.all_gather:
                    loop, done = _pipeline_gathers(loop, func.op)
                    changed |= done
                if self.reduce:
                    changed |= _pipeline_reductions(loop, func.op)
        return changed


class _Body:
    """Facts about one loop body: what each value is across iterations."""

    def __init__(self, loop: Operation, counter: CountedWhile):
        self.loop, self.counter = loop, counter
        self.block = loop.regions[1].block
        self.cond = loop.regions[0].block
        results = self.block.terminator.operands
        self.invariant = {a for a, r in zip(self.block.arguments, results) if r is a}
        self.iv = self.block.arguments[counter.index]
        self.defined = set(self.block.arguments)
        for op in self.block.walk():
            self.defined.update(op.results)

    def steady(self, v: Value) -> bool:
        """Whether ``v`` is the same in every iteration and usable at any point of the body
        (an invariant carried value or a value from outside the loop)."""
        return v in self.invariant or v not in self.defined

    def users(self, v: Value) -> list:
        """The ops of the body (nested ones included, the terminator too) reading ``v``."""
        return [op for op in self.block.walk() if v in op.operands]

    def top_level(self, op: Operation) -> bool:
        return op.parent is self.block


def _pure(op: Operation) -> bool:
    return op_effects(op) == Effect.PURE and not op.regions


def _marked(op: Operation) -> Operation:
    op.attributes[PIPELINED] = UnitAttr()
    return op


def _constant(value: int, like: Value, loop: Operation) -> Operation:
    """``value`` typed as ``like``, at ``loop``'s place (the loop counter's arithmetic)."""
    t = like.type
    return Operation(CONSTANT, [], [t],
                     {"value": dense(np.array(value, numpy_dtype(t.element_type)), t)},
                     location=loop.location)


def _drop_dead(ops: list, live: set) -> list:
    """``ops`` without the pure ones whose results neither a later op of ``ops`` nor
    ``live`` reads."""
    used = set(live)
    kept = []
    for op in reversed(ops):
        if _pure(op) and not any(r in used for r in op.results):
            continue
        kept.append(op)
        used.update(v for inner in op.walk() for v in inner.operands)
    return kept[::-1]


def _rebuilt(loop: Operation, extra: list) -> Operation:
    """A while like ``loop`` carrying ``extra`` more values, taking over its regions, with
    a block argument per extra value in both regions."""
    new = Operation(WHILE, list(loop.operands) + list(extra),
                    loop.result_types + [v.type for v in extra], dict(loop.attributes),
                    location=loop.location)
    for region in list(loop.regions):
        for v in extra:
            region.block.add_argument(v.type)
        region.parent = None
        new.add_region(region)
    loop.regions = []
    return new


def _splice(loop: Operation, before: list, new: Operation, after: list) -> None:
    """Put ``before``, ``new`` and ``after`` where ``loop`` stands in its block."""
    block = loop.parent
    at = block.operations.index(loop)
    block.operations[at:at + 1] = before + [new] + after
    for op in before + [new] + after:
        op.parent = block


# ---- forward mode: gather the next iteration's operand -------------------------------------

def _gather_chain(body: _Body, gather: Operation) -> Optional[list]:
    """The body ops computing ``gather``'s operand, in body order, when they are pure and
    read only the induction variable, steady values and each other, the induction variable
    among them; else None."""
    chain, seen, uses_iv = set(), set(), False
    stack = list(gather.operands)
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if v is body.iv:
            uses_iv = True
        elif body.steady(v):
            continue
        elif v.is_block_argument or not body.top_level(v.owner) or not _pure(v.owner):
            return None
        else:
            chain.add(v.owner)
            stack.extend(v.owner.operands)
    if not uses_iv:  # the same gather every iteration: nothing to move ahead
        return None
    return [op for op in body.block.operations if op in chain]


def _pipeline_gathers(loop: Operation, root: Operation) -> tuple:
    """``loop`` (or the while replacing it) and whether it changed."""
    counter = counted_while(loop)
    if counter is None or counter.trips < 2:
        return loop, False
    body = _Body(loop, counter)
    matches = []
    for op in body.block.operations:
        if op.name == ALL_GATHER and PIPELINED not in op.attributes and len(op.results) == 1:
            chain = _gather_chain(body, op)
            if chain is not None:
                matches.append((op, chain))
    if not matches:
        return loop, False
    block, n = body.block, len(loop.operands)
    gathers = [g for g, _ in matches]

    # prologue: iteration 0's gathers, from the loop's operands
    prologue, mapping = [], dict(zip(block.arguments, loop.operands))
    firsts = []
    for gather, chain in matches:
        for op in chain + [gather]:
            prologue.append(clone_operation(op, mapping))
        firsts.append(_marked(prologue[-1]).results[0])
    new = _rebuilt(loop, firsts)

    # epilogue: the original body once more (the last trip), on the loop's results, reading
    # the carried gathers
    mapping = dict(zip(block.arguments, new.results))
    for j, gather in enumerate(gathers):
        mapping[gather.results[0]] = new.results[n + j]
    epilogue = [clone_operation(op, mapping) for op in block.operations[:-1]
                if op not in gathers]
    finals = [mapping.get(v, v) for v in block.terminator.operands]
    read = {v for op in root.walk() for v in op.operands}
    epilogue = _drop_dead(epilogue, {f for r, f in zip(loop.results, finals) if r in read})

    # the body: the carried gathers replace its own; the next trip's are started at its top
    step = _constant(counter.step, body.iv, loop)
    following = Operation("stablehlo.add", [body.iv, step.results[0]], [body.iv.type],
                          location=loop.location)
    top, mapping = [step, following], {body.iv: following.results[0]}
    nexts = []
    for gather, chain in matches:
        for op in chain + [gather]:
            top.append(clone_operation(op, mapping))
        nexts.append(_marked(top[-1]).results[0])
    carried = block.arguments[n:]
    replace_uses(new, {g.results[0]: a for g, a in zip(gathers, carried)})
    kept = [op for op in block.operations[:-1] if op not in gathers]
    block.operations[:] = top + _drop_dead(kept, set(block.terminator.operands)) + [
        block.terminator]
    for op in block.operations:
        op.parent = block
    block.terminator.operands.extend(nexts)

    # one trip fewer: the epilogue runs the last
    limit = _constant(counter.limit - counter.step, counter.compare.operands[1], loop)
    cond = counter.compare.parent
    cond.operations.insert(cond.operations.index(counter.compare), limit)
    limit.parent = cond
    counter.compare.operands[1] = limit.results[0]
    cond.operations[:] = _drop_dead(cond.operations[:-1], set(cond.terminator.operands)) + [
        cond.terminator]

    _splice(loop, prologue, new, epilogue)
    replace_uses(root, dict(zip(loop.results, finals)))
    return new, True


# ---- backward mode: finish the reduction in the next iteration ------------------------------

@dataclass
class _Finish:
    """A reduction and what writes its result into the accumulator: ``chain`` (ops between
    it and ``update``), the ``dynamic_update_slice``, and the accumulator's position."""
    collective: Operation
    chain: list
    update: Operation
    position: int


def _finish(body: _Body, collective: Operation) -> Optional[_Finish]:
    if len(collective.operands) != 1 or len(collective.results) != 1:
        return None
    v, chain = collective.results[0], []
    while True:
        users = body.users(v)
        if len(users) != 1 or not body.top_level(users[0]):
            return None
        user = users[0]
        if user.name == DYNAMIC_UPDATE_SLICE:
            return _into_accumulator(body, collective, chain, user, v)
        others = [u for u in user.operands if u is not v]
        if (len(user.results) != 1 or not _pure(user)
                or not all(body.steady(u) or _body_constant(body, u) for u in others)):
            return None
        chain.append(user)
        v = user.results[0]


def _body_constant(body: _Body, v: Value) -> bool:
    return not v.is_block_argument and v.owner.name == CONSTANT and body.top_level(v.owner)


def _into_accumulator(body: _Body, collective, chain, update, v) -> Optional[_Finish]:
    accumulator = update.operands[0]
    if update.operands[1] is not v or accumulator not in body.block.arguments[:len(
            body.loop.operands)] or accumulator in body.invariant:
        return None
    position = accumulator.index
    terminator = body.block.terminator
    if (body.users(accumulator) != [update] or body.users(update.results[0]) != [terminator]
            or terminator.operands.count(update.results[0]) != 1
            or terminator.operands[position] is not update.results[0]
            or body.cond.arguments[position] in
            {u for op in body.cond.operations for u in op.operands}):
        return None
    return _Finish(collective, chain, update, position)


def _pipeline_reductions(loop: Operation, root: Operation) -> bool:
    counter = counted_while(loop)
    if counter is None or counter.trips < 2:
        return False
    body = _Body(loop, counter)
    finishes = []
    for op in body.block.operations:
        if op.name in (ALL_REDUCE, REDUCE_SCATTER) and PIPELINED not in op.attributes:
            finish = _finish(body, op)
            if finish is not None:
                finishes.append(finish)
    if not finishes:
        return False
    block, n = body.block, len(loop.operands)
    terminator = block.terminator
    moved = {id(op) for f in finishes for op in [f.collective, *f.chain, f.update]}
    # per finish: the unreduced value, then the update's indices computed in the iteration
    indices = [[u for u in f.update.operands[2:]
                if not body.steady(u) and not _body_constant(body, u)] for f in finishes]
    pending = [v for f, idx in zip(finishes, indices) for v in [f.collective.operands[0], *idx]]

    # prologue: the first trip without the moved ops; its accumulators stay as they came
    mapping = dict(zip(block.arguments, loop.operands))
    for f in finishes:
        mapping[f.update.results[0]] = loop.operands[f.position]
    prologue = [clone_operation(op, mapping) for op in block.operations[:-1]
                if id(op) not in moved]
    start = _constant(counter.start + counter.step, loop.operands[counter.index], loop)
    inits = [mapping.get(v, v) for v in terminator.operands]
    inits[counter.index] = start.results[0]
    firsts = [mapping.get(v, v) for v in pending]
    prologue = _drop_dead(prologue, set(inits) | set(firsts)) + [start]
    new = _rebuilt(loop, firsts)
    new.operands[:n] = inits

    # the body: the previous trip's collectives at the top, their writes at the bottom
    carried = iter(block.arguments[n:])
    top, bottom, writes = [], [], {}
    for f, idx in zip(finishes, indices):
        mapping = {f.collective.operands[0]: next(carried)}
        mapping.update((u, next(carried)) for u in idx)
        top.append(_marked(clone_operation(f.collective, mapping)))
        bottom.extend(clone_operation(op, mapping) for op in f.chain + [f.update])
        writes[f.position] = mapping[f.update.results[0]]
    kept = [op for op in block.operations[:-1] if id(op) not in moved]
    block.operations[:] = top + kept + bottom + [terminator]
    for op in block.operations:
        op.parent = block
    for position, value in writes.items():
        terminator.operands[position] = value
    terminator.operands.extend(pending)

    # epilogue: the last trip's collectives and writes
    results = iter(new.results[n:])
    epilogue, finals = [], list(new.results[:n])
    for f, idx in zip(finishes, indices):
        mapping = dict(zip(block.arguments[:n], new.results[:n]))
        mapping[f.collective.operands[0]] = next(results)
        mapping.update((u, next(results)) for u in idx)
        for op in f.chain + [f.update]:
            for u in op.operands:
                if _body_constant(body, u) and u not in mapping:
                    epilogue.append(clone_operation(u.owner, mapping))
        epilogue.append(_marked(clone_operation(f.collective, mapping)))
        epilogue.extend(clone_operation(op, mapping) for op in f.chain + [f.update])
        finals[f.position] = epilogue[-1].results[0]

    _splice(loop, prologue, new, epilogue)
    replace_uses(root, dict(zip(loop.results, finals)))
    return True


__all__ = ["CollectivePipelinerPass"]
