"""Dense-literal helpers: hex blobs and MLIR's float printing.

The printer and parser use four public functions:

- ``hex_to_bytes(digits)``: the digits after ``0x`` of a ``dense<"0x...">`` blob -> bytes.
- ``bytes_to_hex(data)``: bytes -> uppercase hex digits without the ``0x`` prefix.
- ``format_float(value, type_name)``: one scalar printed the way MLIR prints it.
- ``format_float_array(arr, type_name)``: the same for every element, in row-major order.

Each dispatches to the C++ extension ``stablehlo._C._native`` when it imports
(``NATIVE_AVAILABLE``) and to the pure-Python reference implementations in this module
otherwise. The references ``decode_hex``, ``encode_hex`` and ``format_floats`` have the same
signatures and behaviour as their native twins; a test checks that both agree.

Note [MLIR float printing]
MLIR (``printFloatValue`` in AsmPrinter) prints a finite float in two attempts, both with
LLVM's ``APFloat::toString``:
1. Six significant digits in scientific form, padded with zeros to six decimals, lowercase
   ``e``, signed exponent of at least two digits (``1.000000e-01``, ``1.401300e-45``). The
   seventh digit is always a padding zero: this is not C's ``%.6e``. It is used if parsing it
   back into the element type (round to nearest even) gives the same bits.
2. Otherwise the "natural" form with ``2 + precision * 59 // 196`` significant digits,
   trailing zeros dropped, plain (``1.76405239``, ``0.00123456789``) or scientific with an
   uppercase ``E``, an exponent sign always and no exponent padding (``9.99999974E-6``,
   ``1.2345678912345678E+17``).
If the natural form has no ``.`` (an integer such as ``16777216``), or the value is inf or
NaN, the raw bits are printed as ``0x`` plus uppercase hex digits without zero padding
(``0x4B800000``, ``0x7FC00000``, ``0x7C00``).

APFloat's digit generation is not correctly rounded, and MLIR's output inherits that:
- First the exact integer significand ``M`` (value = M * 10**exp) is cut down by a floor
  division by ``10**t``, where ``t`` is derived from bit counts only
  (``bits_needed = (P * 196 + 58) // 59``; ``t = (bit_length(M) - bits_needed) * 59 // 196``).
  This can leave exactly ``P`` digits, which are then kept as they are: truncation.
- Then, if more than ``P`` digits remain, they are rounded half-up on the first dropped digit.
So f32 1e-5 (exactly 9.99999974737875...E-6) prints as ``9.99999974E-6``, not ``...75E-6``.
This module reproduces that arithmetic exactly; do not "fix" it into correct rounding.
"""
from __future__ import annotations

import binascii
import math
from fractions import Fraction

import ml_dtypes
import numpy as np

from stablehlo.ir.types import FLOAT_FORMATS, FloatType, numpy_dtype

try:
    from stablehlo._C import _native
except ImportError:  # the extension is optional: the Python reference is always there
    _native = None

NATIVE_AVAILABLE = _native is not None

# APFloat::toString's default for the natural form: at most 3 padding zeros.
_MAX_PADDING = 3
# MLIR's first attempt: 6 significant digits, scientific, zero-padded.
_SHORT_PRECISION = 6


# ---------------------------------------------------------------------------------------------
# Hex blobs


def decode_hex(digits: str) -> bytes:
    """Decodes hex digits (either case, no ``0x`` prefix, no whitespace) to bytes.

    Raises ValueError naming the offset of the first character that is not a hex digit,
    or the length when it is odd.
    """
    try:
        return binascii.unhexlify(digits)
    except (binascii.Error, ValueError):
        pass
    for offset, char in enumerate(digits):
        if char not in "0123456789abcdefABCDEF":
            raise ValueError(f"invalid hex digit {char!r} at offset {offset}")
    raise ValueError(f"odd number of hex digits ({len(digits)})")


def encode_hex(data: bytes) -> str:
    """Encodes bytes (or any C-contiguous buffer) as uppercase hex digits, no prefix."""
    return binascii.hexlify(memoryview(data).cast("B")).decode("ascii").upper()


def hex_to_bytes(digits: str) -> bytes:
    """Dispatcher for ``decode_hex``: native when available."""
    if _native is not None:
        return _native.decode_hex(digits)
    return decode_hex(digits)


def bytes_to_hex(data: bytes) -> str:
    """Dispatcher for ``encode_hex``: native when available."""
    if _native is not None:
        return _native.encode_hex(data)
    return encode_hex(data)


# ---------------------------------------------------------------------------------------------
# Float printing (see Note [MLIR float printing])


def _decimal_significand(value: float) -> tuple[int, int]:
    """The exact ``(M, exp)`` with ``abs(value) == M * 10**exp``, for finite non-zero values.

    Like APFloat, M carries no trailing binary zeros below the point: an integer value gives
    ``(value, 0)``; otherwise value = N / 2**k with N odd, and M = N * 5**k, exp = -k.
    """
    numerator, denominator = abs(value).as_integer_ratio()
    if denominator == 1:
        return numerator, 0
    k = denominator.bit_length() - 1
    return numerator * 5**k, -k


def _apfloat_digits(value: float, precision: int) -> tuple[str, int]:
    """Significant decimal digits and the exponent of the last one, as APFloat makes them.

    ``precision`` is the number of significant digits to keep (FormatPrecision).
    """
    significand, exp = _decimal_significand(value)
    # Step 1: a floor division chosen from bit counts alone (can truncate).
    bits_needed = (precision * 196 + 58) // 59
    bit_length = significand.bit_length()
    if bit_length > bits_needed:
        removable = (bit_length - bits_needed) * 59 // 196
        if removable:
            significand //= 10**removable
            exp += removable
    digits = str(significand)
    stripped = digits.rstrip("0")
    exp += len(digits) - len(stripped)
    digits = stripped
    # Step 2: round half-up on the first dropped digit.
    if len(digits) > precision:
        round_up = digits[precision] >= "5"
        exp += len(digits) - precision
        digits = digits[:precision]
        if round_up:
            digits = str(int(digits) + 1)
        stripped = digits.rstrip("0")
        exp += len(digits) - len(stripped)
        digits = stripped
    return digits, exp


def _short_form(value: float) -> str:
    """MLIR's first attempt: ``d.dddddde+XX`` from 6 significant digits."""
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0." + "0" * _SHORT_PRECISION + "e+00"
    digits, exp = _apfloat_digits(value, _SHORT_PRECISION)
    exp10 = exp + len(digits) - 1
    mantissa = digits[0] + "." + digits[1:].ljust(_SHORT_PRECISION, "0")
    exp_sign = "-" if exp10 < 0 else "+"
    return f"{sign}{mantissa}e{exp_sign}{abs(exp10):02d}"


def _natural_form(value: float, precision_bits: int) -> str:
    """APFloat::toString with its defaults (FormatPrecision 0, MaxPadding 3, TruncateZero)."""
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0"
    precision = 2 + precision_bits * 59 // 196
    digits, exp = _apfloat_digits(value, precision)
    count = len(digits)
    msd = exp + count - 1  # power of ten of the most significant digit
    if exp >= 0:
        scientific = exp > _MAX_PADDING or count + exp > precision
    else:
        scientific = msd < 0 and -msd > _MAX_PADDING
    if scientific:
        fraction = digits[1:] or "0"
        exp_sign = "-" if msd < 0 else "+"
        return f"{sign}{digits[0]}.{fraction}E{exp_sign}{abs(msd)}"
    if exp >= 0:
        return sign + digits + "0" * exp
    whole = count + exp
    if whole > 0:
        return f"{sign}{digits[:whole]}.{digits[whole:]}"
    return f"{sign}0.{'0' * -whole}{digits}"


class _FloatFormat:
    """What float printing needs to know about one element type."""

    def __init__(self, type_name: str):
        self.name = type_name
        self.dtype = numpy_dtype(FloatType(type_name))
        self.precision = FLOAT_FORMATS[type_name].precision
        self.bits_dtype = np.dtype(f"u{self.dtype.itemsize}")
        smallest_normal = float(ml_dtypes.finfo(self.dtype).smallest_normal)
        self.min_exponent = math.frexp(smallest_normal)[1] - 1

    def round(self, exact: Fraction) -> Fraction:
        """Rounds to this type's precision, nearest even, ignoring overflow.

        Values above the largest finite value come out above it, never equal to a finite
        value, which is all the round-trip check needs.
        """
        if exact == 0:
            return exact
        magnitude = abs(exact)
        exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
        if Fraction(2) ** exponent > magnitude:
            exponent -= 1
        quantum = Fraction(2) ** (max(exponent, self.min_exponent) - self.precision + 1)
        rounded = round(magnitude / quantum) * quantum  # Fraction rounds half to even
        return rounded if exact > 0 else -rounded

    def format(self, value: float, bits: int) -> str:
        """The MLIR text of one element whose exact value and raw bits are given."""
        if math.isfinite(value):
            short = _short_form(value)
            # Zeros keep their sign through the round trip; others compare by value.
            if value == 0 or self.round(Fraction(short)) == Fraction(value):
                return short
            natural = _natural_form(value, self.precision)
            if "." in natural:
                return natural
        return f"0x{bits:X}"


_FORMATS: dict[str, _FloatFormat] = {}


def _float_format(type_name: str) -> _FloatFormat:
    fmt = _FORMATS.get(type_name)
    if fmt is None:
        if type_name not in FLOAT_FORMATS or FLOAT_FORMATS[type_name].numpy_name is None:
            known = ", ".join(sorted(n for n, f in FLOAT_FORMATS.items() if f.numpy_name))
            raise ValueError(f"cannot print floats of type {type_name!r}; known: {known}")
        fmt = _FORMATS[type_name] = _FloatFormat(type_name)
    return fmt


def _format_elements(flat: np.ndarray, fmt: _FloatFormat) -> list[str]:
    bits = flat.view(fmt.bits_dtype).tolist()
    with np.errstate(invalid="ignore"):  # NaN payloads of the small types warn in the cast
        values = flat.astype(np.float64).tolist()  # exact: every supported type fits in f64
    return [fmt.format(v, b) for v, b in zip(values, bits)]


def format_floats(arr: np.ndarray) -> list[str]:
    """Reference twin of ``_native.format_floats``: a 1-D float32 or float64 array."""
    arr = np.asarray(arr)
    if arr.ndim != 1 or arr.dtype not in (np.float32, np.float64):
        raise TypeError(f"expected a 1-D float32 or float64 array, got {arr.dtype} {arr.shape}")
    type_name = "f32" if arr.dtype == np.float32 else "f64"
    return _format_elements(np.ascontiguousarray(arr), _float_format(type_name))


def format_float(value, type_name: str) -> str:
    """One scalar of element type ``type_name`` as MLIR prints it.

    ``value`` is converted to the element type with numpy / ml_dtypes casting first. Pass
    values that already have the element's dtype where exact rounding matters: ml_dtypes
    casts float64 to bf16 and the f8 types through float32, rounding twice (1 + 2**-8 +
    2**-40 becomes bf16 1.0, not 1.0078125).
    """
    return format_float_array(np.asarray(value), type_name)[0]


def format_float_array(arr, type_name: str) -> list[str]:
    """Every element of ``arr`` (any shape, row-major order) as MLIR prints it."""
    fmt = _float_format(type_name)
    flat = np.ascontiguousarray(np.asarray(arr).astype(fmt.dtype, copy=False).reshape(-1))
    if _native is not None and type_name in ("f32", "f64"):
        return _native.format_floats(flat)
    return _format_elements(flat, fmt)
