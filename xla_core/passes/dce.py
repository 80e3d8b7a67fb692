"""dce: remove ops whose results are unused and that have no side effects,
then private functions that nothing refers to any more.

An op is removable when none of its results has a use and it is pure: its
op definition declares no effect (``op_effects``: no I/O, hidden state,
communication, barrier or async pairing; a custom_call only when it has
``has_side_effect = true``) and its nested ops are all pure too. A
``func.call`` or ``stablehlo.composite`` is as pure as the function it names
(recursion counts as impure). Unregistered ops are kept. Removal runs bottom-up over each
block with live use counts, so a whole dead chain goes in one sweep, and uses
inside regions (implicit capture) keep outer values alive.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from stablehlo.ir.attributes import SymbolRefAttr
from stablehlo.ir.core import Block, Module, Operation
from stablehlo.ir.ops.base import TERMINATOR, Effect, op_effects

from xla_core.ir_utils import remove_dead_private_functions
from xla_core.passes.base import Pass, PassContext

@dataclass(frozen=True)
class DcePass(Pass):
    name = "dce"

    def run(self, module: Module, ctx: PassContext) -> bool:
        purity = Purity(module)
        changed = False
        for func in module.functions():
            if func.body is None:
                continue
            uses = Counter(v for op in func.op.walk() for v in op.operands)
            changed |= _sweep_block(func.body, uses, purity)
        changed |= remove_dead_private_functions(module)
        return changed


def _sweep_block(block: Block, uses: Counter, purity: "Purity") -> bool:
    changed = False
    kept = []
    for op in reversed(block.operations):
        if _is_dead(op, uses, purity):
            for inner in op.walk():
                uses.subtract(inner.operands)
            op.parent = None
            changed = True
            continue
        for region in op.regions:
            for inner_block in reversed(region.blocks):
                changed |= _sweep_block(inner_block, uses, purity)
        kept.append(op)
    if changed:
        block.operations[:] = kept[::-1]
    return changed


def _is_dead(op: Operation, uses: Counter, purity: "Purity") -> bool:
    if any(uses[r] > 0 for r in op.results):
        return False
    opdef = op.opdef
    if opdef is not None and opdef.has(TERMINATOR):
        return False
    return purity.is_pure(op)


class Purity:
    """Memoized purity of ops and of the functions calls refer to."""

    def __init__(self, module: Module):
        self._funcs = {f.name: f for f in module.functions()}
        self._memo: dict[str, bool] = {}

    def is_pure(self, op: Operation) -> bool:
        if op.name in ("func.call", "stablehlo.composite"):
            key = "callee" if op.name == "func.call" else "decomposition"
            target = op.attributes.get(key)
            if not isinstance(target, SymbolRefAttr) or not self.function_is_pure(target.name):
                return False
        elif op_effects(op) != Effect.PURE:
            return False
        return all(self.is_pure(inner) for region in op.regions
                   for block in region.blocks for inner in block.operations)

    def function_is_pure(self, name: str) -> bool:
        if name not in self._memo:
            func = self._funcs.get(name)
            if func is None or func.body is None:
                return False
            self._memo[name] = False  # in progress: recursion counts as impure
            self._memo[name] = all(self.is_pure(op) for op in func.body.operations)
        return self._memo[name]
