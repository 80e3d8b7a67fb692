"""Float/complex math kernels against XLA (through JAX), the oracle behind the
conformance expectations, within the ULP budget ``check.expect_close`` uses.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from stablehlo.interpreter.tests.elementwise_harness import Xla, apply, assert_same, ulp_distance

pytest.importorskip("jax")

REAL_TYPES = [np.float32, np.float64, np.float16, ml_dtypes.bfloat16]
COMPLEX_TYPES = [np.complex64, np.complex128]


def _inputs(dtype, positive=False, size=300):
    rng = np.random.default_rng(5)
    if np.dtype(dtype).kind == "c":
        values = rng.normal(size=size) * 3 + 1j * rng.normal(size=size) * 3
        return values.astype(dtype)
    values = rng.normal(size=size) * 4
    values[:6] = [0.0, -0.0, 1e-3, -1e-3, 30.0, -30.0]
    if positive:
        values = np.abs(values)
    return values.astype(dtype)


# (stablehlo op, lax function, positive inputs only, ULP budget)
UNARY = [
    ("exponential", "exp", False, 3),
    ("exponential_minus_one", "expm1", False, 3),
    ("log", "log", True, 3),
    ("log_plus_one", "log1p", True, 3),
    ("logistic", "logistic", False, 3),
    ("sine", "sin", False, 3),
    ("cosine", "cos", False, 3),
    ("tan", "tan", False, 3),
    ("tanh", "tanh", False, 4),  # XLA's own tanh is up to 4 ULP from the exact value
    ("sqrt", "sqrt", True, 1),
    ("rsqrt", "rsqrt", True, 2),
    ("cbrt", "cbrt", False, 3),
]


@pytest.fixture(scope="module")
def xla():
    return Xla()


@pytest.mark.parametrize("dtype", REAL_TYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,lax_name,positive,budget", UNARY, ids=[u[0] for u in UNARY])
def test_real_unary_math_within_ulps_of_xla(xla, name, lax_name, positive, budget, dtype):
    x = _inputs(dtype, positive)
    expected = xla(getattr(xla.lax, lax_name), x)
    result = apply(f"stablehlo.{name}", x)
    assert result.dtype == np.dtype(dtype)
    assert ulp_distance(result, expected).max() <= budget


@pytest.mark.parametrize("dtype", COMPLEX_TYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,lax_name", [("exponential", "exp"), ("log", "log"),
                                           ("sqrt", "sqrt"), ("rsqrt", "rsqrt"),
                                           ("tanh", "tanh"), ("sine", "sin"),
                                           ("cosine", "cos"), ("tan", "tan"),
                                           ("logistic", "logistic"),
                                           ("exponential_minus_one", "expm1"),
                                           ("log_plus_one", "log1p")])
def test_complex_unary_math_close_to_xla(xla, name, lax_name, dtype):
    z = _inputs(dtype)
    expected = xla(getattr(xla.lax, lax_name), z)
    result = apply(f"stablehlo.{name}", z)
    assert result.dtype == np.dtype(dtype)
    scale = np.maximum(np.abs(expected), np.finfo(np.dtype(dtype).char.lower()).tiny)
    relative = np.abs(result.astype(np.complex128) - expected) / scale
    assert relative.max() <= 8 * np.finfo(result.real.dtype).eps


@pytest.mark.parametrize("dtype", REAL_TYPES, ids=lambda d: np.dtype(d).name)
def test_rounding_ops_match_xla_exactly(xla, dtype):
    x = (_inputs(dtype) * 2).astype(dtype)
    x[:8] = np.array([0.5, 1.5, 2.5, -0.5, -2.5, -0.4, np.inf, np.nan]).astype(dtype)
    lax = xla.lax
    assert_same(apply("stablehlo.floor", x), xla(lax.floor, x))
    assert_same(apply("stablehlo.ceil", x), xla(lax.ceil, x))
    assert_same(apply("stablehlo.round_nearest_even", x),
                xla(lambda a: lax.round(a, lax.RoundingMethod.TO_NEAREST_EVEN), x))
    assert_same(apply("stablehlo.round_nearest_afz", x),
                xla(lambda a: lax.round(a, lax.RoundingMethod.AWAY_FROM_ZERO), x))
    assert_same(apply("stablehlo.is_finite", x, result=np.bool_), xla(lax.is_finite, x))


@pytest.mark.parametrize("dtype", REAL_TYPES, ids=lambda d: np.dtype(d).name)
def test_binary_math_within_ulps_of_xla(xla, dtype):
    y, x = _inputs(dtype), _inputs(dtype)[::-1].copy()
    assert ulp_distance(apply("stablehlo.atan2", y, x), xla(xla.lax.atan2, y, x)).max() <= 3
    base = np.abs(_inputs(dtype))
    exponent = (_inputs(dtype) / 2).astype(dtype)
    assert ulp_distance(apply("stablehlo.power", base, exponent),
                        xla(xla.lax.pow, base, exponent)).max() <= 3
    assert_same(apply("stablehlo.remainder", y, x), xla(xla.lax.rem, y, x))
    for name, fn in [("add", xla.lax.add), ("subtract", xla.lax.sub), ("multiply", xla.lax.mul),
                     ("divide", xla.lax.div), ("maximum", xla.lax.max),
                     ("minimum", xla.lax.min)]:
        assert_same(apply(f"stablehlo.{name}", y, x), xla(fn, y, x))


def test_special_values_of_math_ops_match_xla(xla):
    # No subnormal inputs: XLA's CPU backend flushes them to zero, the spec
    # (IEEE-754) does not.
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, -1.0, 1e-300, 710.0], np.float64)
    for name, lax_name, _, _ in UNARY:
        result = apply(f"stablehlo.{name}", x)
        expected = xla(getattr(xla.lax, lax_name), x)
        assert ulp_distance(result, expected).max() <= 3, name
