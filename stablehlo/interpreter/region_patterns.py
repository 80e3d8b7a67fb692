"""Recognisers of comparator and update regions whose effect numpy computes directly.

* ``returned_arguments``: a region that only returns some of its block
  arguments (scatter's "replace" update: ``^bb0(%old, %new): return %new``);
* ``single_compare``: a comparator that is one ``compare`` of the first
  operand's pair (``sort`` on one key).

Regions built from elementwise ops in general run on whole arrays through
lanes.py; these patterns go further and skip region evaluation altogether.
Reducer bodies that are one monoid per result are recognised once, for every
layer, by ``stablehlo.ir.regions.region_monoids``.
"""
from __future__ import annotations

from typing import Optional

from stablehlo.ir.attributes import EnumAttr


def single_block(region):
    """The region's only block, or None."""
    return region.blocks[0] if len(region.blocks) == 1 else None


def returned_arguments(region) -> Optional[list[int]]:
    """Block-argument indices the region returns, if its only op is the return.

    ``^bb0(%a, %b): return %b`` gives ``[1]``.
    """
    block = single_block(region)
    if block is None or len(block.operations) != 1:
        return None
    terminator = block.operations[0]
    if terminator.name != "stablehlo.return":
        return None
    indices = []
    for value in terminator.operands:
        if not (value.is_block_argument and value.owner is block):
            return None
        indices.append(value.index)
    return indices


def single_compare(region) -> Optional[tuple[str, Optional[str]]]:
    """``(direction, compare_type)`` of a comparator that is one compare of args 0 and 1.

    Recognises ``^bb0(%a, %b, ...): %p = compare DIR, %a, %b; return %p`` and
    the swapped form ``compare DIR, %b, %a`` (reported with the mirrored
    direction). ``compare_type`` is None when the attribute is absent.
    """
    block = single_block(region)
    if block is None or len(block.operations) != 2 or len(block.arguments) < 2:
        return None
    compare, terminator = block.operations
    if (compare.name != "stablehlo.compare" or terminator.name != "stablehlo.return"
            or list(terminator.operands) != [compare.results[0]]):
        return None
    direction = compare.attributes.get("comparison_direction")
    if not isinstance(direction, EnumAttr):
        return None
    lhs, rhs = block.arguments[0], block.arguments[1]
    if list(compare.operands) == [lhs, rhs]:
        value = direction.value
    elif list(compare.operands) == [rhs, lhs]:
        value = _MIRRORED.get(direction.value, direction.value)
    else:
        return None
    ctype = compare.attributes.get("compare_type")
    return value, (ctype.value if isinstance(ctype, EnumAttr) else None)


_MIRRORED = {"LT": "GT", "GT": "LT", "LE": "GE", "GE": "LE", "EQ": "EQ", "NE": "NE"}
