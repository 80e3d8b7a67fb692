"""prune-argreduce-index: a max (min) pooling with indices whose indices nobody reads keeps
its values only.

PyTorch's ``max_pool2d`` reaches a compiler as ``max_pool2d_with_indices``, a
``reduce_window`` over (value, index) pairs with an argmax body (``region_argreduce``,
stablehlo/ir/regions.py) and an index operand that numbers the positions of the pooled
plane; in inference only the values are used. This pass rewrites such an op to a
``reduce_window`` of the values alone whose body keeps the same side of every value pair
(``select`` under comparisons of the two values), so the index operand (a broadcast as
large as the input) and the index half of the work go; ``dce`` removes their producers.

The rewrite is exact (Note [a dead index]) when
* the op has one (value, index) pair and its index result has no use;
* in every value state but equality the body keeps the same value whatever the order of
  the indices (JAX's and PyTorch's bodies do);
* the index operand rises strictly along every window's taps in their lexicographic order:
  an ``iota`` along the one windowed dimension, or a constant or iota (or a reshape of one),
  maybe broadcast along increasing dimensions that hold every windowed one with its full
  size, whose elements rise in row-major order over the windowed dimensions (``arange``
  reshaped to the plane, as the PyTorch lowering writes it, or that broadcast folded);
* the value init is a constant that is no float zero.

Note [a dead index]
~~~~~~~~~~~~~~~~~~~
Which value a pair body keeps can depend on the indices only where the two values compare
equal, and two equal values have different bits only when they are +0.0 and -0.0 (NaNs
never compare equal; equal integers are the same bits). A window meets such a pair only
between two of its elements, never with the init pair of padding or base dilation, whose
value is no zero. In the interpreter's fold (reducer.py: the accumulator first, the taps
in order, or a pairwise tree of adjacent runs beyond its sequential limit) the first
argument of each such application holds an element from an earlier tap than the second
one, so, with indices rising along the taps, its index is the lower one: the index
relation is "lt". The value-only body takes the pair body's value pick under "lt" for
equal values and its (relation-free) pick in every other state, so it keeps the same bits.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from stablehlo.builder import Builder
from stablehlo.ir.attributes import DenseElementsAttr
from stablehlo.ir.core import Module, Operation, Value
from stablehlo.ir.ops.shape_inference import int_list
from stablehlo.ir.regions import VALUE_STATES, region_argreduce
from stablehlo.ir.types import FloatType, TensorType

from xla_core.ir_utils import replace_uses
from xla_core.passes.base import Pass, PassContext

_RELATIONS = 3  # lt, eq, gt: ArgReduce.picks holds value_side + 2 * index_side per pair
_MAX_INDEX_ELEMENTS = 1 << 20  # index sources materialized to check their order


@dataclass(frozen=True)
class PruneArgreduceIndexPass(Pass):
    name = "prune-argreduce-index"

    def run(self, module: Module, ctx: PassContext) -> bool:
        changed = False
        for func in module.functions():
            if func.body is None:
                continue
            uses = Counter(v for op in func.op.walk() for v in op.operands)
            replacements: dict[Value, Value] = {}
            for op in list(func.op.walk()):
                value_picks = _value_picks_if_prunable(op, uses)
                if value_picks is None:
                    continue
                new = _values_only(op, value_picks)
                block = op.parent
                block.operations[block.operations.index(op)] = new
                new.parent = block
                op.parent = None
                replacements[op.results[0]] = new.results[0]
                changed = True
            replace_uses(func.op, replacements)
        return changed


def _value_picks_if_prunable(op: Operation, uses: Counter) -> tuple[int, ...] | None:
    """The value side the body keeps per VALUE_STATES (equal values under the "lt" index
    relation) when ``op`` may drop its index (the module docstring's conditions)."""
    if op.name != "stablehlo.reduce_window" or len(op.operands) != 4 or uses[op.results[1]]:
        return None
    argreduce = region_argreduce(op.regions[0])
    if argreduce is None or argreduce.picks is None:
        return None
    picks = []
    for s, state in enumerate(VALUE_STATES):
        sides = {argreduce.picks[s * _RELATIONS + r] & 1 for r in range(_RELATIONS)}
        if state != "eq" and len(sides) != 1:
            return None
        picks.append(argreduce.picks[s * _RELATIONS] & 1)  # relation "lt"
    values, indices, init = op.operands[0], op.operands[1], op.operands[2]
    window = int_list(op, "window_dimensions")
    windowed = [d for d, size in enumerate(window) if size > 1]
    if not _rises_along(indices, windowed) or not _nonzero_constant(init):
        return None
    return tuple(picks)


def _rises_along(indices: Value, windowed: list[int]) -> bool:
    """Whether ``indices`` rises strictly along the ``windowed`` dims in row-major order,
    wherever the other dims stand."""
    owner = indices.owner
    if not isinstance(owner, Operation):
        return False
    if owner.name == "stablehlo.iota":
        return set(windowed) <= {int(owner.attributes["iota_dimension"].value)}
    source, axes = indices, windowed
    if owner.name == "stablehlo.broadcast_in_dim":
        dims = int_list(owner, "broadcast_dimensions")
        source = owner.operands[0]
        if dims != sorted(dims) or not all(
                d in dims and source.type.shape[dims.index(d)] == indices.type.shape[d]
                for d in windowed):
            return False
        axes = [dims.index(d) for d in windowed]
    array = _materialized(source)
    if array is None:
        return False
    others = [d for d in range(array.ndim) if d not in axes]
    runs = np.transpose(array, others + axes).reshape(
        int(np.prod([array.shape[d] for d in others], dtype=np.int64)), -1)
    return bool(np.all(np.diff(runs.astype(np.int64), axis=1) > 0))


def _materialized(value: Value) -> np.ndarray | None:
    """The elements of a small constant or iota, looking through reshapes; else None."""
    owner = value.owner
    if not isinstance(owner, Operation) or not isinstance(value.type, TensorType):
        return None
    shape = tuple(value.type.shape)
    if np.prod(shape, dtype=np.int64) > _MAX_INDEX_ELEMENTS:
        return None
    if owner.name == "stablehlo.reshape":
        inner = _materialized(owner.operands[0])
        return None if inner is None else inner.reshape(shape)
    if owner.name == "stablehlo.iota":
        dim = int(owner.attributes["iota_dimension"].value)
        along = np.arange(shape[dim], dtype=np.int64).reshape(
            [-1 if d == dim else 1 for d in range(len(shape))])
        return np.broadcast_to(along, shape)
    attr = owner.attributes.get("value") if owner.name == "stablehlo.constant" else None
    if not isinstance(attr, DenseElementsAttr):
        return None
    return np.broadcast_to(attr.array, shape)


def _nonzero_constant(init: Value) -> bool:
    """Whether ``init`` is a constant that is no float zero (an integer, or a float other
    than +0.0 and -0.0)."""
    array = _materialized(init)
    if array is None:
        return False
    if not isinstance(init.type.element_type, FloatType):
        return True
    return bool(np.all(array.astype(np.float64) != 0.0))


def _values_only(op: Operation, picks: tuple[int, ...]) -> Operation:
    """``op`` over its values alone, with a body keeping side ``picks[state]``."""
    values, init = op.operands[0], op.operands[2]
    attributes = dict(op.attributes)
    b = Builder()
    with b.at(op.location):
        region = b.region([init.type, init.type], lambda a, c: b.select(
            _takes_first(b, a, c, [s for s, side in zip(VALUE_STATES, picks) if side == 0]),
            a, c))
    return Operation(op.name, [values, init], [op.results[0].type], attributes, [region],
                     op.location)


# The compare of the pair (first, second) that holds in exactly these ordered states: an
# argmax (argmin) body keeps the first value when it is greater (less), maybe when equal.
_ORDERED = {frozenset({"gt"}): "GT", frozenset({"eq", "gt"}): "GE",
            frozenset({"lt"}): "LT", frozenset({"lt", "eq"}): "LE"}


def _takes_first(b: Builder, a: Value, c: Value, states: list[str]) -> Value:
    """A predicate of the pair (a, c) that holds exactly in ``states``, an argmax or argmin
    body's states that keep the first value."""
    predicate = b.compare(a, c, _ORDERED[frozenset(s for s in states if not s.startswith("nan"))])
    if not isinstance(a.type.element_type, FloatType):
        return predicate
    nans = frozenset(s for s in states if s.startswith("nan"))
    if nans == frozenset({"nan_first", "nan_both"}):  # NaN wins, the first of two
        terms = [b.compare(a, a, "NE")]
    elif nans == frozenset({"nan_second", "nan_both"}):
        terms = [b.compare(c, c, "NE")]
    else:  # a NaN state at a time: (is a NaN, is c NaN) as each state has them
        terms = [b.and_(b.compare(a, a, "NE" if s != "nan_second" else "EQ"),
                        b.compare(c, c, "NE" if s != "nan_first" else "EQ"))
                 for s in sorted(nans)]
    for term in terms:
        predicate = b.or_(predicate, term)
    return predicate
