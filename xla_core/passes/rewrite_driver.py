"""The driver shared by the rule-table passes (algebraic-simplifier, canonicalize).

A rule takes the op to rewrite and ``create`` (which builds a new op right
before it) and returns the value that replaces the op's one result, or None
when it does not apply. The value must have the op's exact result type; the
driver raises naming the rule if it does not.

One sweep visits the ops of each block in order, outer blocks before the
blocks nested in them, so every use of a value comes after its definition:
operands are redirected to their replacements as the sweep reaches them, and
a whole chain (``negate(negate(negate(negate(x))))``) goes in one sweep.
New ops go right before the op they replace. At the end of each sweep the
ops that were replaced, and the ops feeding them that lost their last use,
are erased when they are among the pure, region-free ops the rules know
(``erasable``); anything else that became dead is left to ``dce``.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from stablehlo.ir.core import Block, Operation, Value
from stablehlo.ir.ops import OPS
from stablehlo.ir.types import Type
from xla_core.ir_utils import blocks_of, resolve
from xla_core.passes.base import PassError


class Creator:
    """What a rule calls to build an op; the driver inserts the ops it made
    before the op being rewritten only when the rule's result is taken."""

    def __init__(self):
        self.pending: list[Operation] = []

    def __call__(self, name: str, operands: list, like: Operation, properties=None,
                 result_type: Type | None = None) -> Value:
        """A new ``name`` op with ``like``'s location, ``like``'s attributes if
        it is a ``name`` op too (overridden by ``properties``), and ``like``'s
        result type unless ``result_type`` is given; verified at once so that
        a wrong rule fails here, naming the op it built."""
        attributes = dict(like.attributes) if name == like.name else {}
        attributes.update(properties or {})
        op = Operation(name, operands, [result_type or like.result.type], attributes, (),
                       like.location)
        OPS.get(name).verify(op)
        self.pending.append(op)
        return op.result


class RuleSet:
    """A pass's rules grouped by the op name they match, plus what it may erase."""

    def __init__(self, pass_name: str, rules: Iterable[tuple[str, Callable]],
                 erasable: frozenset):
        self.pass_name = pass_name
        self.by_op: dict[str, list[Callable]] = {}
        for name, rule in rules:
            self.by_op.setdefault(name, []).append(rule)
        self.erasable = erasable


def sweep(func_op: Operation, rules: RuleSet) -> bool:
    """One pass of every rule over ``func_op``; returns whether anything changed."""
    replacements: dict[Value, Value] = {}
    replaced: list[Operation] = []
    for block in list(blocks_of(func_op)):
        _sweep_block(block, rules, replacements, replaced)
    if replaced:
        _erase_dead(func_op, replaced, rules.erasable)
    return bool(replaced)


def _sweep_block(block: Block, rules: RuleSet, replacements: dict, replaced: list) -> None:
    kept: list[Operation] = []
    by_op = rules.by_op
    for op in block.operations:
        if replacements and any(v in replacements for v in op.operands):
            op.operands = [resolve(v, replacements) for v in op.operands]
        op_rules = by_op.get(op.name)
        if op_rules is not None:
            _apply_first(op, op_rules, rules.pass_name, block, kept, replacements, replaced)
        kept.append(op)
    if len(kept) != len(block.operations) or replaced:
        block.operations[:] = kept


def _apply_first(op: Operation, op_rules: list, pass_name: str, block: Block, kept: list,
                 replacements: dict, replaced: list) -> None:
    """Apply the first of ``op_rules`` that matches ``op``; its new ops go to ``kept``."""
    create = Creator()
    for rule in op_rules:
        value = rule(op, create)
        if value is None:
            create.pending.clear()  # a rule may build ops and then decline
            continue
        result = op.results[0]
        if value.type != result.type:
            raise PassError(f"{pass_name} rule {rule.__name__} replaced {op.where()} "
                            f"of type {result.type} by a value of type {value.type}")
        for new_op in create.pending:
            new_op.parent = block
        kept.extend(create.pending)
        replacements[result] = value
        replaced.append(op)
        return


def _erase_dead(func_op: Operation, replaced: list, erasable: frozenset) -> None:
    """Erase the replaced ops, then the ops that fed only them, transitively,
    as long as they are unused and in ``erasable``."""
    uses = Counter(v for op in func_op.walk() for v in op.operands)
    dead: set[Operation] = set()
    work = list(replaced)
    while work:
        op = work.pop()
        if op in dead or op.name not in erasable:
            continue
        if any(uses[r] > 0 for r in op.results):
            continue
        dead.add(op)
        uses.subtract(op.operands)
        work.extend(v.owner for v in op.operands if isinstance(v.owner, Operation))
    for block in {op.parent for op in dead}:
        block.operations[:] = [op for op in block.operations if op not in dead]
    for op in dead:
        op.parent = None
