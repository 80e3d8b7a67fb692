"""What a region computes, when it is one of the few shapes every layer cares about.

``region_monoids`` is the one recogniser of reducer bodies (reduce, reduce_window, scatter,
select_and_scatter's scatter region, all_reduce, reduce_scatter, ...): a region whose result
``i`` is ``OP_i(arg_i, arg_{n+i})`` for a monoid ``OP_i`` (add, multiply, maximum, minimum,
and, or, xor) of the block's argument pair, in either order. Such a body can be applied in
any grouping and order, which is what lets the interpreter run it as one numpy reduction,
the partitioner split it across devices, and backends generate it as a loop with an
accumulator. Its identity per element type is what the accumulator starts from.

``region_argreduce`` recognises the one common reducer that is no monoid per result: a
(value, index) pair kept by argmax or argmin, ties to the lower index. It also tabulates which
side the body keeps for every order relation of the two pairs, NaN values included, so a
backend can run the body as a table lookup and give its exact bits. ``region_value_picks``
tabulates the same for a body of one value pair (an argmax without its index).

The recognisers look at structure only, never run the region.
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
    # add, or, xor: 0 (false for booleans). For float add this is +0.0, although only -0.0
    # leaves every x unchanged (+0.0 + -0.0 is +0.0): numpy, PyTorch and the native kernels
    # start their sums from +0.0, and every tier must give their bits.
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


# The states of the value pair (first, second) that decide a (value, index) body: the three
# order relations, then which of the two is NaN (comparisons with a NaN are unordered: only
# NE holds). Index pairs are integers, always ordered.
VALUE_STATES = ("lt", "eq", "gt", "nan_first", "nan_second", "nan_both")
_RELATIONS = ("lt", "eq", "gt")


@dataclass(frozen=True)
class ArgReduce:
    """A (value, index) reducer that keeps the pair with the larger (``which == "max"``) or
    smaller value, the one with the lower index among equal values: argmax and argmin. It
    is a selection by a total order, so, like max and min, it is associative, commutative
    and idempotent on ordered values; what it does with a NaN is the body's own.

    ``picks`` is the body itself as a table: for each value state (``VALUE_STATES``) and
    each relation of the index pair (lt, eq, gt), in that nesting, ``value_side + 2 *
    index_side``, where a side is 0 for the first argument of its pair and 1 for the second.
    It covers every input (NaNs and signed zeros too), so a kernel applying it in the
    interpreter's fold order gives the interpreter's bits. None when the body compares
    values in TOTALORDER, whose NaN and signed-zero order the states do not describe."""
    which: str  # "max" or "min"
    picks: Optional[tuple[int, ...]] = None

    @property
    def value_monoid(self) -> Monoid:
        """The monoid the value result follows (maximum or minimum); its identity is the
        value init that no value of the operand loses to."""
        return MONOIDS["stablehlo.maximum" if self.which == "max" else "stablehlo.minimum"]


# How every comparison direction reads the relation of its (first, second) operands; "un"
# (unordered: a NaN among them) satisfies NE only.
_FLIPPED = {"lt": "gt", "eq": "eq", "gt": "lt", "un": "un"}
_HOLDS = {"EQ": {"eq"}, "NE": {"lt", "gt", "un"}, "LT": {"lt"}, "LE": {"lt", "eq"},
          "GT": {"gt"}, "GE": {"gt", "eq"}}
_LOGIC = {"stablehlo.and": lambda a, b: a and b, "stablehlo.or": lambda a, b: a or b,
          "stablehlo.xor": lambda a, b: a != b}


def region_argreduce(region) -> Optional[ArgReduce]:
    """What the reducer ``region`` of a (value, index) pair computes, when it is an argmax
    or argmin with ties going to the lower index; else None.

    The body may hold only comparisons within the value pair or the index pair, boolean
    and/or/xor/not of their results, and one select of its pair per result (JAX's and
    PyTorch's bodies, with or without NaN tests, are of this form). Every such predicate
    depends on the order relation of the two values and of the two indices alone, so
    deciding its picks for all 3 x 3 relations decides the body exactly; NaN values are
    left out (a body without NaN tests picks by position).
    """
    if len(region.blocks) != 1:
        return None
    block = region.blocks[0]
    args, ops = block.arguments, block.operations
    if len(args) != 4 or not ops or ops[-1].name not in _TERMINATORS:
        return None
    pairs = ((args[0], args[2]), (args[1], args[3]))  # (values, indices)
    if not _argreduce_types(pairs) or len(ops[-1].operands) != 2:
        return None
    if any(v.is_block_argument for v in ops[-1].operands):
        return None
    selects = [v.owner for v in ops[-1].operands]
    for select, pair in zip(selects, pairs):
        if select.name != "stablehlo.select" or \
                {id(v) for v in select.operands[1:]} != {id(pair[0]), id(pair[1])}:
            return None
    which = None
    for value_relation in _RELATIONS:
        for index_relation in _RELATIONS:
            picks = _picks(ops[:-1], selects, pairs, (value_relation, index_relation))
            if picks is None:
                return None
            value_pick, index_pick = picks
            if value_relation == "eq":
                # equal values: the lower index, whichever value
                lower = {"lt": 0, "gt": 1}.get(index_relation)
                if lower is not None and index_pick != lower:
                    return None
                continue
            if index_pick != value_pick:
                return None
            larger = 0 if value_relation == "gt" else 1
            kind = "max" if value_pick == larger else "min"
            if which not in (None, kind):
                return None
            which = kind
    return ArgReduce(which, _pick_table(ops[:-1], selects, pairs))


def _pick_table(ops, selects, pairs) -> Optional[tuple[int, ...]]:
    """``ArgReduce.picks`` of a recognised body, or None (a TOTALORDER value compare)."""
    table = []
    for value_state in VALUE_STATES:
        for index_relation in _RELATIONS:
            picks = _picks(ops, selects, pairs, (value_state, index_relation))
            if picks is None:
                return None
            table.append(picks[0] + 2 * picks[1])
    return tuple(table)


def region_value_picks(region) -> Optional[tuple[int, ...]]:
    """The side (0: first argument, 1: second) a reducer ``region`` of one value pair keeps
    in each of ``VALUE_STATES``, when the body is one select of the pair under a predicate of
    comparisons within it (the shape ``region_argreduce`` reads, without indices: an argmax
    whose index was dropped, xla_core/passes/prune_argreduce_index.py); else None, also for
    TOTALORDER comparisons. The table covers every input, NaNs and signed zeros included."""
    if len(region.blocks) != 1:
        return None
    block = region.blocks[0]
    args, ops = block.arguments, block.operations
    if len(args) != 2 or not ops or ops[-1].name not in _TERMINATORS:
        return None
    if args[0].type != args[1].type or len(ops[-1].operands) != 1:
        return None
    if not isinstance(getattr(args[0].type, "element_type", None), (IntegerType, FloatType)):
        return None
    select = ops[-1].operands[0].owner
    if ops[-1].operands[0].is_block_argument or select.name != "stablehlo.select" or \
            {id(v) for v in select.operands[1:]} != {id(args[0]), id(args[1])}:
        return None
    table = []
    for state in VALUE_STATES:
        picks = _picks(ops[:-1], [select], ((args[0], args[1]),), (state,))
        if picks is None:
            return None
        table.append(picks[0])
    return tuple(table)


def _argreduce_types(pairs) -> bool:
    (value, other_value), (index, other_index) = pairs
    if value.type != other_value.type or index.type != other_index.type:
        return False
    value_type = getattr(value.type, "element_type", None)
    index_type = getattr(index.type, "element_type", None)
    return isinstance(value_type, (IntegerType, FloatType)) and \
        isinstance(index_type, IntegerType) and index_type.width > 1


def _picks(ops, selects, pairs, relations) -> Optional[tuple[int, ...]]:
    """Which side (0: the first argument of the pair, 1: the second) each select picks
    when the pairs (the value pair, then the index pair if any) stand in ``relations``;
    None when an op is none the recogniser knows."""
    truth: dict[int, bool] = {}
    for op in ops:
        if any(op is select for select in selects):
            continue
        if op.regions or len(op.results) != 1:
            return None
        if op.name == "stablehlo.compare":
            holds = _compare(op, pairs, relations)
        elif op.name in _LOGIC and len(op.operands) == 2:
            a, b = (truth.get(id(v)) for v in op.operands)
            holds = None if a is None or b is None else _LOGIC[op.name](a, b)
        elif op.name == "stablehlo.not" and len(op.operands) == 1:
            a = truth.get(id(op.operands[0]))
            holds = None if a is None else not a
        else:
            return None
        if holds is None:
            return None
        truth[id(op.results[0])] = holds
    picks = []
    for select, pair in zip(selects, pairs):
        predicate = truth.get(id(select.operands[0]))
        if predicate is None:
            return None
        chosen = select.operands[1] if predicate else select.operands[2]
        picks.append(0 if chosen is pair[0] else 1)
    return tuple(picks)


def _natural_order(t: Type) -> str:
    """The compare_type that orders values of ``t`` numerically."""
    if isinstance(t, FloatType):
        return "FLOAT"
    return "SIGNED" if t.signed and t.width > 1 else "UNSIGNED"


def _compare(op, pairs, relations) -> Optional[bool]:
    """Whether the comparison ``op`` of two members of one pair holds under
    ``relations``; None when it compares anything else or in another order."""
    x, y = op.operands
    for pair, relation in zip(pairs, relations):
        if not all(v is pair[0] or v is pair[1] for v in (x, y)):
            continue
        kind = op.attributes.get("compare_type")
        element_type = x.type.element_type
        allowed = {_natural_order(element_type)}
        if isinstance(element_type, FloatType):
            allowed.add("TOTALORDER")  # the numeric order on ordered values
        if kind is not None and kind.value not in allowed:
            return None
        if relation.startswith("nan"):
            if kind is not None and kind.value == "TOTALORDER":
                return None  # a NaN is ordered there
            between = "un" if any(_is_nan(v, pair, relation) for v in (x, y)) else "eq"
        elif x is y:
            between = "eq"
        else:
            between = relation if x is pair[0] else _FLIPPED[relation]
        return between in _HOLDS[op.attributes["comparison_direction"].value]
    return None


def _is_nan(value, pair, state: str) -> bool:
    """Whether ``value``, a member of the value ``pair``, is NaN in value state ``state``
    (in a NaN state only the non-NaN member can meet a comparison as "eq": with itself)."""
    return state == "nan_both" or (value is pair[0]) == (state == "nan_first")
