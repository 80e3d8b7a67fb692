"""convert, bitcast_convert, uniform_quantize/dequantize and reduce_precision.

References: Python integers and fractions for exact rounding, XLA (through
JAX) for the cases the spec leaves open (float->int saturation), the spec's
own examples for bitcast layouts and quantization.
"""
from __future__ import annotations

import fractions
import struct

import ml_dtypes
import numpy as np
import pytest

from stablehlo.interpreter.tests.elementwise_harness import (
    Xla,
    apply,
    apply_typed,
    assert_same,
    i64_attr,
    tensor_type,
)
from stablehlo.ir.types import F32, I8, IntegerType, QuantizedType, TensorType


def test_convert_bool_and_complex_rules():
    ints = np.array([-1, 0, 1], np.int64)
    assert_same(apply("stablehlo.convert", ints, result=np.bool_), np.array([True, False, True]))
    z = np.array([-1 + 0j, 0 + 1j, 1 + 0j])
    # Only the real part counts for complex -> bool/int/float.
    assert_same(apply("stablehlo.convert", z, result=np.bool_), np.array([True, False, True]))
    assert_same(apply("stablehlo.convert", z, result=np.int64), np.array([-1, 0, 1]))
    assert_same(apply("stablehlo.convert", ints.astype(ml_dtypes.int4), result=np.complex128),
                np.array([-1 + 0j, 0j, 1 + 0j]))
    flags = np.array([True, False])
    assert_same(apply("stablehlo.convert", flags, result=np.float32), np.array([1, 0], np.float32))


def test_convert_int_to_int_wraps():
    values = np.array([300, -1, 255, -129], np.int64)
    assert_same(apply("stablehlo.convert", values, result=np.uint8),
                np.array([44, 255, 255, 127], np.uint8))
    assert_same(apply("stablehlo.convert", values, result=ml_dtypes.int4),
                np.array([-4, -1, -1, -1], ml_dtypes.int4))


@pytest.mark.parametrize("target", [np.int8, np.uint8, np.int32, np.uint32, np.int64,
                                    np.uint64])
def test_float_to_int_saturates_like_xla(target):
    xla = Xla()
    x = np.array([np.nan, np.inf, -np.inf, 1e10, -1e10, 200.7, -200.7, 127.9, -128.9, -0.5,
                  1.8e19, 9.3e18, -9.3e18, 4294967295.5], np.float64)
    expected = xla(lambda a: xla.lax.convert_element_type(a, target), x)
    assert_same(apply("stablehlo.convert", x, result=target), expected)


def _round_fraction(value: fractions.Fraction, dtype) -> float:
    """Correctly rounded (nearest-even) value among all finite values of ``dtype``."""
    grid = np.arange(2 ** (8 * np.dtype(dtype).itemsize), dtype=np.uint64)
    candidates = grid.astype({1: np.uint8, 2: np.uint16}[np.dtype(dtype).itemsize]).view(dtype)
    with np.errstate(invalid="ignore"):
        finite = candidates.astype(np.float64)
    finite = finite[np.isfinite(finite)]
    finite = np.unique(finite)
    position = np.searchsorted(finite, float(value))
    lower, upper = finite[max(position - 1, 0)], finite[min(position, len(finite) - 1)]
    d_low = abs(fractions.Fraction(lower) - value)
    d_up = abs(fractions.Fraction(upper) - value)
    if d_low != d_up:
        return lower if d_low < d_up else upper
    even = np.array([lower], np.float64).astype(dtype).view(np.uint8 if np.dtype(dtype)
                                                             .itemsize == 1 else np.uint16)
    return lower if int(even[0]) % 2 == 0 else upper


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn,
                                   ml_dtypes.float8_e5m2])
def test_f64_and_i64_to_narrow_float_round_once(dtype):
    # Values just above a rounding tie of the target: rounding to f32 first
    # would land on the tie and then go to even (double rounding).
    one_ulp = {np.dtype(ml_dtypes.bfloat16): 2.0 ** -7,
               np.dtype(ml_dtypes.float8_e4m3fn): 2.0 ** -3,
               np.dtype(ml_dtypes.float8_e5m2): 2.0 ** -2}[np.dtype(dtype)]
    x = np.array([1 + one_ulp / 2 + 2.0 ** -40, 1 + one_ulp / 2, 1 + 1.5 * one_ulp,
                  -(1 + one_ulp / 2 + 2.0 ** -40)])
    expected = np.array([_round_fraction(fractions.Fraction(float(v)), dtype) for v in x])
    assert_same(apply("stablehlo.convert", x, result=dtype), expected.astype(dtype))
    if np.dtype(dtype) == np.dtype(ml_dtypes.bfloat16):
        ints = np.array([2**24 + 2**16 + 1, 2**60 + 2**52 + 1, -(2**24 + 2**16 + 1)], np.int64)
        expected = [_round_fraction(fractions.Fraction(int(v)), dtype) for v in ints]
        assert_same(apply("stablehlo.convert", ints, result=dtype),
                    np.array(expected).astype(dtype))


def _nearest_f32(value: int) -> np.float32:
    guess = np.float32(float(value))
    candidates = [np.nextafter(guess, np.float32(-np.inf)), guess,
                  np.nextafter(guess, np.float32(np.inf))]
    distances = [abs(fractions.Fraction(float(c)) - value) for c in candidates]
    best = min(distances)
    ties = [c for c, d in zip(candidates, distances) if d == best]
    return min(ties, key=lambda c: int(np.array(c).view(np.uint32)) % 2)


def test_large_uint64_to_float32_rounds_to_nearest():
    values = np.array([2**64 - 1, 2**63 + 2**39 + 1, 2**53 + 1, 2**63 + 2**39], np.uint64)
    expected = np.array([_nearest_f32(int(v)) for v in values], np.float32)
    assert_same(apply("stablehlo.convert", values, result=np.float32), expected)


# ---------------------------------------------------------------------------
# bitcast_convert


def test_bitcast_f64_to_f16_is_little_endian():
    # Spec example: 0x0123456789ABCDEF -> [0xCDEF, 0x89AB, 0x4567, 0x0123].
    operand = np.array(0x0123456789ABCDEF, np.uint64).view(np.float64)
    result = apply("stablehlo.bitcast_convert", operand,
                   result_types=[tensor_type((4,), np.float16)])
    assert result.shape == (4,)
    assert [hex(v) for v in result.view(np.uint16)] == ["0xcdef", "0x89ab", "0x4567", "0x123"]


def test_bitcast_bool_vector_to_i64_and_back():
    value = 0x0123456789ABCDEF
    bits = np.array([(value >> i) & 1 for i in range(64)], np.bool_)
    as_int = apply("stablehlo.bitcast_convert", bits, result=np.int64)
    assert as_int.shape == () and int(as_int) == value
    back = apply("stablehlo.bitcast_convert", np.array(value, np.int64), result=np.bool_)
    assert_same(back, bits)


def test_bitcast_complex_splits_parts():
    z = np.array(complex(struct.unpack("<d", struct.pack("<Q", 0x0123456789ABCDEF))[0],
                         struct.unpack("<d", struct.pack("<Q", 0x11111111))[0]))
    result = apply("stablehlo.bitcast_convert", z, result=np.complex64)
    parts = np.stack([result.real, result.imag], -1).view(np.uint32).reshape(-1)
    assert [hex(v) for v in parts] == ["0x89abcdef", "0x1234567", "0x11111111", "0x0"]


def test_bitcast_sub_byte_types_pack_low_bits_first():
    nibbles = np.array([[1, -1], [7, -8]], ml_dtypes.int4)
    packed = apply("stablehlo.bitcast_convert", nibbles, result=np.uint8)
    assert packed.shape == (2,) and [int(v) for v in packed] == [0xF1, 0x87]
    back = apply("stablehlo.bitcast_convert", packed, result=ml_dtypes.int4)
    assert_same(back, nibbles)
    same_width = apply("stablehlo.bitcast_convert", np.array([0.5, -6.0], ml_dtypes.float4_e2m1fn),
                       result=ml_dtypes.uint4)
    assert [int(v) for v in same_width] == [0b0001, 0b1111]


# ---------------------------------------------------------------------------
# uniform_quantize / uniform_dequantize


def _quant(scales, zero_points, axis=None, storage=I8, low=None, high=None):
    return QuantizedType(storage, F32, tuple(scales), tuple(zero_points), axis, low, high)


def test_uniform_quantize_per_axis_spec_example():
    qtype = _quant([0.1, 0.5], [-30, -20], axis=0)
    operand = np.array([4.0, 15.0], np.float32)
    (result,) = apply_typed("stablehlo.uniform_quantize", [operand],
                            [tensor_type((2,), np.float32)], [TensorType((2,), qtype)])
    assert_same(result, np.array([10, 10], np.int8))
    (back,) = apply_typed("stablehlo.uniform_dequantize", [result], [TensorType((2,), qtype)],
                          [tensor_type((2,), np.float32)])
    assert_same(back, np.array([4.0, 15.0], np.float32))
    target = _quant([0.1, 0.2], [-20, -30], axis=0)
    (requantized,) = apply_typed("stablehlo.uniform_quantize", [result],
                                 [TensorType((2,), qtype)], [TensorType((2,), target)])
    assert_same(requantized, np.array([20, 45], np.int8))


def test_uniform_quantize_rounds_half_to_even_and_clamps():
    qtype = _quant([0.5], [0], storage=IntegerType(8), low=-3, high=3)
    operand = np.array([0.25, 0.75, -0.25, 100.0, -100.0, np.nan], np.float32)
    (result,) = apply_typed("stablehlo.uniform_quantize", [operand],
                            [tensor_type((6,), np.float32)], [TensorType((6,), qtype)])
    assert_same(result, np.array([0, 2, 0, 3, -3, 0], np.int8))


# ---------------------------------------------------------------------------
# reduce_precision


def _reduce_precision(x, exponent, mantissa):
    return apply("stablehlo.reduce_precision", x,
                 attributes={"exponent_bits": i64_attr(exponent),
                             "mantissa_bits": i64_attr(mantissa)})


def test_reduce_precision_to_f16_spec_example():
    x = np.array([np.inf, np.nan, 5e-324, 0.0, 65519.0, 65520.0, -65520.0, 1e-8])
    result = _reduce_precision(x, 5, 10)
    assert_same(result, np.array([np.inf, np.nan, 0.0, 0.0, 65504.0, np.inf, -np.inf, 0.0]))
    assert_same(_reduce_precision(np.array(np.nan), 5, 0), np.array(np.inf))


@pytest.mark.parametrize("exponent,mantissa,dtype", [(8, 7, ml_dtypes.bfloat16),
                                                     (5, 10, np.float16),
                                                     (4, 3, ml_dtypes.float8_e4m3)])
def test_reduce_precision_matches_a_round_trip_through_the_narrow_type(exponent, mantissa,
                                                                       dtype):
    rng = np.random.default_rng(11)
    x = (rng.normal(size=500) * 10.0 ** rng.integers(-3, 4, size=500)).astype(np.float32)
    x = x[np.abs(x) > 2.0 ** -6]  # normal range of every target: no subnormal differences
    expected = x.astype(dtype).astype(np.float32)
    finite_target = np.isfinite(expected)
    result = _reduce_precision(x, exponent, mantissa)
    assert_same(result[finite_target], expected[finite_target])
