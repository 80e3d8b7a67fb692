"""Small IR helpers the passes share: cloning, use replacement, symbol references.

The IR keeps no use lists, so "replace all uses" walks the ops of a scope
(usually one function) and rewrites operands through a mapping. Mappings are
chased (``a -> b -> c``) so a batch of replacements can be applied in one walk.
"""
from __future__ import annotations

import re
from typing import Iterator

from stablehlo.errors import ParseError
from stablehlo.ir.attributes import Attribute, OpaqueAttr, SymbolRefAttr, nested_values
from stablehlo.ir.core import Block, Module, Operation, Region, Value
from stablehlo.ir.sharding import ManualAxesAttr, MeshAttr, ShardingAttr, ShardingPerValueAttr
from stablehlo.text.parse_sharding import read_sdy_attribute


def clone_operation(op: Operation, mapping: dict) -> Operation:
    """A deep copy of ``op``; operands are looked up in ``mapping`` (old -> new).

    ``mapping`` gains entries for the results and block arguments of the copy,
    so ops cloned later in the same mapping see the cloned values.
    """
    new = Operation(op.name, [mapping.get(v, v) for v in op.operands], op.result_types,
                    dict(op.attributes), (), op.location)
    for old_result, new_result in zip(op.results, new.results):
        new_result.name_hint = old_result.name_hint
        mapping[old_result] = new_result
    for region in op.regions:
        new.add_region(clone_region(region, mapping))
    return new


def clone_region(region: Region, mapping: dict) -> Region:
    new = Region()
    for block in region.blocks:
        copy = Block([a.type for a in block.arguments])
        for old_arg, new_arg in zip(block.arguments, copy.arguments):
            new_arg.name_hint = old_arg.name_hint
            mapping[old_arg] = new_arg
        new.add_block(copy)
    for block, copy in zip(region.blocks, new.blocks):
        for op in block.operations:
            copy.append(clone_operation(op, mapping))
    return new


def resolve(value: Value, replacements: dict) -> Value:
    """Follow ``replacements`` from ``value`` to its final replacement."""
    while value in replacements:
        value = replacements[value]
    return value


def replace_uses(root: Operation, replacements: dict) -> None:
    """Rewrite every operand under ``root`` (inclusive) through ``replacements``."""
    if not replacements:
        return
    for op in root.walk():
        if any(v in replacements for v in op.operands):
            op.operands = [resolve(v, replacements) for v in op.operands]


def blocks_of(op: Operation) -> Iterator[Block]:
    """Every block nested in ``op``'s regions, outer before inner."""
    for region in op.regions:
        for block in region.blocks:
            yield block
            for inner in block.operations:
                yield from blocks_of(inner)


# Note [symbols in foreign attributes]
# An OpaqueAttr that is none of our typed attributes (an unknown dialect's, an sdy attribute
# the sharding reader does not model) is kept as the text it was written in, a grammar we do
# not know: any ``@name`` in it may be a use, so it is searched, to keep such a callee alive.
# Shardings are typed (their mesh is ``mesh_name``) and are never searched.
_SYMBOL_IN_FOREIGN_TEXT = re.compile(r"@([A-Za-z_][\w.$-]*)")


def attribute_symbols(attr: Attribute) -> Iterator[str]:
    """Root names of every symbol reference inside ``attr``."""
    for value in nested_values(attr):
        if isinstance(value, SymbolRefAttr):
            yield value.name
        elif isinstance(value, ShardingAttr):
            yield from _mesh_names([value.sharding])
        elif isinstance(value, ShardingPerValueAttr):
            yield from _mesh_names(value.shardings)
        elif isinstance(value, (MeshAttr, ManualAxesAttr)):
            continue  # typed, and naming no symbol (an OpaqueAttr below would be reread)
        elif isinstance(value, OpaqueAttr):
            typed = _typed_sdy_attribute(value)
            if typed is not None:
                yield from attribute_symbols(typed)
            else:  # see Note [symbols in foreign attributes]
                yield from _SYMBOL_IN_FOREIGN_TEXT.findall(value.text)


def _mesh_names(shardings) -> Iterator[str]:
    """The meshes ``shardings`` name (one spelled inline names none)."""
    return (s.mesh_name for s in shardings if s.mesh_name)


def _typed_sdy_attribute(attr: OpaqueAttr):
    """The typed form of a plain ``#sdy...`` attribute a pass built from a sharding's text,
    or None when the sharding reader does not model it."""
    if not attr.text.startswith("#sdy"):
        return None
    try:
        return read_sdy_attribute(attr.text)
    except ParseError:
        return None


def op_symbol_uses(op: Operation) -> set[str]:
    """Names referenced by ``op`` and everything nested in it."""
    names: set[str] = set()
    for inner in op.walk():
        for attr in inner.attributes.values():
            names.update(attribute_symbols(attr))
    return names


def live_functions(module: Module) -> set[str]:
    """Functions reachable by symbol references from public functions and non-function ops."""
    uses: dict[str, set[str]] = {}
    roots: set[str] = set()
    for op in module.body.operations:
        if op.name == "func.func":
            name = op.attributes["sym_name"].value
            uses[name] = op_symbol_uses(op) - {name}
            vis = op.attributes.get("sym_visibility")
            if vis is None or vis.value == "public":
                roots.add(name)
        else:
            roots.update(op_symbol_uses(op))
    for attr in module.attributes.values():
        roots.update(attribute_symbols(attr))
    live, stack = set(), [r for r in roots if r in uses]
    while stack:
        name = stack.pop()
        if name in live:
            continue
        live.add(name)
        stack.extend(n for n in uses[name] if n in uses and n not in live)
    return live


def remove_dead_private_functions(module: Module) -> bool:
    """Erase private functions no live code refers to; returns whether any went."""
    if not any(op.name == "func.func" and "sym_visibility" in op.attributes
               for op in module.body.operations):
        return False  # only public functions: nothing to erase, no need to walk them
    live = live_functions(module)
    keep = []
    for op in module.body.operations:
        if op.name == "func.func" and op.attributes["sym_name"].value not in live:
            continue
        keep.append(op)
    removed = len(keep) != len(module.body.operations)
    module.body.operations[:] = keep
    return removed
