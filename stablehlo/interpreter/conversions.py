"""Interpreter kernels of convert, bitcast_convert, uniform_quantize and
uniform_dequantize.

convert follows the spec, and XLA where the spec leaves it open:

* to bool: nonzero is true (for complex, only the real part counts);
* int -> int wraps (two's complement truncation);
* float -> int truncates toward zero, saturates at the integer range and
  maps NaN to 0;
* int/float -> float rounds to nearest even, once (see numerics.round_to);
* complex -> real drops the imaginary part; real -> complex zeroes it.

bitcast_convert reinterprets the little-endian bits of each element; when
the widths differ, the narrower side gains or loses a last dimension.
"""
from __future__ import annotations

import math

import numpy as np

from stablehlo.errors import InterpreterError
from stablehlo.interpreter import numerics as nx
from stablehlo.interpreter.kernels import kernel
from stablehlo.interpreter.uniform_quantization import dequantize, quantize
from stablehlo.ir.types import QuantizedType, numpy_dtype


def convert_array(x: np.ndarray, dtype) -> np.ndarray:
    """``x`` converted elementwise to ``dtype`` with StableHLO convert semantics."""
    dtype = np.dtype(dtype)
    source, target = nx.category(x.dtype), nx.category(dtype)
    if x.dtype == dtype:
        return x
    if target == nx.BOOL:
        return (x.real if source == nx.COMPLEX else x) != 0
    if source == nx.BOOL:
        x, source = x.astype(np.uint8), nx.UINT
    if target == nx.COMPLEX:
        if source == nx.COMPLEX:
            return x.astype(dtype)  # each part rounds to nearest
        part = convert_array(x, np.float32 if dtype == np.complex64 else np.float64)
        return part.astype(dtype)
    if source == nx.COMPLEX:
        x, source = np.asarray(x.real, order="C"), nx.FLOAT
    if target in (nx.SINT, nx.UINT):
        if source == nx.FLOAT:
            return _float_to_int(x, dtype)
        return nx.wrap_int(nx.widen_int(x), dtype)
    if source == nx.FLOAT:
        return nx.round_to(nx.to_float64(x), dtype)
    return _int_to_float(x, dtype)


def _float_to_int(x, dtype):
    low, high = nx.int_range(dtype)
    truncated = np.trunc(nx.to_float64(x))
    below = truncated < float(low)
    above = truncated >= float(high) + 1.0  # high + 1 is a power of two: exact
    in_range = ~(below | above | np.isnan(truncated))
    wide = np.int64 if nx.category(dtype) == nx.SINT else np.uint64
    values = np.where(in_range, truncated, 0.0).astype(wide)
    values = np.where(below, wide(low), np.where(above, wide(high), values))
    return nx.wrap_int(values, dtype)


def _int_to_float(x, dtype):
    if dtype in (np.float32, np.float64):
        return nx.widen_int(x).astype(dtype)  # a single IEEE rounding
    # Narrow targets: go through float64 rounded to odd so that the final
    # rounding is the only one that counts (Note [double rounding]).
    return nx.round_to(_int_to_float64_odd(nx.widen_int(x)), dtype)


def _int_to_float64_odd(wide):
    """int64/uint64 -> float64, rounding inexact results to odd."""
    result = wide.astype(np.float64)
    limit = 1 << 53  # below this every integer is exact
    big = (wide >= limit) if wide.dtype == np.uint64 else (wide >= limit) | (wide <= -limit)
    for index in zip(*np.nonzero(big)):
        exact = int(wide[index])
        nearest = float(exact)
        if int(nearest) != exact and (np.float64(nearest).view(np.uint64) & np.uint64(1)) == 0:
            nearest = math.nextafter(nearest, math.inf if exact > int(nearest) else -math.inf)
        result[index] = nearest
    return result


@kernel("stablehlo.convert")
@nx.quiet
def convert(ctx, op, operand):
    return convert_array(operand, numpy_dtype(op.result_types[0].element_type))


# ---------------------------------------------------------------------------
# bitcast_convert


def _bit_patterns(x: np.ndarray):
    """(uint64 patterns with a trailing parts axis, bits per part)."""
    kind = nx.category(x.dtype)
    if kind == nx.BOOL:
        return x.astype(np.uint64)[..., None], 1
    if kind in (nx.SINT, nx.UINT):
        return nx.to_unsigned_bits(x)[..., None], nx.int_width(x.dtype)
    if kind == nx.COMPLEX:
        parts = np.stack([x.real, x.imag], axis=-1)  # memory order: (re, im)
        return nx.float_bits(parts), parts.dtype.itemsize * 8
    return nx.float_bits(x)[..., None], nx.float_width(x.dtype)


def _to_bits(x: np.ndarray) -> np.ndarray:
    """uint8 0/1 array of shape x.shape + (bits per element,), LSB first."""
    patterns, width = _bit_patterns(x)
    positions = np.arange(width, dtype=np.uint64)
    bits = (patterns[..., None] >> positions) & np.uint64(1)
    return bits.reshape(x.shape + (patterns.shape[-1] * width,)).astype(np.uint8)


def _from_bits(bits: np.ndarray, dtype) -> np.ndarray:
    """Inverse of ``_to_bits``: elements of ``dtype`` from their bits."""
    dtype = np.dtype(dtype)
    kind = nx.category(dtype)
    if kind == nx.COMPLEX:
        half = bits.shape[-1] // 2
        part = np.float32 if dtype == np.complex64 else np.float64
        real = _from_bits(bits[..., :half], part)
        imag = _from_bits(bits[..., half:], part)
        return _assemble(real, imag, dtype)
    weights = np.uint64(1) << np.arange(bits.shape[-1], dtype=np.uint64)
    pattern = (bits.astype(np.uint64) * weights).sum(axis=-1, dtype=np.uint64)
    if kind == nx.BOOL:
        return pattern != 0
    if kind in (nx.SINT, nx.UINT):
        return nx.wrap_int(pattern, dtype)
    return nx.float_from_bits(pattern, dtype)


def _assemble(real, imag, dtype):
    result = np.empty(real.shape, dtype=dtype)
    result.real = real
    result.imag = imag
    return result


@kernel("stablehlo.bitcast_convert")
def bitcast_convert(ctx, op, operand):
    target = numpy_dtype(op.result_types[0].element_type)
    source_bits, target_bits = nx.bit_width(operand.dtype), nx.bit_width(target)
    shape = _bitcast_shape(op, operand.shape, source_bits, target_bits)
    if _byte_addressable(operand.dtype) and _byte_addressable(target):
        return np.asarray(operand, order="C").reshape(-1).view(target).reshape(shape)
    return _from_bits(_to_bits(operand).reshape(shape + (target_bits,)), target)


def _byte_addressable(dtype) -> bool:
    dtype = np.dtype(dtype)
    return dtype != np.bool_ and nx.bit_width(dtype) == dtype.itemsize * 8


def _bitcast_shape(op, shape, source_bits: int, target_bits: int) -> tuple:
    if source_bits == target_bits:
        return tuple(shape)
    if source_bits > target_bits and source_bits % target_bits == 0:
        return tuple(shape) + (source_bits // target_bits,)
    if shape and shape[-1] * source_bits == target_bits:
        return tuple(shape[:-1])
    raise InterpreterError(f"{op.where()}: cannot bitcast {source_bits}-bit elements of shape "
                           f"{tuple(shape)} to {target_bits}-bit elements")


# ---------------------------------------------------------------------------
# uniform_quantize, uniform_dequantize


@kernel("stablehlo.uniform_quantize")
def uniform_quantize(ctx, op, operand):
    source = op.operand_types[0].element_type
    target = op.result_types[0].element_type
    if not isinstance(target, QuantizedType):
        raise InterpreterError(f"{op.where()}: result must be quantized, got {target}")
    if isinstance(source, QuantizedType):  # requantize
        operand = dequantize(operand, source)
    return quantize(operand, target)


@kernel("stablehlo.uniform_dequantize")
def uniform_dequantize(ctx, op, operand):
    source = op.operand_types[0].element_type
    if not isinstance(source, QuantizedType):
        raise InterpreterError(f"{op.where()}: operand must be quantized, got {source}")
    return dequantize(operand, source)
