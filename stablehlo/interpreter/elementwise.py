"""Interpreter kernels of the arithmetic, bitwise, logical and comparison ops.

Semantics follow the StableHLO spec for every element type. Where the spec
leaves a result open, the kernels do what XLA does, because the conformance
expectations were produced by XLA:

* integer ``x / 0`` is -1 (all bits set, so the maximum for unsigned types)
  and ``x % 0`` is ``x``; ``INT_MIN / -1`` wraps to ``INT_MIN`` and
  ``INT_MIN % -1`` is 0;
* shifts by an amount >= the bit width (the amount is read as unsigned)
  give 0, or the sign fill for ``shift_right_arithmetic``;
* integer ``power`` with a negative exponent is 0 except for bases 1 and -1.

Integer arithmetic wraps around (see numerics.py for how every width, down
to i2, is handled). The transcendental float ops live in elementwise_math.py
and the conversions in conversions.py; importing this module registers all
three.
"""
from __future__ import annotations

import numpy as np

from stablehlo.errors import InterpreterError
from stablehlo.interpreter import numerics as nx
from stablehlo.interpreter.kernels import kernel
from stablehlo.ir.types import numpy_dtype


def result_dtype(op, index: int = 0) -> np.dtype:
    return numpy_dtype(op.result_types[index].element_type)


def _binary(op, lhs, rhs, *, ints=None, floats=None, complexes=None, bools=None,
            native_floats=True):
    """Dispatch a binary elementwise op on the operands' element category.

    ``ints(a, b, dtype)`` gets int64/uint64 copies and its result is wrapped
    to the width; ``floats(a, b)`` runs natively on f32/f64 when
    ``native_floats`` (IEEE-exact ops) and in float64 otherwise. For complex
    operands ``complexes(a, b)``, if given, runs in complex128 and is rounded;
    otherwise ``floats`` runs natively on them.
    """
    dtype = lhs.dtype
    kind = nx.category(dtype)
    if kind == nx.BOOL and bools is not None:
        return np.asarray(bools(lhs, rhs), dtype=np.bool_)
    if kind in (nx.SINT, nx.UINT) and ints is not None:
        return nx.wrap_int(ints(nx.widen_int(lhs), nx.widen_int(rhs), dtype), dtype)
    if kind == nx.FLOAT and floats is not None:
        if native_floats and dtype in (np.float32, np.float64):
            return np.asarray(floats(lhs, rhs), dtype=dtype)
        return nx.map_float(floats, dtype, lhs, rhs)
    if kind == nx.COMPLEX and (complexes or floats) is not None:
        if complexes is None:
            return np.asarray(floats(lhs, rhs), dtype=dtype)
        return nx.map_float(complexes, dtype, lhs, rhs)
    raise nx.unsupported(op, dtype)


# ---------------------------------------------------------------------------
# add, subtract, multiply, divide, remainder, power


@kernel("stablehlo.add")
@nx.quiet
def add(ctx, op, lhs, rhs):
    return _binary(op, lhs, rhs, ints=lambda a, b, _: a + b, floats=np.add,
                   bools=np.logical_or)


@kernel("stablehlo.subtract")
@nx.quiet
def subtract(ctx, op, lhs, rhs):
    return _binary(op, lhs, rhs, ints=lambda a, b, _: a - b, floats=np.subtract)


@kernel("stablehlo.multiply")
@nx.quiet
def multiply(ctx, op, lhs, rhs):
    return _binary(op, lhs, rhs, ints=lambda a, b, _: a * b, floats=np.multiply,
                   bools=np.logical_and)


def _trunc_divide(a, b):
    """Integer division rounding toward zero; ``b`` must be nonzero."""
    quotient = a // b
    if a.dtype == np.uint64:
        return quotient
    inexact = (a - quotient * b) != 0
    return quotient + (inexact & ((a < 0) != (b < 0))).astype(a.dtype)


def _safe_divisor(a, b, dtype):
    """(divisor with the undefined cases replaced by 1, zero mask)."""
    zero = b == 0
    unsafe = zero
    if a.dtype == np.int64 and nx.int_width(dtype) == 64:
        # INT64_MIN / -1 overflows in numpy itself; x / 1 gives the wrapped answer.
        unsafe = zero | ((a == np.iinfo(np.int64).min) & (b == -1))
    return np.where(unsafe, np.ones_like(b), b), zero


def _int_divide(a, b, dtype):
    divisor, zero = _safe_divisor(a, b, dtype)
    quotient = _trunc_divide(a, divisor)
    all_ones = np.array(-1).astype(a.dtype) if a.dtype == np.int64 else np.uint64(2**64 - 1)
    return np.where(zero, all_ones, quotient)


def _int_remainder(a, b, dtype):
    divisor, zero = _safe_divisor(a, b, dtype)
    remainder = a - _trunc_divide(a, divisor) * divisor
    return np.where(zero, a, remainder)


def _complex_divide(a, b):
    """Complex division with the special values of C99 Annex G (G.5.1).

    numpy gives NaN + NaN i whenever an infinity or a zero divisor enters
    Smith's algorithm; Annex G (and XLA) recover the infinite or zero result.
    """
    quotient = a / b
    lost = np.isnan(quotient.real) & np.isnan(quotient.imag)
    if not lost.any():
        return quotient
    x, y, c, d = a.real, a.imag, b.real, b.imag
    zero_divisor = (c == 0) & (d == 0) & ~(np.isnan(x) & np.isnan(y))
    inf_c = np.copysign(np.inf, c)
    by_zero = _complex_parts(inf_c * x, inf_c * y)
    x_unit = np.copysign(np.where(np.isinf(x), 1.0, 0.0), x)
    y_unit = np.copysign(np.where(np.isinf(y), 1.0, 0.0), y)
    infinite_dividend = ((np.isinf(x) | np.isinf(y)) & np.isfinite(c) & np.isfinite(d))
    big = _complex_parts(np.inf * (x_unit * c + y_unit * d), np.inf * (y_unit * c - x_unit * d))
    c_unit = np.copysign(np.where(np.isinf(c), 1.0, 0.0), c)
    d_unit = np.copysign(np.where(np.isinf(d), 1.0, 0.0), d)
    infinite_divisor = (np.isinf(c) | np.isinf(d)) & np.isfinite(x) & np.isfinite(y)
    small = _complex_parts(0.0 * (x * c_unit + y * d_unit), 0.0 * (y * c_unit - x * d_unit))
    recovered = np.where(zero_divisor, by_zero,
                         np.where(infinite_dividend, big,
                                  np.where(infinite_divisor, small, quotient)))
    return np.where(lost, recovered, quotient)


def _complex_parts(real, imag):
    result = np.empty(np.broadcast_shapes(np.shape(real), np.shape(imag)), dtype=np.complex128)
    result.real = real
    result.imag = imag
    return result


@kernel("stablehlo.divide")
@nx.quiet
def divide(ctx, op, lhs, rhs):
    return _binary(op, lhs, rhs, ints=_int_divide, floats=np.divide,
                   complexes=_complex_divide)


@kernel("stablehlo.remainder")
@nx.quiet
def remainder(ctx, op, lhs, rhs):
    # Float remainder takes the sign of the dividend: C fmod, not IEEE remainder.
    return _binary(op, lhs, rhs, ints=_int_remainder, floats=np.fmod,
                   complexes=_complex_remainder)


def _complex_remainder(a, b):
    # The spec leaves complex remainder TBD; use lhs - trunc(lhs / rhs) * rhs
    # with the quotient truncated per component, as XLA does.
    quotient = a / b
    truncated = np.trunc(quotient.real) + 1j * np.trunc(quotient.imag)
    return a - truncated * b


def _int_power(base, exponent, dtype):
    """Exponentiation by squaring; wrap-around is applied by the caller."""
    negative = exponent < 0 if base.dtype == np.int64 else np.zeros(exponent.shape, bool)
    remaining = np.where(negative, 0, exponent).astype(np.uint64)
    result = np.ones(np.broadcast_shapes(base.shape, exponent.shape), dtype=base.dtype)
    square = np.array(base, copy=True)
    while remaining.any():
        odd = (remaining & np.uint64(1)) == 1
        result = np.where(odd, result * square, result)
        square = square * square
        remaining = remaining >> np.uint64(1)
    if base.dtype == np.int64:
        # 1 / base**n truncates to 0 unless |base| == 1.
        odd_exponent = (exponent & 1) == 1
        minus_one = np.where(odd_exponent, -1, 1)
        small = np.where(base == 1, 1, np.where(base == -1, minus_one, 0))
        result = np.where(negative, small, result)
    return result


@kernel("stablehlo.power")
@nx.quiet
def power(ctx, op, lhs, rhs):
    return _binary(op, lhs, rhs, ints=_int_power, floats=np.power, complexes=np.power,
                   native_floats=False)


# ---------------------------------------------------------------------------
# maximum, minimum, clamp


def _pick_lhs_float(a, b, want_max: bool):
    """Whether to take lhs: IEEE maximum/minimum (NaN wins, -0 < +0)."""
    a64, b64 = nx.to_float64(a), nx.to_float64(b)
    if want_max:
        better = (a64 > b64) | ((a64 == b64) & ~np.signbit(a64))
    else:
        better = (a64 < b64) | ((a64 == b64) & np.signbit(a64))
    return better | np.isnan(a64)


def _pick_lhs_complex(a, b, want_max: bool):
    """Lexicographic order on (real, imag)."""
    if want_max:
        return (a.real > b.real) | ((a.real == b.real) & (a.imag > b.imag))
    return (a.real < b.real) | ((a.real == b.real) & (a.imag < b.imag))


def _extremum(op, lhs, rhs, want_max: bool):
    kind = nx.category(lhs.dtype)
    if kind == nx.BOOL:
        return (lhs | rhs) if want_max else (lhs & rhs)
    if kind in (nx.SINT, nx.UINT):
        a, b = nx.widen_int(lhs), nx.widen_int(rhs)
        pick = a > b if want_max else a < b
    elif kind == nx.FLOAT:
        pick = _pick_lhs_float(lhs, rhs, want_max)
    elif kind == nx.COMPLEX:
        pick = _pick_lhs_complex(lhs, rhs, want_max)
    else:
        raise nx.unsupported(op, lhs.dtype)
    return np.where(pick, lhs, rhs).astype(lhs.dtype)


@kernel("stablehlo.maximum")
@nx.quiet
def maximum(ctx, op, lhs, rhs):
    return _extremum(op, lhs, rhs, want_max=True)


@kernel("stablehlo.minimum")
@nx.quiet
def minimum(ctx, op, lhs, rhs):
    return _extremum(op, lhs, rhs, want_max=False)


@kernel("stablehlo.clamp")
@nx.quiet
def clamp(ctx, op, min_value, operand, max_value):
    # min/max may be scalars: they broadcast against the operand.
    lower = np.broadcast_to(min_value, operand.shape)
    upper = np.broadcast_to(max_value, operand.shape)
    raised = _extremum(op, operand, lower, want_max=True)
    return _extremum(op, raised, upper, want_max=False)


# ---------------------------------------------------------------------------
# negate, abs, sign


@kernel("stablehlo.negate")
@nx.quiet
def negate(ctx, op, operand):
    kind = nx.category(operand.dtype)
    if kind in (nx.SINT, nx.UINT):
        return nx.wrap_int(np.negative(nx.widen_int(operand)), operand.dtype)
    if kind == nx.FLOAT:
        return nx.map_float(np.negative, operand.dtype, operand)
    if kind == nx.COMPLEX:
        return np.negative(operand)
    raise nx.unsupported(op, operand.dtype)


@kernel("stablehlo.abs")
@nx.quiet
def abs_(ctx, op, operand):
    kind = nx.category(operand.dtype)
    if kind in (nx.SINT, nx.UINT):
        # abs(INT_MIN) wraps to INT_MIN.
        return nx.wrap_int(np.abs(nx.widen_int(operand)), operand.dtype)
    if kind == nx.FLOAT:
        return nx.map_float(np.abs, operand.dtype, operand)
    if kind == nx.COMPLEX:
        modulus = np.abs(operand.astype(np.complex128))  # hypot: no overflow
        return nx.round_to(modulus, result_dtype(op))
    raise nx.unsupported(op, operand.dtype)


def _float_sign(x):
    # NaN and signed zeros are returned unchanged.
    return np.where(np.isnan(x) | (x == 0), x, np.where(x < 0, -1.0, 1.0))


def _complex_sign(z):
    modulus = np.abs(z)
    # Divide each part by the real modulus: (inf, 1) gives (nan, 0) as in XLA.
    unit = (z.real / modulus) + 1j * (z.imag / modulus)
    unit = np.where(modulus == 0, 0j, unit)
    has_nan = np.isnan(z.real) | np.isnan(z.imag)
    return np.where(has_nan, complex(np.nan, np.nan), unit)


@kernel("stablehlo.sign")
@nx.quiet
def sign(ctx, op, operand):
    kind = nx.category(operand.dtype)
    if kind == nx.SINT:
        return np.sign(nx.widen_int(operand)).astype(operand.dtype)
    if kind == nx.UINT:
        return (operand != 0).astype(operand.dtype)
    if kind == nx.FLOAT:
        return nx.map_float(_float_sign, operand.dtype, operand)
    if kind == nx.COMPLEX:
        return nx.map_float(_complex_sign, operand.dtype, operand)
    raise nx.unsupported(op, operand.dtype)


# ---------------------------------------------------------------------------
# Bitwise and logical ops


def _bitwise(op, lhs, rhs, fn):
    kind = nx.category(lhs.dtype)
    if kind == nx.BOOL:
        return fn(lhs, rhs)
    if kind in (nx.SINT, nx.UINT):
        return nx.wrap_int(fn(nx.widen_int(lhs), nx.widen_int(rhs)), lhs.dtype)
    raise nx.unsupported(op, lhs.dtype)


@kernel("stablehlo.and")
def and_(ctx, op, lhs, rhs):
    return _bitwise(op, lhs, rhs, np.bitwise_and)


@kernel("stablehlo.or")
def or_(ctx, op, lhs, rhs):
    return _bitwise(op, lhs, rhs, np.bitwise_or)


@kernel("stablehlo.xor")
def xor(ctx, op, lhs, rhs):
    return _bitwise(op, lhs, rhs, np.bitwise_xor)


@kernel("stablehlo.not")
def not_(ctx, op, operand):
    kind = nx.category(operand.dtype)
    if kind == nx.BOOL:
        return np.logical_not(operand)
    if kind in (nx.SINT, nx.UINT):
        return nx.wrap_int(np.invert(nx.widen_int(operand)), operand.dtype)
    raise nx.unsupported(op, operand.dtype)


def _shift_operands(op, lhs, rhs):
    """(lhs bit patterns, shift amounts read as unsigned, width)."""
    if nx.category(lhs.dtype) not in (nx.SINT, nx.UINT):
        raise nx.unsupported(op, lhs.dtype)
    width = nx.int_width(lhs.dtype)
    amount = nx.to_unsigned_bits(rhs)
    return nx.to_unsigned_bits(lhs), amount, width


@kernel("stablehlo.shift_left")
def shift_left(ctx, op, lhs, rhs):
    bits, amount, width = _shift_operands(op, lhs, rhs)
    in_range = amount < width
    shifted = bits << np.where(in_range, amount, 0)
    return nx.wrap_int(np.where(in_range, shifted, 0), lhs.dtype)


@kernel("stablehlo.shift_right_logical")
def shift_right_logical(ctx, op, lhs, rhs):
    bits, amount, width = _shift_operands(op, lhs, rhs)
    in_range = amount < width
    shifted = bits >> np.where(in_range, amount, 0)
    return nx.wrap_int(np.where(in_range, shifted, 0), lhs.dtype)


@kernel("stablehlo.shift_right_arithmetic")
def shift_right_arithmetic(ctx, op, lhs, rhs):
    bits, amount, width = _shift_operands(op, lhs, rhs)
    # Read the pattern as signed (also for unsigned types, as XLA does), so
    # the shift fills with the top bit.
    signed = bits.view(np.int64) if width == 64 else _sign_extend(bits, width)
    clamped = np.minimum(amount, width - 1).astype(np.int64)
    return nx.wrap_int(signed >> clamped, lhs.dtype)


def _sign_extend(bits, width):
    top = np.uint64(1 << (width - 1))
    return (bits ^ top).astype(np.int64) - np.int64(1 << (width - 1))


@kernel("stablehlo.popcnt")
def popcnt(ctx, op, operand):
    if nx.category(operand.dtype) not in (nx.SINT, nx.UINT):
        raise nx.unsupported(op, operand.dtype)
    counts = np.bitwise_count(nx.to_unsigned_bits(operand)).astype(np.int64)
    return nx.wrap_int(counts, operand.dtype)


@kernel("stablehlo.count_leading_zeros")
def count_leading_zeros(ctx, op, operand):
    if nx.category(operand.dtype) not in (nx.SINT, nx.UINT):
        raise nx.unsupported(op, operand.dtype)
    bits = nx.to_unsigned_bits(operand)
    width = nx.int_width(operand.dtype)
    zeros = np.full(bits.shape, width, dtype=np.int64)
    for position in range(width):  # the highest set bit wins: scan upward
        is_set = ((bits >> np.uint64(position)) & np.uint64(1)) == 1
        zeros = np.where(is_set, width - 1 - position, zeros)
    return nx.wrap_int(zeros, operand.dtype)


# ---------------------------------------------------------------------------
# compare, select


_DIRECTIONS = {
    "EQ": np.equal, "NE": np.not_equal, "GE": np.greater_equal,
    "GT": np.greater, "LE": np.less_equal, "LT": np.less,
}


def total_order_keys(x):
    """int64 keys whose order is IEEE totalOrder (-NaN < -inf < -0 < +0 < NaN)."""
    width = nx.float_width(x.dtype)
    bits = nx.float_bits(x)
    magnitude = (bits & np.uint64((1 << (width - 1)) - 1)).astype(np.int64)
    negative = ((bits >> np.uint64(width - 1)) & np.uint64(1)) == 1
    return np.where(negative, -magnitude - 1, magnitude)


def _default_compare_type(kind: str) -> str:
    return {nx.SINT: "SIGNED", nx.UINT: "UNSIGNED", nx.BOOL: "UNSIGNED"}.get(kind, "FLOAT")


def _compare_complex(op, direction, a, b):
    if direction in ("EQ", "NE"):
        equal = (a.real == b.real) & (a.imag == b.imag)
        return equal if direction == "EQ" else ~equal
    # Lexicographic on (real, imag), each part compared with IEEE semantics.
    strict = _DIRECTIONS[direction[0] + "T"]
    imag_cmp = _DIRECTIONS[direction]
    return strict(a.real, b.real) | ((a.real == b.real) & imag_cmp(a.imag, b.imag))


def _compare_ints(compare_type, kind, a, b):
    """Integer operands as int64/uint64 read the way ``compare_type`` says."""
    if compare_type == "UNSIGNED" and kind == nx.SINT:
        return nx.to_unsigned_bits(a), nx.to_unsigned_bits(b)
    if compare_type == "SIGNED" and kind == nx.UINT:
        return _as_signed(a), _as_signed(b)
    return nx.widen_int(a), nx.widen_int(b)


def _as_signed(x):
    """Unsigned ``x`` with its bit pattern read as two's complement, as int64."""
    width = nx.int_width(x.dtype)
    bits = nx.to_unsigned_bits(x)
    return bits.view(np.int64) if width == 64 else _sign_extend(bits, width)


@kernel("stablehlo.compare")
@nx.quiet
def compare(ctx, op, lhs, rhs):
    direction = _enum_value(op, "comparison_direction")
    if direction not in _DIRECTIONS:
        raise InterpreterError(f"{op.where()}: unknown comparison_direction {direction!r}")
    kind = nx.category(lhs.dtype)
    compare_type = _enum_value(op, "compare_type", _default_compare_type(kind))
    if kind == nx.COMPLEX:
        return _compare_complex(op, direction, lhs, rhs)
    if kind == nx.FLOAT:
        if compare_type == "TOTALORDER":
            a, b = total_order_keys(lhs), total_order_keys(rhs)
        else:
            a, b = nx.to_float64(lhs), nx.to_float64(rhs)
    elif kind == nx.BOOL:
        a, b = lhs.astype(np.uint8), rhs.astype(np.uint8)
    else:
        a, b = _compare_ints(compare_type, kind, lhs, rhs)
    return np.asarray(_DIRECTIONS[direction](a, b), dtype=np.bool_)


def _enum_value(op, name: str, default=None):
    attr = op.attributes.get(name)
    if attr is None:
        if default is None:
            raise InterpreterError(f"{op.where()}: missing attribute '{name}'")
        return default
    return getattr(attr, "value", attr)


@kernel("stablehlo.select")
def select(ctx, op, pred, on_true, on_false):
    # A 0-d predicate selects whole tensors; otherwise it selects per element.
    return np.where(pred, on_true, on_false).astype(on_true.dtype)


# ---------------------------------------------------------------------------
# real, imag, complex


@kernel("stablehlo.real")
def real(ctx, op, operand):
    if nx.category(operand.dtype) == nx.COMPLEX:
        return np.asarray(operand.real, order="C")
    return operand


@kernel("stablehlo.imag")
def imag(ctx, op, operand):
    if nx.category(operand.dtype) == nx.COMPLEX:
        return np.asarray(operand.imag, order="C")
    return np.zeros_like(operand)


@kernel("stablehlo.complex")
def complex_(ctx, op, lhs, rhs):
    # Assemble the parts directly: lhs + 1j * rhs would turn inf * 1j into nan.
    result = np.empty(np.broadcast_shapes(lhs.shape, rhs.shape), dtype=result_dtype(op))
    result.real = lhs
    result.imag = rhs
    return result


# Importing these modules registers their kernels.
from stablehlo.interpreter import conversions as _conversions  # noqa: F401
from stablehlo.interpreter import elementwise_math as _elementwise_math  # noqa: F401
