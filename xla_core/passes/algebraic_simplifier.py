"""algebraic-simplifier: algebraic simplification, in the spirit of XLA's AlgebraicSimplifier.

Local rewrites from the rule table in algebraic_simplifier_rules.py (identities such as
``multiply(x, 1) -> x``, and collapsing chains of shape ops such as
``transpose(transpose(x))``) run over every function, nested regions
included, until nothing changes or ``max_iterations`` sweeps have run.

Every rewrite is exact: the simplified program gives bit-identical results
for every input (quiet NaNs keep their payloads, signed zeros their signs;
see Note [exact identities] in algebraic_simplifier_rules.py for what that rules
out, e.g. ``x + 0.0`` on floats, and for the one caveat, signaling NaNs).

One sweep visits the ops of each block in order, outer blocks before the
blocks nested in them, so every use of a value comes after its definition:
operands are redirected to their replacements as the sweep reaches them, and
a whole chain (``negate(negate(negate(negate(x))))``) goes in one sweep.
New ops (a composed transpose, a single convert) go right before the op they
replace. At the end of each sweep the ops that were replaced, and the ops
feeding them that lost their last use, are erased when they are among the
pure, region-free ops the rules know (``ERASABLE``); anything else that became
dead is left to ``dce``.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from stablehlo.ir.core import Block, Operation, Value
from stablehlo.ir.ops import OPS
from xla_core.ir_utils import blocks_of, resolve
from xla_core.passes.algebraic_simplifier_rules import ERASABLE, RULES
from xla_core.passes.base import Pass, PassContext, PassError


@dataclass(frozen=True)
class AlgebraicSimplifierPass(Pass):
    """Rewrites each function to a fixpoint of the rules, with at most
    ``max_iterations`` sweeps (one normally gets there, a second confirms)."""
    name = "algebraic-simplifier"
    max_iterations: int = 10

    def run(self, module, ctx: PassContext) -> bool:
        changed = False
        for func in module.functions():
            if func.body is None:
                continue
            for _ in range(self.max_iterations):
                if not _sweep(func.op):
                    break
                changed = True
        return changed


class _Creator:
    """What a rule calls to build an op; the driver inserts the ops it made
    before the op being rewritten only when the rule's result is taken."""

    def __init__(self):
        self.pending: list[Operation] = []

    def __call__(self, name: str, operands: list, like: Operation, properties=None) -> Value:
        """A new ``name`` op of ``like``'s result type and location, with
        ``like``'s attributes overridden by ``properties``; verified at once so
        that a wrong rule fails here, naming the op it built."""
        attributes = dict(like.attributes)
        attributes.update(properties or {})
        op = Operation(name, operands, [like.result.type], attributes, (), like.location)
        OPS.get(name).verify(op)
        self.pending.append(op)
        return op.result


def _rules_by_op() -> dict[str, list]:
    by_op: dict[str, list] = {}
    for name, rule in RULES:
        by_op.setdefault(name, []).append(rule)
    return by_op


_BY_OP = _rules_by_op()


def _sweep(func_op: Operation) -> bool:
    """One pass of every rule over ``func_op``; returns whether anything changed."""
    replacements: dict[Value, Value] = {}
    replaced: list[Operation] = []
    for block in list(blocks_of(func_op)):
        _sweep_block(block, replacements, replaced)
    if replaced:
        _erase_dead(func_op, replaced)
    return bool(replaced)


def _sweep_block(block: Block, replacements: dict, replaced: list) -> None:
    kept: list[Operation] = []
    for op in block.operations:
        if replacements and any(v in replacements for v in op.operands):
            op.operands = [resolve(v, replacements) for v in op.operands]
        for rule in _BY_OP.get(op.name, ()):
            create = _Creator()
            value = rule(op, create)
            if value is None:
                continue
            if value.type != op.result.type:
                raise PassError(f"algebraic-simplifier rule {rule.__name__} replaced {op.where()} of type "
                                f"{op.result.type} by a value of type {value.type}")
            for new_op in create.pending:
                new_op.parent = block
            kept.extend(create.pending)
            replacements[op.result] = value
            replaced.append(op)
            break
        kept.append(op)
    block.operations[:] = kept


def _erase_dead(func_op: Operation, replaced: list) -> None:
    """Erase the replaced ops, then the ops that fed only them, transitively,
    as long as they are unused and in ``ERASABLE``."""
    uses = Counter(v for op in func_op.walk() for v in op.operands)
    dead: set[Operation] = set()
    work = list(replaced)
    while work:
        op = work.pop()
        if op in dead or op.name not in ERASABLE:
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
