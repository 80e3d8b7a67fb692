"""CHLO kernels against scipy.special (accuracy) and XLA through JAX (poles,
domain errors and the other conventions the conformance data follows).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from stablehlo.interpreter.tests.elementwise_harness import (
    Xla,
    apply,
    assert_same,
    i64_attr,
    tensor_type,
    ulp_distance,
)

special = pytest.importorskip("scipy.special")


def _relative_error(result, expected):
    result, expected = np.asarray(result, np.float64), np.asarray(expected, np.float64)
    both_nan = np.isnan(result) & np.isnan(expected)
    same = (result == expected) | both_nan
    scale = np.maximum(np.abs(expected), 1e-300)
    with np.errstate(invalid="ignore"):  # inf - inf where both are infinite
        error = np.where(same, 0.0, np.abs(result - expected) / scale)
    return np.where(np.isnan(error), np.inf, error)


RNG = np.random.default_rng(2)
WIDE = np.concatenate([RNG.normal(size=300) * 5, RNG.uniform(-30, 30, size=200),
                       [0.5, 1.0, 2.0, 1e-8, 25.0, 170.5]])


@pytest.mark.parametrize("name,reference,inputs,tolerance", [
    ("lgamma", special.gammaln, WIDE[WIDE != np.round(WIDE)], 1e-12),
    ("digamma", special.digamma, WIDE, 1e-11),
    ("erf", special.erf, WIDE, 1e-15),
    ("erfc", special.erfc, WIDE, 1e-13),
    ("erf_inv", special.erfinv, np.tanh(WIDE / 4), 1e-14),
    ("bessel_i1e", special.i1e, np.concatenate([WIDE, [19.9, 20.1, 1e3, 1e8]]), 1e-14),
    ("atan", np.arctan, WIDE, 1e-15),
])
def test_unary_special_functions_are_float64_accurate(name, reference, inputs, tolerance):
    # lgamma/digamma near their zeros lose relative (not absolute) accuracy.
    expected = reference(inputs)
    error = _relative_error(apply(f"chlo.{name}", inputs), expected)
    if name in ("lgamma", "digamma"):
        error = np.where(np.abs(expected) < 1e-3, 0.0, error)
    assert error.max() <= tolerance


def test_erf_inv_near_one_and_zero():
    x = np.array([1 - 2.0**-52, -(1 - 2.0**-40), 1e-300, 0.5, 0.9999])
    assert _relative_error(apply("chlo.erf_inv", x), special.erfinv(x)).max() <= 1e-13


def test_zeta_and_polygamma_match_scipy():
    s = np.array([2.0, 3.0, 1.5, 10.0, 4.0, 2.0, 50.0, 2.0, 3.0])
    q = np.array([1.0, 0.5, 2.0, 0.1, 100.0, 1e-3, 3.0, -1.5, -2.5])
    assert _relative_error(apply("chlo.zeta", s, q), special.zeta(s, q)).max() <= 1e-13
    n = np.array([1.0, 2.0, 3.0, 1.0, 4.0])
    x = np.array([1.0, 0.5, 3.7, 20.0, 0.25])
    assert _relative_error(apply("chlo.polygamma", n, x),
                           special.polygamma(n.astype(int), x)).max() <= 1e-13


@pytest.fixture(scope="module")
def xla():
    pytest.importorskip("jax")
    return Xla()


def test_poles_and_domain_errors_follow_xla(xla):
    lax = xla.lax
    x = np.array([0.0, -0.0, -1.0, -2.5, 1.0, np.inf, -np.inf, np.nan, -1e20, 0.5, 3e5])
    assert_same(apply("chlo.lgamma", x), np.asarray(xla(lax.lgamma, x)))
    digamma = apply("chlo.digamma", x)
    assert ulp_distance(digamma, xla(lax.digamma, x)).max() <= 64  # poles exact; values close
    assert_same(np.isnan(digamma), np.isnan(xla(lax.digamma, x)))
    edges = np.array([-1.0, 1.0, 1.5, 0.0, -0.0, np.nan])
    assert_same(apply("chlo.erf_inv", edges), xla(lax.erf_inv, edges))
    i1e = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -5.0])
    assert ulp_distance(apply("chlo.bessel_i1e", i1e), xla(lax.bessel_i1e, i1e)).max() <= 2
    s = np.array([2.0, 1.0, 0.5, 3.0, 2.0, 2.0, 2.5])
    q = np.array([1.0, 1.0, 1.0, 0.0, -1.0, -1.5, -1.5])
    assert ulp_distance(apply("chlo.zeta", s, q), xla(lax.zeta, s, q)).max() <= 4
    n = np.array([0.0, 1.0, 1.5, -1.0, 1.0, 3.0, 1.0])
    p = np.array([1.0, 1.0, 1.0, 1.0, 0.0, -1.5, -2.0])
    # XLA's digamma (polygamma order 0) is a Lanczos approximation: compare
    # values loosely, NaN/inf placement exactly.
    polygamma = apply("chlo.polygamma", n, p)
    expected = xla(lax.polygamma, n, p)
    assert_same(np.isnan(polygamma), np.isnan(expected))
    np.testing.assert_allclose(polygamma, expected, rtol=1e-13)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
def test_next_after_matches_xla(xla, dtype):
    x = np.array([0.0, -0.0, 1.0, np.nan, 1.0, np.inf, -1.0, 3.0, 0.0], dtype)
    y = np.array([-1.0, 1.0, 1.0, 1.0, np.nan, 0.0, -2.0, 2.0, -0.0], dtype)
    assert_same(apply("chlo.next_after", x, y), xla(xla.lax.nextafter, x, y))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.complex64])
@pytest.mark.parametrize("name,lax_name", [("asin", "asin"), ("acos", "acos"),
                                           ("asinh", "asinh"), ("acosh", "acosh"),
                                           ("atanh", "atanh"), ("sinh", "sinh"),
                                           ("cosh", "cosh"), ("tan", "tan")])
def test_inverse_trig_and_hyperbolic_close_to_xla(xla, name, lax_name, dtype):
    rng = np.random.default_rng(9)
    x = rng.uniform(-0.99, 0.99, size=200)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.uniform(-2, 2, size=200)
    elif name == "acosh":
        x = 1.0 + np.abs(x) * 5
    x = x.astype(dtype)
    result = apply(f"chlo.{name}", x)
    expected = xla(getattr(xla.lax, lax_name), x)
    if np.dtype(dtype).kind == "c":
        # XLA evaluates complex functions in f32, so a part that is small next
        # to the modulus carries an absolute (not relative) error.
        error = np.abs(result.astype(np.complex128) - expected) / np.maximum(np.abs(expected), 1)
        assert error.max() <= 4 * np.finfo(np.float32).eps
    else:
        # XLA's sinh below |x| = 1 uses its own expm1: a few ULP from exact.
        assert ulp_distance(result, expected).max() <= (6 if name == "sinh" else 3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, ml_dtypes.bfloat16])
def test_sinh_cosh_follow_xla_decomposition_for_large_arguments(xla, dtype):
    # exp(x + log(1/2)) rounds x + log(1/2) first: 4 ULP off the exact cosh
    # near |x| = 9 in f32, which is what XLA (and the conformance data) give.
    # (Below |x| = 1, XLA's sinh goes through its own expm1 approximation.)
    x = np.linspace(-12, 12, 2001)
    x = x[np.abs(x) >= 1].astype(dtype)
    for name in ("sinh", "cosh"):
        expected = xla(getattr(xla.lax, name), x)
        assert ulp_distance(apply(f"chlo.{name}", x), expected).max() <= 2


def test_is_inf_conj_square():
    x = np.array([np.inf, -np.inf, np.nan, 1.0], np.float32)
    assert_same(apply("chlo.is_inf", x, result=np.bool_), np.array([True, True, False, False]))
    assert_same(apply("chlo.is_pos_inf", x, result=np.bool_), np.array([True, False, False, False]))
    assert_same(apply("chlo.is_neg_inf", x, result=np.bool_), np.array([False, True, False, False]))
    z = np.array([1 + 2j, complex(0.0, -3.0)], np.complex64)
    assert_same(apply("chlo.conj", z), np.array([1 - 2j, 3j], np.complex64))
    assert_same(apply("chlo.square", np.array([100, -3], np.int8)), np.array([16, 9], np.int8))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.uint32, np.int64,
                                   np.uint64])
def test_mulhi_is_the_high_half_of_the_exact_product(dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(4)
    a = rng.integers(info.min, info.max, size=100, endpoint=True, dtype=dtype)
    b = rng.integers(info.min, info.max, size=100, endpoint=True, dtype=dtype)
    a[:3], b[:3] = [info.min, info.max, info.max], [info.min, info.max, info.min]
    width = info.bits
    expected = []
    for x, y in zip(a.tolist(), b.tolist()):
        high = (x * y) >> width
        high &= (1 << width) - 1
        if info.min < 0 and high >= 1 << (width - 1):
            high -= 1 << width
        expected.append(high)
    assert apply("chlo.mulhi", a, b).tolist() == expected


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16, np.int32, np.uint8])
def test_top_k_is_a_stable_descending_sort(xla, dtype):
    rng = np.random.default_rng(6)
    operand = rng.integers(0, 5, size=(3, 7)).astype(dtype)
    if np.dtype(dtype).kind != "i" and np.dtype(dtype).kind != "u":
        operand[0, 2] = np.nan
        operand[1, 1] = -0.0
    result_types = [tensor_type((3, 4), dtype), tensor_type((3, 4), np.int32)]
    values, indices = apply("chlo.top_k", operand, attributes={"k": i64_attr(4)},
                            result_types=result_types)
    expected_values, expected_indices = xla(lambda a: xla.lax.top_k(a, 4), operand)
    assert_same(values, expected_values)
    assert_same(indices, expected_indices.astype(np.int32))


SCAN = """
func.func @main(%input: tensor<2x5xi32>, %init: tensor<2xi32>) -> (tensor<2x5xi32>, tensor<2xi32>) {
  %0:2 = chlo.scan(%input) inits(%init) dimension=1 attributes {is_reverse = REVERSE} {
  ^bb0(%x: tensor<2xi32>, %carry: tensor<2xi32>):
    %1 = stablehlo.maximum %x, %carry : tensor<2xi32>
    %2 = stablehlo.add %x, %carry : tensor<2xi32>
    stablehlo.return %1, %2 : tensor<2xi32>, tensor<2xi32>
  } : (tensor<2x5xi32>, tensor<2xi32>) -> (tensor<2x5xi32>, tensor<2xi32>)
  return %0#0, %0#1 : tensor<2x5xi32>, tensor<2xi32>
}
"""


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_threads_the_carry_along_the_dimension(reverse):
    from stablehlo.interpreter import evaluate
    from stablehlo.text.parser import parse_module
    module = parse_module(SCAN.replace("REVERSE", "true" if reverse else "false"))
    data = np.array([[3, -1, 4, 1, -5], [9, 2, -6, 5, 3]], np.int32)
    init = np.array([0, 1], np.int32)
    outputs, carry = evaluate(module, args=(data, init))
    # Output i = max(x_i, running sum before i); carry = running sum.
    order = range(4, -1, -1) if reverse else range(5)
    expected = np.zeros_like(data)
    running = init.copy()
    for i in order:
        expected[:, i] = np.maximum(data[:, i], running)
        running = running + data[:, i]
    assert_same(outputs, expected)
    assert_same(carry, running)
