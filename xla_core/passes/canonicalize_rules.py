"""The rules of the canonicalize pass: one function per rewrite, registered in ``RULES``.

A rule has the shape rewrite_driver.py describes: ``rule(op, create)`` returns
the value replacing ``op``'s one result (of its exact type), or None.

Canonicalize picks one spelling among equivalent ones so that later passes
(the algebraic simplifier, cse, fusion) need to match only that one: constants
on the right of commutative ops and compares; shape ops that move no data
written as ``reshape`` (the free one); a reduce over extent-1 dimensions
written as the elementwise op it is; ``chlo.square`` as the multiply it is. Identities that remove an op outright
(``x * 1``, ``select(p, a, a)``, ``reshape(reshape(x))``, identity
transposes, converts and broadcasts) are the algebraic simplifier's and live
in algebraic_simplifier_rules.py only.

Every rewrite is exact: bit-identical results for every input. Swapping the
operands of add, multiply, maximum, minimum, and, or, xor is exact for every
value (IEEE addition and multiplication are commutative, NaNs included up to
which of two NaN inputs lends its payload, as in XLA), except complex
multiply, whose parts may be computed with fused multiply-adds that round
differently in the other order, so it stays as it is; a compare with swapped
operands and mirrored direction is the same predicate (NaN compares false
either way, TOTALORDER is a total order).
"""
from __future__ import annotations

import math
from collections.abc import Callable

from stablehlo.ir.attributes import EnumAttr, IntegerAttr, i64_array
from stablehlo.ir.core import Operation, Value
from stablehlo.ir.ops import OPS
from stablehlo.ir.ops.base import COMMUTATIVE, ELEMENTWISE
from stablehlo.ir.ops.shape_inference import int_list, is_quant
from stablehlo.ir.types import ComplexType, IntegerType, TensorType
from xla_core.passes.algebraic_simplifier_rules import producer, splat

Create = Callable[..., Value]

# The ops whose definition says they commute (add, multiply, maximum, minimum, and, or, xor).
_COMMUTATIVE = tuple(name for name in OPS if OPS.get(name).has(COMMUTATIVE))


def _is_constant(value: Value) -> bool:
    """A constant, or a broadcast/reshape of one (how JAX spells splats)."""
    owner = value.owner
    while isinstance(owner, Operation) and owner.name in ("stablehlo.broadcast_in_dim",
                                                          "stablehlo.reshape"):
        owner = owner.operands[0].owner
    return isinstance(owner, Operation) and owner.name == "stablehlo.constant"


def _is_i1(value: Value) -> bool:
    element = value.type.element_type
    return isinstance(element, IntegerType) and element.width == 1


# ---------------------------------------------------------------------------
# Operand order

def commutative_constant_right(op: Operation, create: Create) -> Value | None:
    # op(c, x) -> op(x, c) for commutative op, c constant, x not (not complex multiply)
    lhs, rhs = op.operands
    if not _is_constant(lhs) or _is_constant(rhs):
        return None
    if op.name == "stablehlo.multiply" and isinstance(lhs.type.element_type, ComplexType):
        return None  # ad + bc may be computed as fma(a, d, b*c): its rounding depends on the order
    return create(op.name, [rhs, lhs], op)


_MIRRORED = {"EQ": "EQ", "NE": "NE", "LT": "GT", "GT": "LT", "LE": "GE", "GE": "LE"}


def compare_constant_right(op: Operation, create: Create) -> Value | None:
    # compare(c, x, LT) -> compare(x, c, GT) (and LE <-> GE; EQ, NE stay)
    lhs, rhs = op.operands
    if not _is_constant(lhs) or _is_constant(rhs):
        return None
    direction = op.attributes["comparison_direction"]
    mirrored = EnumAttr(direction.kind, _MIRRORED[direction.value], direction.dialect)
    return create(op.name, [rhs, lhs], op, {"comparison_direction": mirrored})


def select_negated_predicate(op: Operation, create: Create) -> Value | None:
    # select(not(p), a, b) -> select(p, b, a) for i1 p
    pred, on_true, on_false = op.operands
    negation = producer(pred, "stablehlo.not")
    if negation is None or not _is_i1(pred):
        return None
    return create(op.name, [negation.operands[0], on_false, on_true], op)


def select_as_predicate(op: Operation, create: Create) -> Value | None:
    # select(p, true, false) -> p; select(p, false, true) -> not(p)
    # (i1 results, p of the result's shape)
    pred, on_true, on_false = op.operands
    if not _is_i1(op.result) or pred.type != op.result.type:
        return None
    if_true, if_false = splat(on_true), splat(on_false)
    if if_true is None or if_false is None or bool(if_true) == bool(if_false):
        return None
    return pred if bool(if_true) else create("stablehlo.not", [pred], op)


# ---------------------------------------------------------------------------
# Shape ops that move no data are reshapes

def broadcast_as_reshape(op: Operation, create: Create) -> Value | None:
    # broadcast_in_dim(x, dims increasing) : T -> reshape(x) : T when T has x's element count
    # (it only inserts extent-1 dimensions)
    x = op.operands[0]
    count = _element_count(x)
    if count is None or count != _element_count(op.results[0]) or x.type == op.results[0].type:
        return None
    dims = int_list(op, "broadcast_dimensions")
    if dims != sorted(set(dims)):
        return None
    return create("stablehlo.reshape", [x], op, {})


def transpose_as_reshape(op: Operation, create: Create) -> Value | None:
    # transpose(x, p) -> reshape(x) when p keeps the order of x's dimensions of extent > 1
    x = op.operands[0]
    if _element_count(x) is None or is_quant(x.type.element_type):
        return None
    permutation = int_list(op, "permutation")
    moved = [d for d in permutation if x.type.shape[d] != 1]
    if moved != sorted(moved) or permutation == sorted(permutation):
        return None
    return create("stablehlo.reshape", [x], op, {})


def _element_count(value: Value) -> int | None:
    """The number of elements of a static tensor, else None (math.prod: numpy's is slow on
    tuples this small)."""
    t = value.type
    if not isinstance(t, TensorType) or None in t.shape:
        return None
    return math.prod(t.shape)


# ---------------------------------------------------------------------------
# Tuples and reductions

def get_tuple_element_of_tuple(op: Operation, create: Create) -> Value | None:
    # get_tuple_element(tuple(x0, ..., xn), i) -> xi
    made = producer(op.operands[0], "stablehlo.tuple")
    if made is None:
        return None
    index = op.attributes["index"]
    value = made.operands[index.value if isinstance(index, IntegerAttr) else int(index)]
    return value if value.type == op.result.type else None


def reduce_unit_dimensions(op: Operation, create: Create) -> Value | None:
    # reduce(x, init, dims) with every reduced dimension of extent 1 and body
    # `return f(acc, elem)` -> f(broadcast_in_dim(init), reshape(x)) (operands in the
    # body's order): the reduce folds exactly one element into init per output
    if len(op.operands) != 2:
        return None
    x, init = op.operands
    if _element_count(x) is None or _element_count(op.results[0]) is None:
        return None
    if any(x.type.shape[d] != 1 for d in int_list(op, "dimensions")):
        return None
    if _is_i1(x) or is_quant(x.type.element_type):
        return None
    order = _binary_body(op)
    if order is None:
        return None
    name, acc_first = order
    result_type = op.result.type
    element = (create("stablehlo.reshape", [x], op, {}, result_type)
               if x.type != result_type else x)
    initial = create("stablehlo.broadcast_in_dim", [init], op,
                     {"broadcast_dimensions": i64_array([])}, result_type)
    # acc on the right where the op commutes: the normal form commutative_constant_right makes
    init_left = acc_first and name not in _COMMUTATIVE
    operands = [initial, element] if init_left else [element, initial]
    return create(name, operands, op, {}, result_type)


def _binary_body(op: Operation) -> tuple[str, bool] | None:
    """(op name, whether the accumulator is its lhs) when the reducer body is
    ``return f(acc, elem)`` or ``return f(elem, acc)`` for an elementwise,
    attribute-free binary f of the body's type; else None.

    Any such f, not only a monoid (``stablehlo.ir.regions``): over extent-1 dims the
    body runs once, on the init and the one element, as the reference interpreter runs
    it (the spec leaves the order of a body that is no monoid to the implementation)."""
    region = op.regions[0]
    if len(region.blocks) != 1:
        return None
    block = region.blocks[0]
    acc, elem = block.arguments
    if len(block.operations) != 2 or acc.type != elem.type:
        return None
    inner, ret = block.operations
    opdef = inner.opdef
    if (opdef is None or not opdef.has(ELEMENTWISE) or inner.attributes or inner.regions
            or len(inner.operands) != 2 or len(inner.results) != 1
            or inner.result.type != acc.type or list(ret.operands) != [inner.result]):
        return None
    if list(inner.operands) == [acc, elem]:
        return inner.name, True
    if list(inner.operands) == [elem, acc]:
        return inner.name, False
    return None


# ---------------------------------------------------------------------------
# CHLO ops that are one StableHLO op

def square_as_multiply(op: Operation, create: Create) -> Value | None:
    # chlo.square(x) -> x * x: its definition, for every element type; backends and fusion
    # then see the op they know (JAX writes jnp.square and x**2 this way)
    x = op.operands[0]
    return create("stablehlo.multiply", [x, x], op)


# ---------------------------------------------------------------------------
# The table: (op name, rule); the rules of one op are tried in order.

RULES: list[tuple[str, Callable]] = [
    *[(name, commutative_constant_right) for name in _COMMUTATIVE],
    ("stablehlo.compare", compare_constant_right),
    ("stablehlo.select", select_negated_predicate),
    ("stablehlo.select", select_as_predicate),
    ("stablehlo.broadcast_in_dim", broadcast_as_reshape),
    ("stablehlo.transpose", transpose_as_reshape),
    ("stablehlo.get_tuple_element", get_tuple_element_of_tuple),
    ("stablehlo.reduce", reduce_unit_dimensions),
    ("chlo.square", square_as_multiply),
]

# Ops the pass may erase once it made them dead: the ones it rewrites or
# looks through, all pure (a reduce is replaced only when its body is one
# elementwise op).
ERASABLE = frozenset({
    *_COMMUTATIVE, "stablehlo.reduce", "stablehlo.compare", "stablehlo.select", "stablehlo.not",
    "stablehlo.broadcast_in_dim", "stablehlo.transpose", "stablehlo.reshape",
    "stablehlo.get_tuple_element", "stablehlo.tuple", "stablehlo.constant", "chlo.square",
})
