"""Interpreter kernels of the unary float/complex math ops, rounding ops,
atan2 and reduce_precision.

Every function is evaluated in float64 (complex128 for complex types) and
rounded once to the element type, so f32/f16/bf16 results are correctly
rounded (XLA computes f16/bf16 in f32 and is within a few ULP of that).
Complex functions that lose accuracy when written naively (expm1, log1p)
use cancellation-free formulas.
"""
from __future__ import annotations

import numpy as np

from stablehlo.errors import InterpreterError
from stablehlo.interpreter import numerics as nx
from stablehlo.interpreter.kernels import kernel
from stablehlo.ir.attributes import attr_to_python


def _logistic(x):
    return 1.0 / (1.0 + np.exp(-x))


def _complex_logistic(z):
    # exp(z) / (1 + exp(z)) where Re z < 0, so that exp never overflows to
    # an infinite complex value (whose reciprocal numpy makes NaN, not 0).
    ez = np.exp(np.where(z.real < 0, z, -z))
    return np.where(z.real < 0, ez / (1.0 + ez), 1.0 / (1.0 + ez))


def _rsqrt(x):
    return 1.0 / np.sqrt(x)


def _complex_rsqrt(z):
    return complex_reciprocal(np.sqrt(z))


def complex_reciprocal(z):
    """1 / z with C99 Annex G infinities: 1 / inf is 0, 1 / 0 is inf."""
    with np.errstate(all="ignore"):
        result = 1.0 / z
    infinite = np.isinf(z.real) | np.isinf(z.imag)
    zero_part = _make_complex(np.copysign(0.0, z.real), np.copysign(0.0, -z.imag))
    result = np.where(infinite, zero_part, result)
    zero = (z.real == 0) & (z.imag == 0)
    return np.where(zero, complex(np.inf, np.nan), result)


def _complex_expm1(z):
    # exp(x) cos(y) - 1 = expm1(x) cos(y) - 2 sin(y/2)**2: no cancellation near 0.
    x, y = z.real, z.imag
    half_sin = np.sin(y / 2)
    real = np.expm1(x) * np.cos(y) - 2.0 * half_sin * half_sin
    imag = np.exp(x) * np.sin(y)
    return _make_complex(real, imag)


def _complex_log1p(z):
    # |1 + z|**2 = 1 + (2x + x**2 + y**2): log1p keeps the small part exact.
    x, y = z.real, z.imag
    near_zero = np.abs(z) < 0.5
    real_small = 0.5 * np.log1p(x * (2.0 + x) + y * y)
    small = _make_complex(real_small, np.arctan2(y, 1.0 + x))
    return np.where(near_zero, small, np.log(1.0 + z))


def _complex_cbrt(z):
    return np.power(z, 1.0 / 3.0)


def _make_complex(real, imag):
    result = np.empty(np.broadcast_shapes(np.shape(real), np.shape(imag)), dtype=np.complex128)
    result.real = real
    result.imag = imag
    return result


# op name -> (function on float64, function on complex128 or None)
_UNARY_MATH = {
    "stablehlo.exponential": (np.exp, np.exp),
    "stablehlo.exponential_minus_one": (np.expm1, _complex_expm1),
    "stablehlo.log": (np.log, np.log),
    "stablehlo.log_plus_one": (np.log1p, _complex_log1p),
    "stablehlo.logistic": (_logistic, _complex_logistic),
    "stablehlo.sine": (np.sin, np.sin),
    "stablehlo.cosine": (np.cos, np.cos),
    "stablehlo.tan": (np.tan, np.tan),
    "stablehlo.tanh": (np.tanh, np.tanh),
    "stablehlo.sqrt": (np.sqrt, np.sqrt),
    "stablehlo.rsqrt": (_rsqrt, _complex_rsqrt),
    "stablehlo.cbrt": (np.cbrt, _complex_cbrt),
    "stablehlo.floor": (np.floor, None),
    "stablehlo.ceil": (np.ceil, None),
    "stablehlo.round_nearest_even": (np.rint, None),
}


def apply_unary(op, operand, real_fn, complex_fn):
    """Evaluate ``real_fn``/``complex_fn`` in double precision, round once."""
    kind = nx.category(operand.dtype)
    if kind == nx.FLOAT:
        return nx.map_float(real_fn, operand.dtype, operand)
    if kind == nx.COMPLEX and complex_fn is not None:
        return nx.map_float(complex_fn, operand.dtype, operand)
    raise nx.unsupported(op, operand.dtype)


def register_unary(name, real_fn, complex_fn):
    @kernel(name)
    @nx.quiet
    def run(ctx, op, operand):
        return apply_unary(op, operand, real_fn, complex_fn)
    run.__name__ = name.split(".", 1)[1]
    return run


for _name, (_real_fn, _complex_fn) in _UNARY_MATH.items():
    register_unary(_name, _real_fn, _complex_fn)


def _round_half_away(x):
    truncated = np.trunc(x)
    # x - trunc(x) is exact, so the tie test is too (unlike floor(x + 0.5)).
    return np.where(np.abs(x - truncated) >= 0.5, truncated + np.sign(x), truncated)


@kernel("stablehlo.round_nearest_afz")
@nx.quiet
def round_nearest_afz(ctx, op, operand):
    return apply_unary(op, operand, _round_half_away, None)


@kernel("stablehlo.is_finite")
@nx.quiet
def is_finite(ctx, op, operand):
    if nx.category(operand.dtype) != nx.FLOAT:
        raise nx.unsupported(op, operand.dtype)
    return np.isfinite(nx.to_float64(operand))


def _complex_atan2(y, x):
    # atan2(y, x) = -i log((x + i y) / sqrt(x**2 + y**2)) for complex x, y.
    w = x + 1j * y
    return -1j * np.log(w / np.sqrt(x * x + y * y))


@kernel("stablehlo.atan2")
@nx.quiet
def atan2(ctx, op, lhs, rhs):
    kind = nx.category(lhs.dtype)
    if kind == nx.FLOAT:
        return nx.map_float(np.arctan2, lhs.dtype, lhs, rhs)
    if kind == nx.COMPLEX:
        return nx.map_float(_complex_atan2, lhs.dtype, lhs, rhs)
    raise nx.unsupported(op, lhs.dtype)


# ---------------------------------------------------------------------------
# reduce_precision


def _round_mantissa(bits, src_mantissa: int, mantissa: int, width: int):
    """Round the significand to ``mantissa`` bits, ties to even, on bit patterns."""
    shift = src_mantissa - mantissa
    last_bit = 1 << shift
    tie_bias = (last_bit >> 1) - 1
    keep_mask = ((1 << width) - 1) & ~(last_bit - 1)
    lowest_kept = (bits & np.uint64(last_bit)) >> np.uint64(shift)
    rounded = bits + lowest_kept + np.uint64(tie_bias)  # may carry into the exponent
    return rounded & np.uint64(keep_mask)


def _clamp_exponent(bits, src_mantissa: int, src_exponent: int, exponent: int, width: int):
    """Overflow to signed infinity / underflow to signed zero outside the range."""
    sign_mask = np.uint64(1 << (width - 1))
    exponent_mask = ((1 << src_exponent) - 1) << src_mantissa
    bias = (1 << (src_exponent - 1)) - 1
    reduced_bias = (1 << (exponent - 1)) - 1
    biased = bits & np.uint64(exponent_mask)
    overflows = biased > np.uint64((bias + reduced_bias) << src_mantissa)
    underflows = biased <= np.uint64((bias - reduced_bias) << src_mantissa)
    signed_zero = bits & sign_mask
    signed_inf = signed_zero | np.uint64(exponent_mask)
    bits = np.where(overflows, signed_inf, bits)
    return np.where(underflows, signed_zero, bits)


@kernel("stablehlo.reduce_precision")
@nx.quiet
def reduce_precision(ctx, op, operand):
    dtype = operand.dtype
    if nx.category(dtype) != nx.FLOAT:
        raise nx.unsupported(op, dtype)
    exponent = int(attr_to_python(op.attributes["exponent_bits"]))
    mantissa = int(attr_to_python(op.attributes["mantissa_bits"]))
    if exponent < 1 or mantissa < 0:
        raise InterpreterError(f"{op.where()}: needs exponent_bits >= 1 and mantissa_bits >= 0, "
                               f"got e{exponent}m{mantissa}")
    width = nx.float_width(dtype)
    src_mantissa = nx.mantissa_bits(dtype)
    src_exponent = width - src_mantissa - 1
    bits = nx.float_bits(operand)
    if mantissa < src_mantissa:
        bits = _round_mantissa(bits, src_mantissa, mantissa, width)
    if exponent < src_exponent:
        bits = _clamp_exponent(bits, src_mantissa, src_exponent, exponent, width)
    result = nx.float_from_bits(bits, dtype)
    # NaN stays NaN when the narrow format has mantissa bits to hold it;
    # with none, it can only become infinity.
    nan_value = operand if mantissa > 0 else nx.round_to(np.full(dtype=np.float64,
                                                              shape=operand.shape,
                                                              fill_value=np.inf), dtype)
    return np.where(np.isnan(nx.to_float64(operand)), nan_value, result).astype(dtype)
