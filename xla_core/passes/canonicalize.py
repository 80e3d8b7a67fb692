"""canonicalize: rewrite ops into one normal form each, as MLIR's canonicalizer does.

The rules (canonicalize_rules.py) put constants on the right of commutative
ops and compares, fold ``not`` into a select by swapping its branches, spell
shape ops that move no data as ``reshape``, forward ``get_tuple_element`` of
a ``tuple``, and turn a reduce over extent-1 dimensions into the elementwise
op it applies. Later passes then match one spelling only: the algebraic
simplifier's identities see the constant on the right, cse merges
``add(c, x)`` with ``add(x, c)``, fusion sees free reshapes instead of
copies. Every rewrite is exact (bit-identical results).

The sweeps are rewrite_driver.py's: each function is rewritten until a
sweep changes nothing or ``max_iterations`` sweeps have run.
"""
from __future__ import annotations

from dataclasses import dataclass

from stablehlo.ir.core import Module
from xla_core.passes.base import Pass, PassContext
from xla_core.passes.canonicalize_rules import ERASABLE, RULES
from xla_core.passes.rewrite_driver import RuleSet, sweep

_RULES = RuleSet("canonicalize", RULES, ERASABLE)


@dataclass(frozen=True)
class CanonicalizePass(Pass):
    name = "canonicalize"
    max_iterations: int = 10

    def run(self, module: Module, ctx: PassContext) -> bool:
        changed = False
        for func in module.functions():
            if func.body is None:
                continue
            for _ in range(self.max_iterations):
                if not sweep(func.op, _RULES):
                    break
                changed = True
        return changed
