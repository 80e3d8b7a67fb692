"""cse: merge pure ops that compute the same value.

Two ops are the same computation when they have the same name, the same
operands (after earlier merges), equal attributes, the same result types and
structurally equal regions (same ops in the same order, values defined inside
the regions matched by position, values captured from outside identical). The
later op is erased and its results' uses go to the earlier one's. Constants
are ops like any other, so two ``stablehlo.constant`` with equal
``DenseElementsAttr`` values merge.

Only pure ops merge, as ``dce`` defines purity (the op definition's effects):
never I/O or collective ops, custom_calls with ``has_side_effect``, rng,
optimization barriers, async ops or unregistered ops; an op with regions only
when everything in them is pure; a call or composite only when its callee
is. Ops without results and terminators are left alone (nothing to reuse;
``dce`` removes the former). Nor do recomputed copies (the ``openhlo.remat``
attribute the ``remat`` pass sets): merging one with its original would undo
the recomputation. What ``jax.checkpoint`` recomputes needs no such mark: it
reads the outputs of an optimization barrier, never the forward's values.

Scopes follow dominance: an op can reuse an earlier op of its own block or of
any enclosing block (regions see enclosing values), never one of a sibling
region or block. Regions of unregistered or isolated-from-above ops start a
fresh scope, since they may not capture. Each op is looked up once in a hash
table keyed by (name, operands, attributes, result types, region structure),
so the pass is linear in the program size (times the nesting depth for ops
with regions, whose structure keys cover their bodies).

Operands are not reordered for commutative ops (``add(a, b)`` and
``add(b, a)`` stay two ops), and locations do not matter (the first op's is
kept).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from stablehlo.ir.attributes import (ArrayAttr, Attribute, DenseArrayAttr, DictAttr, FloatAttr,
                                     StructAttr)
from stablehlo.ir.core import Block, Module, Operation, Region, Value
from stablehlo.ir.ops.base import ISOLATED

from xla_core.buffers.remat import CLONE_ATTR
from xla_core.ir_utils import resolve
from xla_core.passes.base import Pass, PassContext
from xla_core.passes.dce import Purity


@dataclass(frozen=True)
class CsePass(Pass):
    name = "cse"

    def run(self, module: Module, ctx: PassContext) -> bool:
        purity = Purity(module)
        changed = False
        for func in module.functions():
            eliminator = _Eliminator(purity)
            for region in func.op.regions:
                eliminator.fresh_scope(region)
            changed |= bool(eliminator.replacements)
        return changed


class _Eliminator:
    """One function's walk: a scoped table of available ops and the merges made.

    Operands are rewritten as the walk reaches them; a use always comes after
    its definition in walk order (the IR has no branches, so a block's ops run
    in order and nested regions after the values they capture), so one walk
    both merges and redirects every use.
    """

    def __init__(self, purity: Purity):
        self.purity = purity
        self.available: dict[tuple, Operation] = {}
        self.replacements: dict[Value, Value] = {}

    def fresh_scope(self, region: Region) -> None:
        """Eliminate inside ``region`` without reusing anything from outside it."""
        outer, self.available = self.available, {}
        self.region(region)
        self.available = outer

    def region(self, region: Region) -> None:
        for block in region.blocks:
            self.block(block)

    def block(self, block: Block) -> None:
        added: list[tuple] = []
        kept: list[Operation] = []
        for op in block.operations:
            if any(v in self.replacements for v in op.operands):
                op.operands = [resolve(v, self.replacements) for v in op.operands]
            # Inner merges first: equal bodies then have equal keys below.
            self._nested(op)
            key = self._key(op)
            earlier = self.available.get(key) if key is not None else None
            if earlier is not None:
                self.replacements.update(zip(op.results, earlier.results))
                op.parent = None
                continue
            if key is not None:
                self.available[key] = op
                added.append(key)
            kept.append(op)
        # Leaving the block: its ops do not dominate sibling blocks or regions.
        for key in added:
            del self.available[key]
        if len(kept) != len(block.operations):
            block.operations[:] = kept

    def _nested(self, op: Operation) -> None:
        opdef = op.opdef
        for region in op.regions:
            if opdef is None or opdef.has(ISOLATED):
                self.fresh_scope(region)
            else:
                self.region(region)

    def _key(self, op: Operation) -> tuple | None:
        """The op's hash key, or None when it must not merge."""
        if not op.results or not self.purity.is_pure(op) or CLONE_ATTR in op.attributes:
            return None
        regions = tuple(_region_key(r, {}) for r in op.regions) if op.regions else ()
        return (op.name, tuple(op.operands), _attributes_key(op.attributes),
                tuple(op.result_types), regions)


def _region_key(region: Region, local: dict) -> tuple:
    """Structure of ``region``: values defined inside it become their definition
    order number (``local``), captured values stay themselves."""
    blocks = []
    for block in region.blocks:
        for arg in block.arguments:
            local[arg] = len(local)
        ops = []
        for op in block.operations:
            operands = tuple(local.get(v, v) for v in op.operands)
            nested = tuple(_region_key(r, local) for r in op.regions)
            for result in op.results:
                local[result] = len(local)
            ops.append((op.name, operands, _attributes_key(op.attributes),
                        tuple(op.result_types), nested))
        blocks.append((tuple(a.type for a in block.arguments), tuple(ops)))
    return tuple(blocks)


def _attributes_key(attributes: dict) -> tuple:
    return tuple(sorted((name, _attr_key(attr)) for name, attr in attributes.items()))


def _attr_key(attr: Attribute):
    """``attr`` itself, or where it holds floats a form that tells ``0.0`` from
    ``-0.0`` and compares NaNs by bits (Python's ``==`` does neither)."""
    if isinstance(attr, FloatAttr):
        return (FloatAttr, attr.type, _float_bits(attr.value))
    if isinstance(attr, DenseArrayAttr):
        return (DenseArrayAttr, attr.element_type, tuple(_plain_key(v) for v in attr.values))
    if isinstance(attr, ArrayAttr):
        return (ArrayAttr, tuple(_attr_key(v) for v in attr.values))
    if isinstance(attr, DictAttr):
        return (DictAttr, tuple((k, _attr_key(v)) for k, v in attr.items))
    if isinstance(attr, StructAttr):
        return (StructAttr, attr.dialect, attr.kind,
                tuple((k, _plain_key(v)) for k, v in attr.fields))
    return attr  # no floats inside; DenseElementsAttr compares bytes


def _plain_key(value):
    if isinstance(value, Attribute):
        return _attr_key(value)
    if isinstance(value, float):
        return _float_bits(value)
    if isinstance(value, tuple):
        return tuple(_plain_key(v) for v in value)
    return value


def _float_bits(value: float) -> tuple:
    return (float, struct.pack("<d", value))
