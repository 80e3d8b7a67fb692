"""Exact-dtype numeric helpers shared by the elementwise kernels.

Runtime tensors hold the exact dtype of their element type (values.py), but
numpy ufuncs do not cover every ml_dtypes type and, where they do, round in
ways XLA does not. The kernels therefore follow one rule:

* integers are computed in a 64-bit integer of the same signedness and then
  wrapped to the element width (two's complement), which is exact for every
  width up to 64 because 2**width divides 2**64;
* floats narrower than f32 (f16, bf16, f8, f6, f4) are computed in float64
  and rounded to the element type once, correctly (``round_to``);
* f32/f64/complex are computed natively where IEEE rounding of the op is
  what the spec asks for, and in float64/complex128 for transcendental
  functions (then rounded once).

See Note [double rounding] below for why narrow floats need ``round_to``.
"""
from __future__ import annotations

import functools

import numpy as np

from stablehlo.ir.types import float_format_of_dtype

try:
    import ml_dtypes
except ImportError:  # pragma: no cover - ml_dtypes is a hard dependency
    ml_dtypes = None

BOOL, SINT, UINT, FLOAT, COMPLEX = "bool", "sint", "uint", "float", "complex"

# Sub-byte integer dtypes of ml_dtypes: name -> (width, signed).
_SMALL_INTS = {"int2": (2, True), "int4": (4, True), "uint2": (2, False), "uint4": (4, False)}

_NATIVE_FLOATS = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


def category(dtype) -> str:
    """One of BOOL, SINT, UINT, FLOAT, COMPLEX for a runtime dtype."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return BOOL
    if dtype.kind == "i":
        return SINT
    if dtype.kind == "u":
        return UINT
    if dtype.kind == "f":
        return FLOAT
    if dtype.kind == "c":
        return COMPLEX
    if dtype.name in _SMALL_INTS:
        return SINT if _SMALL_INTS[dtype.name][1] else UINT
    if ml_dtypes is not None:
        return FLOAT  # bfloat16, float8_*, float6_*, float4_*
    raise TypeError(f"unsupported dtype {dtype}")


def int_width(dtype) -> int:
    """Bit width of an integer (or bool: 1) dtype."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return 1
    if dtype.name in _SMALL_INTS:
        return _SMALL_INTS[dtype.name][0]
    return dtype.itemsize * 8


def float_width(dtype) -> int:
    """Bit width of a float dtype (f6 types use 6 of their byte)."""
    return float_format_of_dtype(dtype).bits


def bit_width(dtype) -> int:
    """Bits of one element as the spec counts them (complex: both parts)."""
    kind = category(dtype)
    if kind in (BOOL, SINT, UINT):
        return int_width(dtype)
    if kind == COMPLEX:
        return np.dtype(dtype).itemsize * 8
    return float_width(dtype)


def int_range(dtype) -> tuple[int, int]:
    """(min, max) of an integer dtype as Python ints."""
    width = int_width(dtype)
    if category(dtype) == SINT:
        return -(1 << (width - 1)), (1 << (width - 1)) - 1
    return 0, (1 << width) - 1


# ---------------------------------------------------------------------------
# Integers


def widen_int(x: np.ndarray) -> np.ndarray:
    """``x`` as int64 (signed) or uint64 (unsigned) without changing values."""
    return np.asarray(x).astype(np.int64 if category(x.dtype) == SINT else np.uint64)


def wrap_int(values, dtype) -> np.ndarray:
    """Wrap int64/uint64 ``values`` to ``dtype``'s width (two's complement)."""
    dtype = np.dtype(dtype)
    width = int_width(dtype)
    bits = np.asarray(values).astype(np.uint64)
    if width < 64:
        bits = bits & np.uint64((1 << width) - 1)
        if category(dtype) == SINT:
            sign = np.uint64(1 << (width - 1))
            # Sign-extend: (bits ^ sign) - sign in two's complement.
            signed = (bits ^ sign).astype(np.int64) - np.int64(1 << (width - 1))
            return signed.astype(dtype)
    elif category(dtype) == SINT:
        return bits.view(np.int64).astype(dtype)
    return bits.astype(dtype)


def to_unsigned_bits(x: np.ndarray) -> np.ndarray:
    """The bit pattern of integer ``x`` as uint64 (only the low width bits set)."""
    width = int_width(x.dtype)
    bits = np.asarray(x).astype(np.int64 if category(x.dtype) == SINT else np.uint64)
    bits = bits.astype(np.uint64)
    if width < 64:
        bits = bits & np.uint64((1 << width) - 1)
    return bits


# ---------------------------------------------------------------------------
# Floats

# Note [double rounding]
# ml_dtypes converts float64 to bfloat16/float8 by way of float32, so a
# float64 value just above a bf16 rounding tie can first round onto the tie
# and then to even: two roundings, a wrong result. Rounding float64 to
# float32 *to odd* first (inexact results keep a sticky low bit) makes the
# second rounding exact for every target with at most 22 significand bits.


def is_native_float(dtype) -> bool:
    return np.dtype(dtype) in _NATIVE_FLOATS


def to_float64(x) -> np.ndarray:
    """Exact float64 copy of a real float array of any float dtype."""
    return np.asarray(x).astype(np.float64)


def round_to(x64, dtype) -> np.ndarray:
    """Round float64 ``x64`` once, to nearest-even, to float ``dtype``."""
    dtype = np.dtype(dtype)
    x64 = np.asarray(x64, dtype=np.float64)
    if is_native_float(dtype):
        return x64.astype(dtype)
    return _round_to_odd_f32(x64).astype(dtype)


def _round_to_odd_f32(x64: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        nearest = x64.astype(np.float32)
        inexact = (nearest.astype(np.float64) != x64) & ~np.isnan(x64)
        even = (nearest.view(np.uint32) & np.uint32(1)) == 0
        fix = inexact & even
        if not fix.any():
            return nearest
        toward = np.where(x64 > nearest.astype(np.float64), np.inf, -np.inf).astype(np.float32)
        return np.where(fix, np.nextafter(nearest, toward), nearest)


def float_result(x64, dtype) -> np.ndarray:
    """Round a float64/complex128 computation to real or complex ``dtype``."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return np.asarray(x64).astype(dtype)
    return round_to(x64, dtype)


def compute_dtype(dtype) -> np.dtype:
    """float64 for real floats, complex128 for complex: where math happens."""
    return np.dtype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64)


def float_bits_dtype(dtype) -> np.dtype:
    """The unsigned integer dtype whose values are ``dtype``'s bit patterns."""
    size = np.dtype(dtype).itemsize
    return np.dtype({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[size])


def float_bits(x: np.ndarray) -> np.ndarray:
    """Bit patterns of a real float array, as uint64."""
    x = np.asarray(x, order="C")
    return x.view(float_bits_dtype(x.dtype)).astype(np.uint64)


def float_from_bits(bits, dtype) -> np.ndarray:
    """Real float array of ``dtype`` from uint64 bit patterns."""
    dtype = np.dtype(dtype)
    raw = np.asarray(bits).astype(float_bits_dtype(dtype))
    return np.asarray(raw, order="C").view(dtype)


def mantissa_bits(dtype) -> int:
    """Explicit (stored) significand bits of a real float dtype."""
    return float_format_of_dtype(dtype).mantissa_bits


# ---------------------------------------------------------------------------
# Kernel plumbing


def unsupported(op, dtype):
    """The InterpreterError for an operand element type the op does not accept."""
    from stablehlo.errors import InterpreterError
    from stablehlo.ir.types import element_type_for_dtype
    try:
        name = str(element_type_for_dtype(dtype))
    except TypeError:
        name = str(np.dtype(dtype))
    return InterpreterError(f"{op.where()}: element type {name} is not supported by this op")


def quiet(fn):
    """Run ``fn`` with numpy floating-point warnings off.

    Overflow, division by zero and invalid operations have IEEE default
    results in StableHLO (and wrap-around for integers); they are not errors.
    """
    @functools.wraps(fn)
    def run(*args, **kwargs):
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)
    return run


def map_float(fn, dtype, *operands) -> np.ndarray:
    """``fn`` applied in float64/complex128 to ``operands``, rounded to ``dtype``."""
    compute = compute_dtype(dtype)
    args = [np.asarray(x).astype(compute) for x in operands]
    return float_result(fn(*args), dtype)
