"""The rules of the algebraic-simplifier pass: one function per rewrite, registered in ``RULES``.

A rule takes the op to rewrite and ``create`` (which builds a new op of that
op's result type right before it; see algebraic_simplifier.py) and returns the value that
replaces the op's one result, or None when it does not apply. The value must
have the op's exact result type: rules that forward an operand check that
themselves, and the driver raises if one does not.

"Constant" means a ``stablehlo.constant`` whose elements all have the same
bits (a splat), seen directly or through ``broadcast_in_dim`` ops.
Quantized element types are left alone: their arithmetic rescales and rounds.

Note [exact identities]
~~~~~~~~~~~~~~~~~~~~~~~
Every rewrite must give bit-identical results, so float identities are the
IEEE ones, under round-to-nearest:
* ``x + (-0.0) == x`` for every x, but ``x + (+0.0)`` is not x for x = -0.0
  (``-0.0 + 0.0 == +0.0``): the additive identity is -0.0, and ``add`` only
  folds a -0.0 constant. Likewise ``x - (+0.0) == x`` but ``x - (-0.0)`` is
  not. Complex numbers add componentwise, so the same holds per part. In
  formats without a negative zero (the ``*FNUZ`` float8s) the only zero is an
  identity, and the rule's constant is built by converting -0.0 to the
  format, which gives that zero; a format without any zero (f8E8M0FNU) gets
  no identity since -0.0 does not convert exactly.
* ``x * 1.0`` and ``x / 1.0`` are exact for every real x (NaN, inf, -0.0 and
  subnormals included). Not for complex: ``(a + bi) * (1 + 0i)`` computes
  ``a*1 - b*0``, which is NaN when b is infinite, so complex ``multiply`` and
  ``divide`` are not rewritten.
* Integer rules are exact (wrap-around included: ``-(-INT_MIN) == INT_MIN``).
* Signaling NaNs: IEEE arithmetic quiets them, so ``x * 1`` of a signaling
  NaN is a quiet NaN while the rewritten ``x`` stays signaling (XLA makes the
  same trade). Quiet NaNs keep their bits.

Note [convert pairs]
~~~~~~~~~~~~~~~~~~~~
``convert(convert(x : A) : B) : C`` is ``convert(x) : C`` when B holds every
value of A exactly (``_holds_exactly``): then the inner convert does not
change x's value (sign of zero, inf and NaN included), and StableHLO's
convert to C depends only on the value, with one exception: to an integer
type, floats saturate while integers wrap. So when A is an integer type, B
is not, and C is an integer type, A's range must fit in C as well (then
neither wraps nor saturates). Examples: f32 -> f64 -> f32 is x;
i8 -> i32 -> i64 is one convert; f32 -> f16 -> f32 rounds and stays;
i32 -> f64 -> i8 saturates where i32 -> i8 wraps, and stays.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from stablehlo.ir.attributes import DenseElementsAttr, i64_array
from stablehlo.ir.core import Operation, Value
from stablehlo.ir.ops.shape_inference import int_list, is_quant
from stablehlo.ir.types import ComplexType, FloatType, IntegerType, Type, numpy_dtype

Create = Callable[..., Value]


# ---------------------------------------------------------------------------
# Helpers

def producer(value: Value, name: str) -> Operation | None:
    """The op that defines ``value`` if it is a ``name`` op."""
    owner = value.owner
    return owner if isinstance(owner, Operation) and owner.name == name else None


def _forward(value: Value, op: Operation) -> Value | None:
    """``value`` as the replacement of ``op`` if it has ``op``'s result type."""
    return value if value.type == op.result.type else None


def splat(value: Value) -> np.ndarray | None:
    """The one element (a 0-d array) of a constant whose elements all have
    the same bits, looking through broadcast_in_dim; else None."""
    while (bcast := producer(value, "stablehlo.broadcast_in_dim")) is not None:
        value = bcast.operands[0]
    const = producer(value, "stablehlo.constant")
    attr = const.attributes.get("value") if const is not None else None
    if not isinstance(attr, DenseElementsAttr) or attr.array.size == 0:
        return None
    if not any(attr.array.strides):  # a splat held as one element: never materialize it
        return np.array(attr.array.flat[0], dtype=attr.array.dtype)
    flat = np.ascontiguousarray(attr.array).reshape(-1)
    data = flat.tobytes()
    if data != data[:flat.itemsize] * flat.size:
        return None
    return flat[0:1].reshape(())


def _kind(element_type: Type) -> str | None:
    """"bool", "int", "float" or "complex"; None for types the rules skip
    (quantized, index, and those without a numpy dtype such as tf32)."""
    try:
        numpy_dtype(element_type)
    except TypeError:
        return None
    if isinstance(element_type, IntegerType):
        return "bool" if element_type.width == 1 else "int"
    if isinstance(element_type, FloatType):
        return "float"
    if isinstance(element_type, ComplexType):
        return "complex"
    return None


def _exactly(element_type: Type, value) -> np.ndarray | None:
    """``value`` as a 0-d array of ``element_type``, or None when the type
    cannot hold it exactly (see Note [exact identities] for float zeros)."""
    dtype = numpy_dtype(element_type)
    if _kind(element_type) == "complex":
        array = np.array(value, dtype=dtype)
        return array if complex(array) == value else None
    array = np.array(value, dtype=np.float64 if _kind(element_type) == "float" else None)
    converted = array.astype(dtype)
    return converted if converted.astype(array.dtype) == array else None


def _all_ones(element_type: IntegerType):
    """The bitwise-and identity: true, -1, or the largest unsigned value."""
    if element_type.width == 1:
        return True
    return -1 if element_type.signed else (1 << element_type.width) - 1


def _identity_operand(op: Operation, by_kind: dict, commutative: bool) -> Value | None:
    """For a binary op whose right (or, if commutative, either) operand is a
    constant equal to its identity ``by_kind[kind]``, the other operand."""
    lhs, rhs = op.operands
    rhs_splat = splat(rhs)
    lhs_splat = splat(lhs) if commutative else None
    if rhs_splat is None and lhs_splat is None:
        return None  # the common case, decided without building the identity
    element_type = op.results[0].type.element_type
    key = (op.name, element_type)
    if key not in _IDENTITIES:
        kind = _kind(element_type)
        value = by_kind.get(kind)
        if callable(value):
            value = value(element_type)
        _IDENTITIES[key] = None if value is None else _exactly(element_type, value)
    identity = _IDENTITIES[key]
    if identity is None:
        return None
    if rhs_splat is not None and rhs_splat.tobytes() == identity.tobytes():
        return _forward(lhs, op)
    if lhs_splat is not None and lhs_splat.tobytes() == identity.tobytes():
        return _forward(rhs, op)
    return None


# (op name, element type) -> the identity of that op's rule as a 0-d array, or
# None: one rule per op name calls _identity_operand, so the pair fixes it.
_IDENTITIES: dict[tuple, np.ndarray | None] = {}


def _identity_dims(dims: list) -> bool:
    return dims == list(range(len(dims)))


# ---------------------------------------------------------------------------
# Arithmetic and logic identities (Note [exact identities])

def add_zero(op: Operation, create: Create) -> Value | None:
    # add(x, -0.0) -> x, add(-0.0, x) -> x; integers: add(x, 0) -> x; i1: x or false
    return _identity_operand(op, {"bool": False, "int": 0, "float": -0.0,
                                  "complex": complex(-0.0, -0.0)}, commutative=True)


def subtract_zero(op: Operation, create: Create) -> Value | None:
    # subtract(x, +0.0) -> x; integers: subtract(x, 0) -> x
    return _identity_operand(op, {"int": 0, "float": 0.0, "complex": 0j}, commutative=False)


def multiply_one(op: Operation, create: Create) -> Value | None:
    # multiply(x, 1) -> x, multiply(1, x) -> x (not complex); i1: x and true
    return _identity_operand(op, {"bool": True, "int": 1, "float": 1.0}, commutative=True)


def divide_one(op: Operation, create: Create) -> Value | None:
    # divide(x, 1) -> x (not complex)
    return _identity_operand(op, {"int": 1, "float": 1.0}, commutative=False)


def and_all_ones(op: Operation, create: Create) -> Value | None:
    # and(x, true) -> x, and(true, x) -> x; integers: and(x, ~0) -> x
    return _identity_operand(op, {"bool": _all_ones, "int": _all_ones}, commutative=True)


def or_zero(op: Operation, create: Create) -> Value | None:
    # or(x, false) -> x, or(false, x) -> x; integers: or(x, 0) -> x
    return _identity_operand(op, {"bool": False, "int": 0}, commutative=True)


def maximum_lowest(op: Operation, create: Create) -> Value | None:
    # maximum(x, -inf) -> x, maximum(-inf, x) -> x; integers: maximum(x, MIN) -> x; i1: x or false
    # (NaN x stays NaN with its payload: maximum propagates NaN; -0.0 stays -0.0)
    return _identity_operand(op, {"bool": False, "int": _lowest, "float": -np.inf},
                             commutative=True)


def minimum_highest(op: Operation, create: Create) -> Value | None:
    # minimum(x, +inf) -> x, minimum(+inf, x) -> x; integers: minimum(x, MAX) -> x; i1: x and true
    return _identity_operand(op, {"bool": True, "int": _highest, "float": np.inf},
                             commutative=True)


def _lowest(element_type: IntegerType) -> int:
    return _integer_bound(element_type)[0]


def _highest(element_type: IntegerType) -> int:
    return _integer_bound(element_type)[1]


def select_constant_pred(op: Operation, create: Create) -> Value | None:
    # select(true, a, b) -> a; select(false, a, b) -> b
    pred, on_true, on_false = op.operands
    found = splat(pred)
    if found is None:
        return None
    return _forward(on_true if bool(found) else on_false, op)


def select_same_branches(op: Operation, create: Create) -> Value | None:
    # select(p, a, a) -> a
    _, on_true, on_false = op.operands
    return _forward(on_true, op) if on_true is on_false else None


def involution(op: Operation, create: Create) -> Value | None:
    # negate(negate(x)) -> x; not(not(x)) -> x
    inner = producer(op.operands[0], op.name)
    if inner is None or is_quant(op.result.type.element_type):
        return None
    return _forward(inner.operands[0], op)


def abs_of_abs(op: Operation, create: Create) -> Value | None:
    # abs(abs(x)) -> abs(x) (also for complex x: the inner abs is already real)
    inner = producer(op.operands[0], "stablehlo.abs")
    if inner is None or is_quant(op.result.type.element_type):
        return None
    return _forward(inner.result, op)


# ---------------------------------------------------------------------------
# Shape chains

def reshape_chain(op: Operation, create: Create) -> Value | None:
    # reshape(x) : T -> x when x : T; reshape(reshape(x)) -> reshape(x)
    x = op.operands[0]
    inner = producer(x, "stablehlo.reshape")
    if x.type == op.result.type or inner is None:
        return _forward(x, op)
    source = inner.operands[0]
    return _forward(source, op) or create("stablehlo.reshape", [source], op)


def transpose_chain(op: Operation, create: Create) -> Value | None:
    # transpose(x, identity) -> x
    # transpose(transpose(x, p), q) -> transpose(x, [p[i] for i in q]), or x if that is the identity
    permutation = int_list(op, "permutation")
    x = op.operands[0]
    if _identity_dims(permutation):
        return _forward(x, op)
    inner = producer(x, "stablehlo.transpose")
    if inner is None:
        return None
    first = int_list(inner, "permutation")
    composed = [first[i] for i in permutation]
    source = inner.operands[0]
    if _identity_dims(composed):
        return _forward(source, op)
    return create("stablehlo.transpose", [source], op, {"permutation": i64_array(composed)})


def broadcast_chain(op: Operation, create: Create) -> Value | None:
    # broadcast_in_dim(x, dims = identity) : T -> x when x : T
    # broadcast_in_dim(broadcast_in_dim(x, d1), d2) -> broadcast_in_dim(x, [d2[i] for i in d1])
    dims = int_list(op, "broadcast_dimensions")
    x = op.operands[0]
    if _identity_dims(dims) and x.type == op.result.type:
        return x
    inner = producer(x, "stablehlo.broadcast_in_dim")
    if inner is None:
        return None
    composed = [dims[i] for i in int_list(inner, "broadcast_dimensions")]
    source = inner.operands[0]
    if _identity_dims(composed) and source.type == op.result.type:
        return source
    return create("stablehlo.broadcast_in_dim", [source], op,
                  {"broadcast_dimensions": i64_array(composed)})


def convert_chain(op: Operation, create: Create) -> Value | None:
    # convert(x) : T -> x when x : T
    # convert(convert(x : A) : B) : C -> convert(x) : C, or x when C == A (Note [convert pairs])
    x = op.operands[0]
    inner = producer(x, "stablehlo.convert")
    if x.type == op.result.type or inner is None:
        return _forward(x, op)
    source = inner.operands[0]
    a = source.type.element_type
    b = x.type.element_type
    c = op.result.type.element_type
    if _kind(c) is None or not _holds_exactly(a, b):
        return None
    saturates_instead_of_wrapping = (_kind(a) in ("bool", "int") and _kind(c) == "int"
                                     and _kind(b) in ("float", "complex"))
    if saturates_instead_of_wrapping and not _holds_exactly(a, c):
        return None
    return _forward(source, op) or create("stablehlo.convert", [source], op)


def slice_whole(op: Operation, create: Create) -> Value | None:
    # slice(x) : T -> x when x : T (static): a dimension of n >= 2 elements
    # can only keep all n with start 0, limit n and stride 1
    x = op.operands[0]
    return _forward(x, op) if x.type.is_static else None


def concatenate_one(op: Operation, create: Create) -> Value | None:
    # concatenate(x) -> x
    return _forward(op.operands[0], op) if len(op.operands) == 1 else None


def pad_nothing(op: Operation, create: Create) -> Value | None:
    # pad(x, v, low = 0, high = 0, interior = 0) -> x
    amounts = (int_list(op, "edge_padding_low") + int_list(op, "edge_padding_high")
               + int_list(op, "interior_padding"))
    return _forward(op.operands[0], op) if not any(amounts) else None


def reverse_chain(op: Operation, create: Create) -> Value | None:
    # reverse(x, dims) -> x when every reversed dimension has extent 1 (or dims = [])
    # reverse(reverse(x, d1), d2) -> reverse(x, d1 xor d2), or x if that reverses nothing
    x = op.operands[0]
    dims = set(int_list(op, "dimensions"))
    if _reverses_nothing(x, dims):
        return _forward(x, op)
    inner = producer(x, "stablehlo.reverse")
    if inner is None:
        return None
    dims ^= set(int_list(inner, "dimensions"))
    source = inner.operands[0]
    if _reverses_nothing(source, dims):
        return _forward(source, op)
    return create("stablehlo.reverse", [source], op, {"dimensions": i64_array(sorted(dims))})


def _reverses_nothing(x: Value, dims: set) -> bool:
    return all(x.type.shape[d] == 1 for d in dims)


# ---------------------------------------------------------------------------
# Exact representability (Note [convert pairs])

def _ieee_like(t: FloatType) -> bool:
    """Formats with zeros of both signs, infs and NaNs (the float type's facts say so);
    conversions between other formats (FN, FNUZ, E8M0) are never taken as exact."""
    return t.format.has_inf


def _integer_bound(t: IntegerType) -> tuple[int, int]:
    if t.width == 1:
        return 0, 1
    if t.signed:
        return -(1 << (t.width - 1)), (1 << (t.width - 1)) - 1
    return 0, (1 << t.width) - 1


def _float_holds_float(src: FloatType, dst: FloatType) -> bool:
    if not (_ieee_like(src) and _ieee_like(dst)):
        return src == dst
    p1, emin1, emax1 = src.precision, src.format.min_exponent, src.format.max_exponent
    p2, emin2, emax2 = dst.precision, dst.format.min_exponent, dst.format.max_exponent
    # more significand bits, more range, and a smallest subnormal
    # (2 ** (emin - p + 1)) no larger
    return p2 >= p1 and emax2 >= emax1 and emin2 - p2 <= emin1 - p1


def _float_holds_integers(t: IntegerType, dst: FloatType) -> bool:
    if not _ieee_like(dst):
        return False
    precision, emax = dst.precision, dst.format.max_exponent
    lo, hi = _integer_bound(t)
    bits = max(-lo, hi).bit_length()  # every integer below 2**bits must fit
    return bits <= precision and bits <= emax + 1


def _holds_exactly(src: Type, dst: Type) -> bool:
    """Whether converting any value of element type ``src`` to ``dst`` is exact."""
    if src == dst:
        return True
    src_kind, dst_kind = _kind(src), _kind(dst)
    if src_kind in ("bool", "int"):
        if dst_kind == "int":
            lo, hi = _integer_bound(src)
            dst_lo, dst_hi = _integer_bound(dst)
            return dst_lo <= lo and hi <= dst_hi
        if dst_kind == "float":
            return _float_holds_integers(src, dst)
        if dst_kind == "complex":
            return _float_holds_integers(src, dst.element_type)
        return False
    if src_kind == "float" and dst_kind in ("float", "complex"):
        part = dst if dst_kind == "float" else dst.element_type
        return _float_holds_float(src, part)
    if src_kind == "complex" and dst_kind == "complex":
        return _float_holds_float(src.element_type, dst.element_type)
    return False


# ---------------------------------------------------------------------------
# The table: (op name, rule); the rules of one op are tried in order.

RULES: list[tuple[str, Callable]] = [
    ("stablehlo.add", add_zero),
    ("stablehlo.subtract", subtract_zero),
    ("stablehlo.multiply", multiply_one),
    ("stablehlo.divide", divide_one),
    ("stablehlo.and", and_all_ones),
    ("stablehlo.or", or_zero),
    ("stablehlo.maximum", maximum_lowest),
    ("stablehlo.minimum", minimum_highest),
    ("stablehlo.select", select_constant_pred),
    ("stablehlo.select", select_same_branches),
    ("stablehlo.negate", involution),
    ("stablehlo.not", involution),
    ("stablehlo.abs", abs_of_abs),
    ("stablehlo.reshape", reshape_chain),
    ("stablehlo.transpose", transpose_chain),
    ("stablehlo.broadcast_in_dim", broadcast_chain),
    ("stablehlo.convert", convert_chain),
    ("stablehlo.slice", slice_whole),
    ("stablehlo.concatenate", concatenate_one),
    ("stablehlo.pad", pad_nothing),
    ("stablehlo.reverse", reverse_chain),
]

# Ops the pass may erase once it made them dead: the ones it rewrites and the
# constants it looks through, all pure.
ERASABLE = frozenset({name for name, _ in RULES} | {"stablehlo.constant"})
