"""What a region computes, when it is one of the few shapes every layer cares about.

``region_monoids`` is the one recogniser of reducer bodies (reduce, reduce_window, scatter,
select_and_scatter's scatter region, all_reduce, reduce_scatter, ...): a region whose result
``i`` is ``OP_i(arg_i, arg_{n+i})`` for a monoid ``OP_i`` (add, multiply, maximum, minimum,
and, or, xor) of the block's argument pair, in either order. Such a body can be applied in
any grouping and order, which is what lets the interpreter run it as one numpy reduction,
the partitioner split it across devices, and backends generate it as a loop with an
accumulator. Its identity per element type is what the accumulator starts from.

The recogniser looks at structure only, never runs the region.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from stablehlo.ir.types import ComplexType, FloatType, IntegerType, Type

_TERMINATORS = ("stablehlo.return", "func.return")

Scalar = Union[bool, int, float]


@dataclass(frozen=True)
class Monoid:
    """A binary op with an identity. Every monoid here is commutative, and associative in
    exact arithmetic: float add and multiply round differently when regrouped, so a
    reordered float sum is close to, not equal to, the program's order."""
    op: str
    commutative: bool = True
    associative: bool = True

    def identity(self, element_type: Type) -> Optional[Scalar]:
        """The value ``e`` with ``op(e, x) == x`` for every ``x`` of ``element_type``
        (NaN aside), or None when the op has none there (max of complex numbers)."""
        rule = _IDENTITIES[self.op]
        return rule(element_type)


def _zero(t: Type) -> Optional[Scalar]:
    # add, or, xor: 0 (false for booleans)
    if isinstance(t, IntegerType):
        return False if t.width == 1 else 0
    return 0.0 if isinstance(t, (FloatType, ComplexType)) else None


def _one(t: Type) -> Optional[Scalar]:
    # multiply: 1 (true for booleans, where multiply is and)
    if isinstance(t, IntegerType):
        return True if t.width == 1 else 1
    return 1.0 if isinstance(t, (FloatType, ComplexType)) else None


def _all_ones(t: Type) -> Optional[Scalar]:
    # and: every bit set (true, -1, or the largest unsigned value); not defined on floats
    if not isinstance(t, IntegerType):
        return None
    if t.width == 1:
        return True
    return -1 if t.signed else (1 << t.width) - 1


def _bitwise_zero(t: Type) -> Optional[Scalar]:
    # or, xor: no bit set; not defined on floats
    return _zero(t) if isinstance(t, IntegerType) else None


def _lowest(t: Type) -> Optional[Scalar]:
    # maximum: the least value (-inf, or the most negative finite value of a format without
    # infinities; false for booleans)
    if isinstance(t, IntegerType):
        if t.width == 1:
            return False
        return -(1 << (t.width - 1)) if t.signed else 0
    if isinstance(t, FloatType) and t.format.signed:
        return float("-inf") if t.format.has_inf else -t.format.max
    return None


def _highest(t: Type) -> Optional[Scalar]:
    # minimum: the greatest value (inf, or the largest finite value; true for booleans)
    if isinstance(t, IntegerType):
        if t.width == 1:
            return True
        return (1 << (t.width - 1)) - 1 if t.signed else (1 << t.width) - 1
    if isinstance(t, FloatType) and t.format.signed:
        return float("inf") if t.format.has_inf else t.format.max
    return None


_IDENTITIES = {
    "stablehlo.add": _zero,
    "stablehlo.multiply": _one,
    "stablehlo.maximum": _lowest,
    "stablehlo.minimum": _highest,
    "stablehlo.and": _all_ones,
    "stablehlo.or": _bitwise_zero,
    "stablehlo.xor": _bitwise_zero,
}
MONOIDS: dict[str, Monoid] = {name: Monoid(name) for name in _IDENTITIES}


def region_monoids(region) -> Optional[list[Monoid]]:
    """The monoid of each result, when the region's result ``i`` is ``OP_i(arg_i,
    arg_{n+i})`` (either operand order) of its ``2n`` block arguments and nothing else
    happens in it; else None.

    Each ``OP_i`` is attribute- and region-free, takes the pair's two distinct arguments and
    gives their type.
    """
    if len(region.blocks) != 1:
        return None
    block = region.blocks[0]
    args, ops = block.arguments, block.operations
    n = len(args) // 2
    if not args or len(args) != 2 * n or len(ops) != n + 1:
        return None
    terminator = ops[-1]
    if terminator.name not in _TERMINATORS or len(terminator.operands) != n:
        return None
    monoids, seen = [], set()
    for i, value in enumerate(terminator.operands):
        owner = value.owner
        if value.is_block_argument or id(owner) in seen or owner.name not in MONOIDS:
            return None
        if owner.attributes or owner.regions or len(owner.operands) != 2:
            return None
        if {id(v) for v in owner.operands} != {id(args[i]), id(args[n + i])}:
            return None
        if owner.results[0].type != args[i].type:
            return None
        seen.add(id(owner))
        monoids.append(MONOIDS[owner.name])
    return monoids


def region_monoid(region) -> Optional[Monoid]:
    """The one monoid combining every argument pair of ``region`` (see
    ``region_monoids``), or None when the results use different ops or none."""
    monoids = region_monoids(region)
    if not monoids or any(m is not monoids[0] for m in monoids):
        return None
    return monoids[0]
