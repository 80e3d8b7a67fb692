"""algebraic-simplifier: algebraic simplification, in the spirit of XLA's AlgebraicSimplifier.

Local rewrites from the rule table in algebraic_simplifier_rules.py (identities such as
``multiply(x, 1) -> x``, and collapsing chains of shape ops such as
``transpose(transpose(x))``) run over every function, nested regions
included, until nothing changes or ``max_iterations`` sweeps have run. The
sweeps are rewrite_driver.py's.

Every rewrite is exact: the simplified program gives bit-identical results
for every input (quiet NaNs keep their payloads, signed zeros their signs;
see Note [exact identities] in algebraic_simplifier_rules.py for what that rules
out, e.g. ``x + 0.0`` on floats, and for the one caveat, signaling NaNs).
"""
from __future__ import annotations

from dataclasses import dataclass

from stablehlo.ir.core import Operation
from xla_core.passes.algebraic_simplifier_rules import ERASABLE, RULES
from xla_core.passes.base import Pass, PassContext
from xla_core.passes.rewrite_driver import RuleSet, sweep


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


_RULES = RuleSet("algebraic-simplifier", RULES, ERASABLE)


def _sweep(func_op: Operation) -> bool:
    """One pass of every rule over ``func_op``; returns whether anything changed."""
    return sweep(func_op, _RULES)
