"""Static cost estimates of StableHLO ops: flops and bytes, and a roofline time.

``op_cost(op)`` counts one op as if it ran as its own kernel: it reads every
operand from memory and writes every result. ``fusion_cost`` counts a group of
ops fused into one kernel: flops add up, but only values that enter the group
from outside or leave it touch memory. ``roofline_seconds`` turns a cost into
time on a ``HardwareDescription``. ``module_cost`` sums a function.

Conventions (see Note [op weights]):

* flops are f32-FLOP equivalents; a fused multiply-add counts 2. Complex
  element types cost ``COMPLEX_FACTOR`` times the real op.
* bytes use the storage size of the element type (``i1`` is one byte, sub-byte
  floats are packed); ``Cost.bytes_read`` is an upper bound for ops that may
  read in place.
* ``Cost.transcendentals`` counts elementwise evaluations of the ops whose
  ``ElementwiseRule`` is ``transcendental`` (exp, log, tanh, sqrt, power, ...), as
  XLA's cost analysis reports them; they are also in ``flops`` with their weights.
* A composite is one op: it reads its operands and writes its results once
  (a ``openhlo.fusion`` is one kernel), and costs its decomposition's flops.
* Ops that only reinterpret their operand (reshape, bitcast_convert,
  get_tuple_element, tuple, optimization_barrier) cost nothing: a backend
  aliases the buffer. Constants cost nothing themselves; their bytes are counted
  where they are read.
* Ops we have no formula for (custom_call, collectives, rng, batch_norm_*,
  I/O, ...) get zero flops and the bytes of their operands and results
  (``_NO_FORMULA``), as do ops of dialects OpenHLO does not model.
  Collectives move bytes over a network this model does not describe.
* Every registered op has a rule in ``COST_RULES``, keyed by its name (a test
  checks it); elementwise ops get theirs from the op's trait.
* Dynamic shapes raise ``CostModelError``: there is nothing to count.

Note [op weights]
Elementwise ops cost ``weight`` flops per result element. Plain arithmetic,
comparisons, logic, conversions and rounding weigh 1. Division, sqrt and rsqrt
weigh 4 (a hardware divide/sqrt issues several times slower than an FMA).
Transcendentals (exp, log, tanh, logistic, sin, cos, ...) weigh 10: a
vectorized polynomial/range reduction is ~10-20 FMAs; power, atan2 and tan,
built from two of them, weigh 20. These are relative weights for ranking
alternatives, not cycle counts. A region applied per element (reduce bodies,
sort comparators, scatter updates) weighs the sum of its ops, at least 1.

Note [while trip count]
A loop whose trip count is not recognized is assumed to run
``DEFAULT_TRIP_COUNT`` = 100 times (XLA's auto-sharding uses the same guess).
A counted loop is recognized when the condition returns
``compare(LT|LE, %iv, constant)`` on a loop-carried ``%iv`` whose initial value
is a constant and which the body returns as ``add(%iv, positive constant)``.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from stablehlo.ir.attr_readers import struct_ints
from stablehlo.ir.attributes import (
    ConvDimensionNumbersAttr,
    DenseElementsAttr,
    EnumAttr,
    SymbolRefAttr,
    attr_to_python,
)
from stablehlo.ir.core import Block, Module, Operation, Region, Value
from stablehlo.ir.ops import OPS
from stablehlo.ir.ops.base import ELEMENTWISE
from stablehlo.registry import Registry
from stablehlo.ir.types import (
    ComplexType,
    FutureType,
    TensorType,
    TokenType,
    TupleType,
    Type,
    element_facts,
)
from xla_core.cost.hardware import HardwareDescription

DEFAULT_TRIP_COUNT = 100
COMPLEX_FACTOR = 4  # a complex multiply-add is 4 real multiplies + 4 adds, vs 2 flops

class CostModelError(ValueError):
    """An op whose cost cannot be estimated (dynamic shape, unknown callee)."""


@dataclass(frozen=True)
class Cost:
    """``matmul_flops``: the part of ``flops`` done by matrix products (dot_general, dot,
    convolution), which ``roofline_seconds`` costs at the hardware's rate for their size (a
    sum of several products, like a loop's, at the rate of their total: one kernel is the
    unit this model times)."""
    flops: float = 0.0
    bytes_read: float = 0.0
    bytes_written: float = 0.0
    transcendentals: float = 0.0
    matmul_flops: float = 0.0

    @property
    def bytes_accessed(self) -> float:
        return self.bytes_read + self.bytes_written

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.flops + other.flops, self.bytes_read + other.bytes_read,
                    self.bytes_written + other.bytes_written,
                    self.transcendentals + other.transcendentals,
                    self.matmul_flops + other.matmul_flops)

    def scaled(self, factor: float) -> Cost:
        return Cost(self.flops * factor, self.bytes_read * factor, self.bytes_written * factor,
                    self.transcendentals * factor, self.matmul_flops * factor)


# ---------------------------------------------------------------------------
# Sizes

def _element_bits(t: Type) -> int:
    try:
        return element_facts(t).storage_bits
    except TypeError:
        raise CostModelError(f"no storage size for element type {t}") from None


def elements(t: Type) -> int:
    if isinstance(t, TensorType):
        if not t.is_static:
            raise CostModelError(f"cannot cost dynamic shape {t}")
        return t.num_elements
    raise CostModelError(f"not a tensor: {t}")


def type_bytes(t: Type) -> int:
    """Bytes a value of type ``t`` occupies in memory (tuples: their elements; a future: the
    results its collective writes, held from the start to the done)."""
    if isinstance(t, (TupleType, FutureType)):
        return sum(type_bytes(e) for e in t.types)
    if isinstance(t, TokenType):
        return 0
    return math.ceil(elements(t) * _element_bits(t.element_type) / 8)


def _bytes(values: Iterable[Value]) -> int:
    return sum(type_bytes(v.type) for v in values)


def _complex_factor(t: Type) -> int:
    return COMPLEX_FACTOR if isinstance(t, TensorType) and \
        isinstance(t.element_type, ComplexType) else 1


# ---------------------------------------------------------------------------
# Per-op rules

@dataclass
class _Context:
    module: Module | None
    trip_count_default: int
    calls: list = field(default_factory=list)  # callee names being costed (recursion guard)


def _io(op: Operation, flops: float = 0.0) -> Cost:
    """Unfused cost: read every operand, write every result."""
    return Cost(flops, _bytes(op.operands), _bytes(op.results))


@dataclass(frozen=True)
class ElementwiseRule:
    """The cost rule of an elementwise op: ``weight`` flops per result element (Note [op
    weights]); ``transcendental`` when each result element is one transcendental evaluation
    (the ops XLA's HloCostAnalysis counts as "transcendentals")."""
    weight: float = 1.0
    transcendental: bool = False

    def __call__(self, op: Operation, ctx: _Context) -> Cost:
        out = op.results[0].type
        cost = _io(op, elements(out) * self.weight * _complex_factor(out))
        if self.transcendental:
            return dataclasses.replace(cost, transcendentals=float(elements(out)))
        return cost


_PLAIN = ElementwiseRule()
_DIVIDE_LIKE = ElementwiseRule(4.0)
_ROOT = ElementwiseRule(4.0, transcendental=True)
_TRANSCENDENTAL = ElementwiseRule(10.0, transcendental=True)
_TWO_TRANSCENDENTALS = ElementwiseRule(20.0, transcendental=True)
# The elementwise ops that are not ``_PLAIN``.
_ELEMENTWISE_RULES = {
    **{f"stablehlo.{name}": _DIVIDE_LIKE for name in ("divide", "remainder")},
    **{f"stablehlo.{name}": _ROOT for name in ("sqrt", "rsqrt", "cbrt")},
    **{f"stablehlo.{name}": _TRANSCENDENTAL for name in (
        "exponential", "exponential_minus_one", "log", "log_plus_one", "logistic", "tanh",
        "sine", "cosine")},
    **{name: _TWO_TRANSCENDENTALS for name in (
        "stablehlo.power", "stablehlo.atan2", "stablehlo.tan", "chlo.tan")},
    "stablehlo.clamp": ElementwiseRule(2.0),  # max + min
}


def elementwise_weight(name: str) -> float:
    """Flops per result element of the elementwise op ``name`` (1 for other ops)."""
    rule = COST_RULES.lookup(name)
    return rule.weight if isinstance(rule, ElementwiseRule) else 1.0


def _region_weight(region: Region) -> float:
    """Flops per application of a scalar region (reduce body, comparator)."""
    total = 0.0
    for block in region.blocks:
        for inner in block.operations:
            for op in inner.walk():
                opdef = op.opdef
                if opdef is not None and opdef.has(ELEMENTWISE):
                    total += elementwise_weight(op.name)
    return max(total, 1.0)


def _product(values) -> int:
    return int(np.prod([int(v) for v in values], dtype=np.int64))


def _free(op: Operation, ctx: _Context) -> Cost:
    return Cost()


def _copy(op: Operation, ctx: _Context) -> Cost:
    return _io(op)


def _write_only(op: Operation, ctx: _Context) -> Cost:
    return Cost(0.0, 0.0, _bytes(op.results))


def _subrange_read(op: Operation, ctx: _Context) -> Cost:
    # slice/gather read only the selected elements (plus indices), not the whole operand
    written = _bytes(op.results)
    return Cost(0.0, written + _bytes(op.operands[1:]), written)


def _dynamic_update_slice(op: Operation, ctx: _Context) -> Cost:
    # in place: the operand buffer is reused, only the update and indices move
    update = type_bytes(op.operands[1].type)
    return Cost(0.0, update + _bytes(op.operands[2:]), update)


def _scatter(op: Operation, ctx: _Context) -> Cost:
    # in place like dynamic_update_slice; each update also reads the old value it combines with
    n = (len(op.operands) - 1) // 2
    updates = op.operands[n + 1:]
    update_bytes = _bytes(updates)
    flops = sum(elements(u.type) for u in updates[:1]) * _region_weight(op.regions[0])
    return Cost(flops, 2 * update_bytes + type_bytes(op.operands[n].type), update_bytes)


def _reduce(op: Operation, ctx: _Context) -> Cost:
    inputs = op.operands[:len(op.operands) // 2]
    return _io(op, elements(inputs[0].type) * _region_weight(op.regions[0]))


def _window_size(op: Operation) -> int:
    return _product(attr_to_python(op.attributes["window_dimensions"]))


def _reduce_window(op: Operation, ctx: _Context) -> Cost:
    per_window = _window_size(op) * _region_weight(op.regions[0])
    return _io(op, elements(op.results[0].type) * per_window)


def _select_and_scatter(op: Operation, ctx: _Context) -> Cost:
    weight = _region_weight(op.regions[0]) + _region_weight(op.regions[1])
    return _io(op, elements(op.operands[1].type) * _window_size(op) * weight)


def _sort(op: Operation, ctx: _Context) -> Cost:
    t = op.operands[0].type
    dim = int(attr_to_python(op.attributes.get("dimension", -1)))
    length = t.shape[dim] if t.rank else 1
    compares = elements(t) * max(math.ceil(math.log2(max(length, 1))), 1)
    return _io(op, compares * _region_weight(op.regions[0]))


def _map(op: Operation, ctx: _Context) -> Cost:
    return _io(op, elements(op.results[0].type) * _region_weight(op.regions[0]))


def _matmul(op: Operation, flops: float) -> Cost:
    return dataclasses.replace(_io(op, flops), matmul_flops=flops)


def _dot_general(op: Operation, ctx: _Context) -> Cost:
    lhs = op.operands[0].type
    if op.name == "stablehlo.dot":
        contracting = lhs.shape[-1] if lhs.rank else 1
    else:
        dims = struct_ints(op.attributes["dot_dimension_numbers"], "lhs_contracting_dimensions")
        contracting = _product(lhs.shape[d] for d in dims)
    # every result element (batch x M x N) is a length-K dot product: K multiply-adds
    out = op.results[0].type
    return _matmul(op, 2.0 * elements(out) * contracting * _complex_factor(lhs))


def _convolution(op: Operation, ctx: _Context) -> Cost:
    kernel = op.operands[1].type
    dn = op.attributes["dimension_numbers"]
    if not isinstance(dn, ConvDimensionNumbersAttr):
        raise CostModelError(f"{op.where()}: no convolution dimension numbers")
    window = _product(kernel.shape[d] for d in dn.kernel_spatial_dimensions)
    # the kernel's input-feature dim is already input features / feature_group_count
    features_per_group = kernel.shape[dn.kernel_input_feature_dimension]
    out = op.results[0].type
    return _matmul(op, 2.0 * elements(out) * window * features_per_group *
                   _complex_factor(kernel))


def _fft(op: Operation, ctx: _Context) -> Cost:
    size = _product(attr_to_python(op.attributes["fft_length"]))
    transforms = max(elements(op.operands[0].type) // max(size, 1), 1)
    # radix-2 Cooley-Tukey: 5 N log2 N real flops per complex transform of length N
    return _io(op, transforms * 5.0 * size * max(math.log2(max(size, 1)), 1.0))


def _cholesky(op: Operation, ctx: _Context) -> Cost:
    t = op.operands[0].type
    n = t.shape[-1]
    return _io(op, (elements(t) // (n * n)) * n ** 3 / 3.0 * _complex_factor(t))


def _triangular_solve(op: Operation, ctx: _Context) -> Cost:
    a, b = op.operands[0].type, op.operands[1].type
    n = a.shape[-1]
    # substitution costs n^2 flops per right-hand-side column
    rhs_columns = elements(b) // n
    return _io(op, rhs_columns * n * n * _complex_factor(a))


def _block_cost(block: Block, ctx: _Context) -> Cost:
    total = Cost()
    for op in block.operations:
        total = total + _op_cost(op, ctx)
    return total


def _region_cost(region: Region, ctx: _Context) -> Cost:
    total = Cost()
    for block in region.blocks:
        total = total + _block_cost(block, ctx)
    return total


def _while(op: Operation, ctx: _Context) -> Cost:
    trips = while_trip_count(op)
    trips = ctx.trip_count_default if trips is None else trips
    per_trip = _region_cost(op.regions[0], ctx) + _region_cost(op.regions[1], ctx)
    return per_trip.scaled(trips)


def _branches(op: Operation, ctx: _Context) -> Cost:
    # the taken branch is unknown statically: charge the most expensive one
    costs = [_region_cost(r, ctx) for r in op.regions]
    return max(costs, key=lambda c: (c.flops, c.bytes_accessed), default=Cost())


def _call(op: Operation, ctx: _Context) -> Cost:
    attr = op.attributes.get("callee") or op.attributes.get("decomposition")
    if ctx.module is None or not isinstance(attr, SymbolRefAttr):
        return _io(op)
    if attr.name in ctx.calls:
        raise CostModelError(f"{op.where()}: recursive call to @{attr.name}")
    try:
        callee = ctx.module.lookup(attr.name)
    except KeyError:
        raise CostModelError(f"{op.where()}: no function @{attr.name}") from None
    ctx.calls.append(attr.name)
    try:
        inside = _block_cost(callee.body, ctx)
    finally:
        ctx.calls.pop()
    if op.name == "stablehlo.composite":
        # one op: its intermediates never reach memory (see the module docstring)
        return dataclasses.replace(_io(op, inside.flops), transcendentals=inside.transcendentals,
                                   matmul_flops=inside.matmul_flops)
    return inside


_FORMULAS: dict[str, Callable[[Operation, _Context], Cost]] = {
    **{f"stablehlo.{n}": _free for n in (
        "reshape", "bitcast_convert", "get_tuple_element", "tuple", "optimization_barrier",
        "constant", "return", "after_all", "create_token", "get_dimension_size",
        "replica_id", "partition_id")},
    "func.return": _free,
    **{f"stablehlo.{n}": _copy for n in (
        "broadcast_in_dim", "broadcast", "transpose", "reverse", "concatenate", "pad")},
    "stablehlo.iota": _write_only,
    **{f"stablehlo.{n}": _subrange_read for n in (
        "slice", "dynamic_slice", "gather", "torch_index_select")},
    "stablehlo.dynamic_update_slice": _dynamic_update_slice,
    "stablehlo.scatter": _scatter,
    "stablehlo.reduce": _reduce,
    "stablehlo.reduce_window": _reduce_window,
    "stablehlo.select_and_scatter": _select_and_scatter,
    "stablehlo.sort": _sort,
    "stablehlo.map": _map,
    "stablehlo.dot_general": _dot_general,
    "stablehlo.dot": _dot_general,
    "stablehlo.convolution": _convolution,
    "stablehlo.fft": _fft,
    "stablehlo.cholesky": _cholesky,
    "stablehlo.triangular_solve": _triangular_solve,
    "stablehlo.while": _while,
    "stablehlo.if": _branches,
    "stablehlo.case": _branches,
    "func.call": _call,
    "stablehlo.composite": _call,
}


# Registered ops costed as a copy: no formula for their work (see the module docstring).
_NO_FORMULA = (
    "builtin.module", "func.func", "stablehlo.custom_call", "stablehlo.rng",
    "stablehlo.rng_bit_generator", "stablehlo.batch_norm_training",
    "stablehlo.batch_norm_inference", "stablehlo.batch_norm_grad", "stablehlo.einsum",
    "stablehlo.unary_einsum", "stablehlo.dynamic_conv", "stablehlo.set_dimension_size",
    "stablehlo.dynamic_iota", "stablehlo.dynamic_broadcast_in_dim", "stablehlo.dynamic_reshape",
    "stablehlo.dynamic_pad", "stablehlo.real_dynamic_slice", "stablehlo.dynamic_gather",
    "stablehlo.infeed", "stablehlo.outfeed", "stablehlo.send", "stablehlo.recv",
    "stablehlo.async_start", "stablehlo.async_done", "openhlo.async_start",
    "openhlo.async_done", "stablehlo.all_gather",
    "stablehlo.all_reduce", "stablehlo.reduce_scatter", "stablehlo.all_to_all",
    "stablehlo.collective_permute", "stablehlo.collective_broadcast",
    "stablehlo.collective_reduce", "chlo.top_k", "chlo.ragged_dot", "chlo.scan",
    "check.expect_eq", "check.expect_eq_const", "check.expect_almost_eq",
    "check.expect_almost_eq_const", "check.expect_close", "check.expect_serialized_eq",
    "interpreter.probe", "interpreter.run_parallel", "interpreter.print",
)

# The cost rule of every registered op, keyed by its name.
COST_RULES: Registry[Callable[[Operation, _Context], Cost]] = Registry("cost rule")
for _name, _rule in _FORMULAS.items():
    COST_RULES.register(_name, _rule)
for _name in _NO_FORMULA:
    COST_RULES.register(_name, _copy)
for _name in OPS.names():
    if OPS.get(_name).has(ELEMENTWISE):
        COST_RULES.register(_name, _ELEMENTWISE_RULES.get(_name, _PLAIN))


def _op_cost(op: Operation, ctx: _Context) -> Cost:
    if op.opdef is None:
        return _copy(op, ctx)  # an op OpenHLO does not model: its operands and results
    if op.name not in COST_RULES:
        raise CostModelError(f"{op.where()}: {op.name} has no cost rule (register one in "
                             f"xla_core/cost/estimates.py COST_RULES)")
    return COST_RULES.get(op.name)(op, ctx)


# ---------------------------------------------------------------------------
# Public API

def op_cost(op: Operation, *, module: Module | None = None,
            trip_count_default: int = DEFAULT_TRIP_COUNT) -> Cost:
    """Cost of ``op`` run as its own kernel(s). Control flow includes its regions
    (see Note [while trip count]); calls and composites include the callee when
    ``module`` is given, else count only their operands and results."""
    return _op_cost(op, _Context(module, trip_count_default))


def fusion_cost(ops: Sequence[Operation], external_inputs: Iterable[Value] | None,
                outputs: Iterable[Value]) -> Cost:
    """Cost of ``ops`` fused into one kernel.

    Flops add up; bytes are only those of ``external_inputs`` (read once each,
    even if several ops use them; ``None`` = every operand not produced inside
    the group), the data of constants inside the group, and ``outputs`` (the
    results that leave the group). Intermediates stay in registers or cache.
    """
    group = list(ops)
    produced = {r for op in group for r in op.results}
    if external_inputs is None:
        external_inputs = [v for op in group for v in op.operands if v not in produced]
    inputs = list(dict.fromkeys(external_inputs))
    outs = list(dict.fromkeys(outputs))
    inside = [v for v in inputs if v in produced]
    if inside:
        raise CostModelError(f"external inputs produced inside the fusion: {inside}")
    outside = [v for v in outs if v not in produced]
    if outside:
        raise CostModelError(f"fusion outputs not produced by the fusion: {outside}")
    costs = [op_cost(op) for op in group]
    constants = sum(_bytes(op.results) for op in group if op.name == "stablehlo.constant")
    return Cost(sum(c.flops for c in costs), _bytes(inputs) + constants, _bytes(outs),
                sum(c.transcendentals for c in costs), sum(c.matmul_flops for c in costs))


def roofline_seconds(cost: Cost, hw: HardwareDescription) -> float:
    """Time of one kernel: bound by compute or by memory traffic, plus the step overhead;
    with the host shared by ``hw.devices_per_host`` devices computing at once (Note [devices
    sharing a host's cores] in hardware.py), each gets its share. Matrix products run at
    the rate of their size where ``hw`` has a ``matmul_curve`` (Note [matmul curve])."""
    compute = cost.flops * hw.compute_sharing / hw.peak_flops
    if cost.matmul_flops and hw.matmul_curve:
        compute += cost.matmul_flops * (1.0 / hw.device_matmul_rate(cost.matmul_flops) -
                                         hw.compute_sharing / hw.peak_flops)
    memory = cost.bytes_accessed * hw.core_sharing / hw.memory_bandwidth
    return max(compute, memory) + hw.step_overhead


def module_cost(module: Module, function: str | None = None, *,
                trip_count_default: int = DEFAULT_TRIP_COUNT) -> Cost:
    """Unfused cost of one function (``main``, or the only public one), calls included."""
    if function is None:
        publics = [f.name for f in module.functions() if f.visibility == "public"]
        if module.has_function("main"):
            function = "main"
        elif len(publics) == 1:
            function = publics[0]
        else:
            raise CostModelError(f"name the function to cost; public functions: {publics}")
    ctx = _Context(module, trip_count_default, [function])
    return _block_cost(module.lookup(function).body, ctx)


class CountedWhile(NamedTuple):
    """A ``stablehlo.while`` that counts: carried value ``index`` starts at ``start``, the
    body adds ``step`` (> 0) to it, and the condition compares it with the constant
    ``limit`` (``compare``, LT or LE), so the loop runs ``trips`` times."""
    index: int
    start: int
    step: int
    limit: int
    compare: Operation
    trips: int


def counted_while(op: Operation) -> CountedWhile | None:
    """The counter of a recognizable counted ``stablehlo.while``, else None."""
    cond, body = op.regions[0].block, op.regions[1].block
    predicate = cond.terminator.operands[0] if cond.terminator.operands else None
    compare = _defining(predicate, "stablehlo.compare")
    if compare is None:
        return None
    direction = compare.attributes.get("comparison_direction")
    if not isinstance(direction, EnumAttr) or direction.value not in ("LT", "LE"):
        return None
    iv, limit = compare.operands
    limit_value = _constant_int(limit)
    if not (iv.is_block_argument and iv.owner is cond) or limit_value is None:
        return None
    start = _constant_int(op.operands[iv.index])
    step = _increment(body, iv.index)
    if start is None or step is None:
        return None
    end = limit_value + (1 if direction.value == "LE" else 0)
    return CountedWhile(iv.index, start, step, limit_value, compare,
                        max(0, -(-(end - start) // step)))


def while_trip_count(op: Operation) -> int | None:
    """Trip count of a recognizable counted ``stablehlo.while``, else None."""
    counted = counted_while(op)
    return None if counted is None else counted.trips


def _defining(value: Value | None, name: str) -> Operation | None:
    if value is None or value.is_block_argument or value.owner.name != name:
        return None
    return value.owner


def _constant_int(value: Value) -> int | None:
    const = _defining(value, "stablehlo.constant")
    attr = const.attributes.get("value") if const is not None else None
    if not isinstance(attr, DenseElementsAttr):
        return None
    array = np.asarray(attr.array)
    if array.size != 1 or not np.issubdtype(array.dtype, np.integer):
        return None
    return int(array.reshape(-1)[0])


def _increment(body: Block, index: int) -> int | None:
    """``c`` when the body returns ``add(arg[index], c)`` for a positive constant ``c``."""
    add = _defining(body.terminator.operands[index], "stablehlo.add")
    if add is None:
        return None
    arg = body.arguments[index]
    for a, b in (add.operands, add.operands[::-1]):
        if a is arg:
            step = _constant_int(b)
            return step if step is not None and step > 0 else None
    return None
