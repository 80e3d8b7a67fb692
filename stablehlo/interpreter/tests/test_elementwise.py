"""Arithmetic, bitwise and comparison kernels against independent references.

Integer results are checked against Python's arbitrary-precision integers
wrapped to the element width; float special cases against the spec's
examples and IEEE rules written out by hand.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from stablehlo.interpreter.tests.elementwise_harness import (
    apply,
    assert_same,
    compare_type,
    direction,
)

INT_TYPES = [ml_dtypes.int2, ml_dtypes.int4, np.int8, np.int16, np.int32, np.int64,
             ml_dtypes.uint2, ml_dtypes.uint4, np.uint8, np.uint16, np.uint32, np.uint64]


def _width_signed(dtype):
    info = ml_dtypes.iinfo(dtype)
    return info.bits, info.min < 0


def _wrap(value: int, dtype) -> int:
    width, signed = _width_signed(dtype)
    value &= (1 << width) - 1
    if signed and value >= 1 << (width - 1):
        value -= 1 << width
    return value


def _random_ints(dtype, count, rng):
    info = ml_dtypes.iinfo(dtype)
    values = [int(v) for v in rng.integers(info.min, info.max, size=count, endpoint=True,
                                            dtype=np.int64 if info.min < 0 else np.uint64)]
    values[:4] = [info.min, info.max, 0, 1 if info.max > 1 else 0]
    return np.array(values, dtype=np.int64 if info.min < 0 else np.uint64).astype(dtype)


def _trunc_div(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def _reference_binary(name, a, b, dtype):
    width, _ = _width_signed(dtype)
    if name == "add":
        return _wrap(a + b, dtype)
    if name == "subtract":
        return _wrap(a - b, dtype)
    if name == "multiply":
        return _wrap(a * b, dtype)
    if name == "divide":
        return _wrap(-1 if b == 0 else _trunc_div(a, b), dtype)
    if name == "remainder":
        return _wrap(a if b == 0 else a - _trunc_div(a, b) * b, dtype)
    bits_a, amount = a & ((1 << width) - 1), b & ((1 << width) - 1)
    if name == "shift_left":
        return _wrap(0 if amount >= width else bits_a << amount, dtype)
    if name == "shift_right_logical":
        return _wrap(0 if amount >= width else bits_a >> amount, dtype)
    if name == "shift_right_arithmetic":
        as_signed = bits_a - (1 << width) if bits_a >> (width - 1) else bits_a
        return _wrap(as_signed >> min(amount, width - 1), dtype)
    raise AssertionError(name)


@pytest.mark.parametrize("dtype", INT_TYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "remainder",
                                  "shift_left", "shift_right_logical",
                                  "shift_right_arithmetic"])
def test_integer_binary_ops_wrap_like_twos_complement(name, dtype):
    rng = np.random.default_rng(abs(hash((name, np.dtype(dtype).name))) % 2**32)
    lhs = _random_ints(dtype, 64, rng)
    rhs = _random_ints(dtype, 64, rng)
    if name.startswith("shift"):
        rhs[4:20] = np.arange(16).astype(np.int64).clip(max=int(ml_dtypes.iinfo(dtype).max)) \
            .astype(dtype)
    rhs[5] = np.array(0).astype(dtype)
    result = apply(f"stablehlo.{name}", lhs, rhs)
    expected = [_reference_binary(name, int(a), int(b), dtype) for a, b in zip(lhs, rhs)]
    assert result.dtype == np.dtype(dtype)
    assert [int(v) for v in result] == expected


@pytest.mark.parametrize("dtype", INT_TYPES, ids=lambda d: np.dtype(d).name)
def test_integer_unary_ops(dtype):
    rng = np.random.default_rng(7)
    x = _random_ints(dtype, 40, rng)
    width, signed = _width_signed(dtype)
    values = [int(v) for v in x]
    assert [int(v) for v in apply("stablehlo.negate", x)] == [_wrap(-v, dtype) for v in values]
    assert [int(v) for v in apply("stablehlo.not", x)] == [_wrap(~v, dtype) for v in values]
    bits = [v & ((1 << width) - 1) for v in values]
    # Counts wrap too: popcnt(-1) = 2 is -2 as an i2.
    assert [int(v) for v in apply("stablehlo.popcnt", x)] == \
        [_wrap(b.bit_count(), dtype) for b in bits]
    assert [int(v) for v in apply("stablehlo.count_leading_zeros", x)] == \
        [_wrap(width - b.bit_length(), dtype) for b in bits]
    if signed:
        assert [int(v) for v in apply("stablehlo.abs", x)] == [_wrap(abs(v), dtype) for v in values]
        assert [int(v) for v in apply("stablehlo.sign", x)] == \
            [(v > 0) - (v < 0) for v in values]


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint64])
def test_integer_power_matches_repeated_multiplication(dtype):
    info = np.iinfo(dtype)
    bases = np.array([0, 1, 2, 3, 7, 255 % (int(info.max) + 1), 5], dtype=dtype)
    exponents = np.array([0, 5, 10, 63, 3, 2, 40], dtype=dtype)
    expected = [_wrap(int(b) ** int(e), dtype) for b, e in zip(bases, exponents)]
    assert [int(v) for v in apply("stablehlo.power", bases, exponents)] == expected


def test_integer_power_with_negative_exponents_follows_xla():
    # Spec example plus XLA's rule: 1/b**n truncates to 0 unless |b| == 1.
    lhs = np.array([-1, -1, -3, 1, -3, 0, 2, -1, 0], np.int64)
    rhs = np.array([1, 0, -3, -3, 3, 2, -1, -2, -1], np.int64)
    expected = np.array([-1, 1, 0, 1, -27, 0, 0, 1, 0], np.int64)
    assert_same(apply("stablehlo.power", lhs, rhs), expected)


def test_division_edge_cases_follow_xla():
    lhs = np.array([7, -7, -128, -128, 5], np.int8)
    rhs = np.array([0, 0, -1, 0, 2], np.int8)
    assert_same(apply("stablehlo.divide", lhs, rhs), np.array([-1, -1, -128, -1, 2], np.int8))
    assert_same(apply("stablehlo.remainder", lhs, rhs), np.array([7, -7, 0, -128, 1], np.int8))
    unsigned = np.array([7, 0], np.uint32)
    assert_same(apply("stablehlo.divide", unsigned, np.zeros(2, np.uint32)),
                np.array([2**32 - 1] * 2, np.uint32))


def test_bool_arithmetic_is_logic():
    a = np.array([False, False, True, True])
    b = np.array([False, True, False, True])
    assert_same(apply("stablehlo.add", a, b), a | b)
    assert_same(apply("stablehlo.multiply", a, b), a & b)
    assert_same(apply("stablehlo.maximum", a, b), a | b)
    assert_same(apply("stablehlo.minimum", a, b), a & b)
    assert_same(apply("stablehlo.xor", a, b), a ^ b)
    assert_same(apply("stablehlo.not", a), ~a)


# ---------------------------------------------------------------------------
# Floats


def test_spec_examples_for_float_ops():
    lhs = np.array([17.1, -17.1, 17.1, -17.1])
    rhs = np.array([3.0, 3.0, -3.0, -3.0])
    assert_same(apply("stablehlo.remainder", lhs, rhs),
                np.array([math.fmod(a, b) for a, b in zip(lhs, rhs)]))
    power = apply("stablehlo.power", np.array([-2.0, -0.0, -36.0, 5.0, 3.0, 10000.0]),
                  np.array([2.0, 2.0, 1.1, 2.0, -1.0, 10.0]))
    np.testing.assert_allclose(power[[0, 1, 3, 4, 5]], [4.0, 0.0, 25.0, 1 / 3, 1e40])
    assert np.isnan(power[2])


def test_maximum_minimum_propagate_nan_and_order_zeros():
    a = np.array([np.nan, 1.0, 0.0, -0.0, -np.inf], np.float32)
    b = np.array([1.0, np.nan, -0.0, 0.0, 2.0], np.float32)
    high = apply("stablehlo.maximum", a, b)
    low = apply("stablehlo.minimum", a, b)
    assert_same(high, np.array([np.nan, np.nan, 0.0, 0.0, 2.0], np.float32))
    assert_same(low, np.array([np.nan, np.nan, -0.0, -0.0, -np.inf], np.float32))


def test_complex_maximum_is_lexicographic():
    a = np.array([1.5 + 2.5j, 1.5 + 7.5j, 0.0 + 1.5j], np.complex64)
    b = np.array([7.5 + 1.5j, 1.5 + 2.5j, complex(-0.0, 2.5)], np.complex64)
    assert_same(apply("stablehlo.maximum", a, b),
                np.array([7.5 + 1.5j, 1.5 + 7.5j, complex(-0.0, 2.5)], np.complex64))
    assert_same(apply("stablehlo.minimum", a, b),
                np.array([1.5 + 2.5j, 1.5 + 2.5j, 0.0 + 1.5j], np.complex64))


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16, ml_dtypes.float8_e4m3fn])
def test_narrow_float_arithmetic_rounds_the_exact_result_once(dtype):
    rng = np.random.default_rng(3)
    a = rng.normal(size=200).astype(dtype)
    b = rng.normal(size=200).astype(dtype)
    for name, fn in [("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply),
                     ("divide", np.divide)]:
        exact = [fn(float(x), float(y)) for x, y in zip(a, b)]  # float64: exact or
        # within 2**-53, far below a narrow ULP
        expected = np.array(exact, np.float32).astype(dtype)  # f32 -> narrow rounds once
        assert_same(apply(f"stablehlo.{name}", a, b), expected)


def test_sign_of_floats_and_complex():
    x = np.array([np.nan, -1.5, -0.0, 0.0, 3.0, -np.inf])
    assert_same(apply("stablehlo.sign", x), np.array([np.nan, -1.0, -0.0, 0.0, 1.0, -1.0]))
    z = np.array([complex(np.nan, 0), complex(0, np.nan), 0j, 3 + 4j], np.complex128)
    result = apply("stablehlo.sign", z)
    assert np.isnan(result[0].real) and np.isnan(result[0].imag)
    assert np.isnan(result[1].real) and np.isnan(result[1].imag)
    assert result[2] == 0 and result[3] == 0.6 + 0.8j


def test_abs_of_complex_has_float_result():
    z = np.array([3 + 4j, complex(-1e30, 1e30)], np.complex64)
    result = apply("stablehlo.abs", z, result=np.float32)
    assert_same(result, np.array([5.0, math.hypot(1e30, 1e30)], np.float32))


# ---------------------------------------------------------------------------
# compare, select, clamp

SPECIALS = np.array([-np.nan, -np.inf, -2.0, -0.0, 0.0, 1.0, np.inf, np.nan], np.float64)


@pytest.mark.parametrize("name", ["EQ", "NE", "GE", "GT", "LE", "LT"])
def test_float_compare_is_ieee_quiet(name):
    a, b = np.meshgrid(SPECIALS, SPECIALS)
    ops = {"EQ": np.equal, "NE": np.not_equal, "GE": np.greater_equal, "GT": np.greater,
           "LE": np.less_equal, "LT": np.less}
    result = apply("stablehlo.compare", a, b, result=np.bool_,
                   attributes={"comparison_direction": direction(name),
                               "compare_type": compare_type("FLOAT")})
    assert_same(result, ops[name](a, b))


def _total_order_rank(x: float) -> tuple:
    # IEEE totalOrder: -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN.
    negative = math.copysign(1.0, x) < 0
    magnitude = (3, 0.0) if math.isnan(x) else (2, 0.0) if math.isinf(x) else (1, abs(x))
    return (-magnitude[0], -magnitude[1]) if negative else magnitude


@pytest.mark.parametrize("name", ["EQ", "NE", "GE", "GT", "LE", "LT"])
def test_totalorder_compare(name):
    values = np.array([-np.nan, -np.inf, -2.0, -0.0, 0.0, 1.0, np.inf, np.nan], np.float32)
    values[0] = np.copysign(np.nan, -1.0)
    a, b = np.meshgrid(values, values)
    ops = {"EQ": lambda x, y: x == y, "NE": lambda x, y: x != y, "GE": lambda x, y: x >= y,
           "GT": lambda x, y: x > y, "LE": lambda x, y: x <= y, "LT": lambda x, y: x < y}
    expected = np.array([[ops[name](_total_order_rank(float(x)), _total_order_rank(float(y)))
                          for x, y in zip(row_a, row_b)] for row_a, row_b in zip(a, b)])
    result = apply("stablehlo.compare", a, b, result=np.bool_,
                   attributes={"comparison_direction": direction(name),
                               "compare_type": compare_type("TOTALORDER")})
    assert_same(result, expected)


def test_compare_signedness_and_complex():
    a = np.array([-1, 0, 5], np.int8)
    b = np.array([1, 0, 5], np.int8)
    lt = {"comparison_direction": direction("LT")}
    assert_same(apply("stablehlo.compare", a, b, result=np.bool_, attributes=lt),
                np.array([True, False, False]))
    unsigned = dict(lt, compare_type=compare_type("UNSIGNED"))
    assert_same(apply("stablehlo.compare", a, b, result=np.bool_, attributes=unsigned),
                np.array([False, False, False]))  # 0xFF > 1 unsigned
    z = np.array([complex(np.nan, 0), 1 + 2j, 1 + 2j, complex(-0.0, 1)])
    w = np.array([complex(np.nan, 0), 1 + 3j, 1 + 2j, complex(0.0, 1)])
    eq = {"comparison_direction": direction("EQ")}
    assert_same(apply("stablehlo.compare", z, w, result=np.bool_, attributes=eq),
                np.array([False, False, True, True]))
    assert_same(apply("stablehlo.compare", z, w, result=np.bool_, attributes=lt),
                np.array([False, True, False, False]))


def test_select_with_scalar_and_tensor_predicates():
    on_true = np.array([2, 3, -1], np.int64)
    on_false = np.array([3, 7, -3], np.int64)
    assert_same(apply("stablehlo.select", np.array(False), on_true, on_false), on_false)
    pred = np.array([True, False, True])
    assert_same(apply("stablehlo.select", pred, on_true, on_false), np.array([2, 7, -1]))


def test_clamp_broadcasts_scalar_bounds():
    operand = np.array([2, 3, -1], np.int64)
    assert_same(apply("stablehlo.clamp", np.array(0), operand, np.array(1)),
                np.array([1, 1, 0]))
    assert_same(apply("stablehlo.clamp", np.array([1, 5, -5]), operand, np.array([3, 7, -3])),
                np.array([2, 5, -3]))
    floats = np.array([np.nan, -0.0, 5.0], np.float32)
    assert_same(apply("stablehlo.clamp", np.float32(0.0), floats, np.float32(1.0)),
                np.array([np.nan, 0.0, 1.0], np.float32))


def test_complex_from_parts_keeps_infinities():
    real = np.array([1.0, np.inf], np.float32)
    imag = np.array([np.inf, -0.0], np.float32)
    result = apply("stablehlo.complex", real, imag, result=np.complex64)
    assert_same(result.real, real)
    assert_same(result.imag, imag)
    assert_same(apply("stablehlo.real", result, result=np.float32), real)
    assert_same(apply("stablehlo.imag", result, result=np.float32), imag)
