"""inline: replace ``func.call`` of private functions by the callee's body.

For every call (at any nesting depth, e.g. inside a reduce_window body) whose
callee is a private, non-recursive function with a single-block body ending in
``func.return``, the body's ops are cloned in front of the call with the
callee's arguments mapped to the call's operands, and the call's results are
replaced by the returned values. Inlined ops may contain calls themselves;
they are inlined in turn (this terminates because recursive callees are never
inlined). Afterwards private functions that are no longer referenced are
erased, as MLIR's inliner does, so ``stablehlo-opt -inline`` on a conformance
program leaves only ``@main``.

Calls marked ``no_inline`` and calls to public functions stay as they are.
"""
from __future__ import annotations

from dataclasses import dataclass

from stablehlo.ir.attributes import SymbolRefAttr
from stablehlo.ir.core import Block, Func, Module, Operation

from xla_core.ir_utils import (clone_operation, remove_dead_private_functions, replace_uses,
                               resolve)
from xla_core.passes.base import Pass, PassContext


@dataclass(frozen=True)
class InlinePass(Pass):
    name = "inline"

    def run(self, module: Module, ctx: PassContext) -> bool:
        funcs = {f.name: f for f in module.functions()}
        inlinable = {name for name, f in funcs.items() if _can_inline_body(f)}
        inlinable -= _recursive_functions(funcs)
        changed = False
        for func in funcs.values():
            replacements: dict = {}
            if func.body is not None:
                changed |= _inline_in_block(func.body, funcs, inlinable, replacements)
            replace_uses(func.op, replacements)
        if changed:
            remove_dead_private_functions(module)
        return changed


def _can_inline_body(func: Func) -> bool:
    region = func.op.regions[0] if func.op.regions else None
    if func.visibility != "private" or region is None or len(region.blocks) != 1:
        return False
    terminator = region.blocks[0].terminator
    return terminator is not None and terminator.name == "func.return"


def _callee(op: Operation) -> str | None:
    if op.name != "func.call":
        return None
    callee = op.attributes.get("callee")
    return callee.name if isinstance(callee, SymbolRefAttr) and not callee.nested else None


def _recursive_functions(funcs: dict[str, Func]) -> set[str]:
    """Functions that can reach themselves through calls."""
    edges = {name: {_callee(op) for op in f.op.walk()} - {None} for name, f in funcs.items()}
    recursive = set()
    for start in funcs:
        seen, stack = set(), list(edges[start])
        while stack:
            name = stack.pop()
            if name == start:
                recursive.add(start)
                break
            if name in seen or name not in edges:
                continue
            seen.add(name)
            stack.extend(edges[name])
    return recursive


def _inline_in_block(block: Block, funcs: dict, inlinable: set, replacements: dict) -> bool:
    changed = False
    i = 0
    while i < len(block.operations):
        op = block.operations[i]
        callee = _callee(op)
        if callee in inlinable and "no_inline" not in op.attributes:
            _splice_call(block, i, op, funcs[callee], replacements)
            changed = True
            continue  # the first inlined op now sits at index i; look at it next
        for region in op.regions:
            for inner in region.blocks:
                changed |= _inline_in_block(inner, funcs, inlinable, replacements)
        i += 1
    return changed


def _splice_call(block: Block, index: int, call: Operation, callee: Func,
                 replacements: dict) -> None:
    """Put a copy of ``callee``'s body in place of ``call`` at ``block[index]``."""
    body = callee.body
    mapping = {arg: resolve(v, replacements) for arg, v in zip(body.arguments, call.operands)}
    clones = [clone_operation(op, mapping) for op in body.operations[:-1]]
    returned = [mapping.get(v, v) for v in body.terminator.operands]
    for clone in clones:
        clone.parent = block
    block.operations[index:index + 1] = clones
    call.parent = None
    for result, value in zip(call.results, returned):
        replacements[result] = value
