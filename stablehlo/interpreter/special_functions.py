"""Special functions in float64 for the CHLO kernels: lgamma, digamma,
erf/erfc, erf_inv, bessel_i1e, Hurwitz zeta and polygamma.

Only numpy and ``math`` are available to stablehlo/, so these are written
here: exact library functions (math.lgamma, math.erf, math.erfc) vectorized
where they exist, and series/asymptotic expansions evaluated to float64
accuracy elsewhere. Every function takes and returns float64 arrays.

Values at poles and outside the domain follow XLA's CHLO decompositions,
because the conformance expectations come from XLA:

* lgamma(+-inf) = +inf; lgamma at 0, -1, -2, ... = +inf;
* digamma at 0, -1, -2, ... and at -inf = NaN; digamma(+inf) = +inf;
* zeta(x, q) = NaN for x < 1, +inf for x == 1; for q <= 0 it is NaN unless x
  is an integer, and at integer q <= 0 (a pole) +inf for even x, else NaN;
* polygamma(n, x) = NaN unless n is a natural number.
"""
from __future__ import annotations

import math

import numpy as np

_PI = math.pi


def _vectorize(fn):
    ufunc = np.frompyfunc(fn, 1, 1)

    def run(x: np.ndarray) -> np.ndarray:
        return np.asarray(ufunc(np.asarray(x, dtype=np.float64)), dtype=np.float64)
    return run


def _lgamma_scalar(x: float) -> float:
    try:
        return math.lgamma(x)
    except ValueError:  # a pole: 0, -1, -2, ...
        return math.inf


lgamma = _vectorize(_lgamma_scalar)
erf = _vectorize(math.erf)
erfc = _vectorize(math.erfc)


# ---------------------------------------------------------------------------
# digamma

# B_2k / (2k) for the asymptotic series of digamma, k = 1..7.
_DIGAMMA_ASYMPTOTIC = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12)


def _digamma_large(y: np.ndarray) -> np.ndarray:
    """digamma(y) for y >= 10: ln y - 1/(2y) - sum B_2k / (2k y^2k)."""
    inv2 = 1.0 / (y * y)
    series = np.zeros_like(y)
    for coeff in reversed(_DIGAMMA_ASYMPTOTIC):
        series = (series + coeff) * inv2
    return np.log(y) - 0.5 / y - series


def _digamma_positive(x: np.ndarray) -> np.ndarray:
    """digamma(x) for x >= 0.5 by recurrence up to 10, then the asymptotic series."""
    y = np.array(x, dtype=np.float64, copy=True)
    correction = np.zeros_like(y)
    for _ in range(10):
        small = y < 10.0
        if not small.any():
            break
        correction = np.where(small, correction - 1.0 / y, correction)
        y = np.where(small, y + 1.0, y)
    return _digamma_large(y) + correction


def digamma(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    reflect = x < 0.5
    # Reflection: psi(x) = psi(1 - x) - pi / tan(pi x); tan has period 1, so
    # reduce x to [-1/2, 1/2] first, exactly, to keep pi * x accurate.
    mirrored = np.where(reflect, 1.0 - x, x)
    mirrored = np.where(np.isfinite(mirrored), mirrored, np.where(np.isnan(x), x, np.inf))
    result = _digamma_positive(mirrored)
    reduced = x - np.round(x)
    cotangent_term = _PI / np.tan(_PI * reduced)
    result = np.where(reflect, result - cotangent_term, result)
    pole = (x <= 0) & (x == np.floor(x))
    return np.where(pole | (x == -np.inf), np.nan, result)


# ---------------------------------------------------------------------------
# erf_inv


def _erf_inv_guess(x: np.ndarray) -> np.ndarray:
    """Giles' single-precision approximation (about 1e-7 relative)."""
    w = -np.log((1.0 - x) * (1.0 + x))
    central = w - 2.5
    p = 2.81022636e-08
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
              -0.00125372503, -0.00417768164, 0.246640727, 1.50140941):
        p = c + p * central
    tail = np.sqrt(w) - 3.0
    q = -0.000200214257
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
              -0.0076224613, 0.00943887047, 1.00167406, 2.83297682):
        q = c + q * tail
    return np.where(w < 5.0, p, q) * x


def erf_inv(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    inside = np.abs(x) < 1.0
    a = np.abs(np.where(inside, x, 0.0))
    y = np.abs(_erf_inv_guess(a))
    # Newton steps. For |x| <= 1/2 solve erf(y) = |x|. Beyond, solve
    # log(erfc(y)) = log(1 - |x|): 1 - |x| is exact there (erf(y) - x would
    # cancel), and log(erfc) is nearly quadratic, so Newton converges from
    # the rough guess even far in the tail.
    tail = a > 0.5
    target = np.log1p(-np.where(tail, a, 0.0))
    for _ in range(6):
        slope = (2.0 / math.sqrt(_PI)) * np.exp(-y * y)
        central_step = (erf(y) - a) / slope
        complement = erfc(y)
        tail_step = (target - np.log(complement)) * complement / slope
        step = np.where(tail, tail_step, central_step)
        y = y - np.where(np.isfinite(step), step, 0.0)
    y = np.copysign(y, x)
    edge = np.where(np.abs(x) == 1.0, np.copysign(np.inf, x), np.nan)
    return np.where(inside, y, edge)


# ---------------------------------------------------------------------------
# bessel_i1e


def _i1e_series(t: np.ndarray) -> np.ndarray:
    """exp(-t) I1(t) from the power series (all terms positive), t <= 20."""
    quarter = (t * t) / 4.0
    term = t / 2.0
    total = term.copy()
    for k in range(1, 80):
        term = term * quarter / (k * (k + 1))
        total = total + term
    return total * np.exp(-t)


def _i1e_asymptotic(t: np.ndarray) -> np.ndarray:
    """exp(-t) I1(t) from the Hankel expansion, t > 20."""
    term = np.ones_like(t)
    total = np.ones_like(t)
    for k in range(1, 40):
        term = term * -(4.0 - (2 * k - 1) ** 2) / (8.0 * k * t)
        total = total + term
    return total / np.sqrt(2.0 * _PI * t)


def bessel_i1e(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    t = np.abs(x)
    small = t <= 20.0
    series = _i1e_series(np.where(small, t, 0.0))
    asymptotic = _i1e_asymptotic(np.where(small, 21.0, t))
    magnitude = np.where(small, series, asymptotic)
    magnitude = np.where(np.isinf(t), 0.0, magnitude)
    # i1e is odd: keep the sign of x, including -0.
    return np.where(np.isnan(x), x, np.copysign(magnitude, x))


# ---------------------------------------------------------------------------
# Hurwitz zeta and polygamma

# Bernoulli numbers B_2, B_4, ..., B_24 for the Euler-Maclaurin tail.
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510,
              43867 / 798, -174611 / 330, 854513 / 138, -236364091 / 2730)


def _zeta_euler_maclaurin(s: np.ndarray, q: np.ndarray) -> np.ndarray:
    """sum_{k>=0} (q + k)**-s for s > 1 by Euler-Maclaurin summation."""
    # Sum terms directly until a = q + N >= max(12, s) (capped: beyond 64,
    # a**-s is negligible next to the direct terms), so the asymptotic tail
    # converges fast.
    start = np.clip(s, 12.0, 64.0)
    needed = np.where(q < start, np.ceil(start - q), 0.0)
    total = np.zeros_like(s)
    a = q.copy()
    steps = int(needed.max()) if needed.size else 0
    for _ in range(steps):
        active = needed > 0
        total = total + np.where(active, np.power(a, -s), 0.0)
        a = np.where(active, a + 1.0, a)
        needed = needed - 1.0
    a_pow = np.power(a, -s)
    total = total + a * a_pow / (s - 1.0) + 0.5 * a_pow
    # Tail: sum_j B_2j / (2j)! * s (s+1) ... (s+2j-2) * a**(-s-2j+1).
    factor = s * a_pow / (2.0 * a)
    for j, bernoulli in enumerate(_BERNOULLI, start=1):
        total = total + bernoulli * factor
        factor = factor * (s + 2 * j - 1) * (s + 2 * j) / ((2 * j + 1) * (2 * j + 2) * a * a)
    return total


def zeta(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Hurwitz zeta(x, q) = sum_{k>=0} (q + k)**-x."""
    x, q = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(q, dtype=np.float64))
    x_is_int = x == np.floor(x)
    q_nonpositive = q <= 0
    at_pole = q_nonpositive & (q == np.floor(q))
    valid = ((x > 1.0) & np.isfinite(q) & np.isfinite(x) & ~at_pole
             & (x_is_int | ~q_nonpositive))
    result = _zeta_euler_maclaurin(np.where(valid, x, 2.0), np.where(valid, q, 1.0))
    # Limits the expansion cannot reach.
    result = np.where(np.isposinf(q) & (x > 1.0), 0.0, result)
    at_infinity = np.where(q > 1.0, 0.0, np.where(q == 1.0, 1.0, np.inf))
    result = np.where(np.isposinf(x), at_infinity, result)
    result = np.where(np.isnan(x) | np.isnan(q), np.nan, result)
    # Domain rules (as XLA's decomposition has them).
    result = np.where(x < 1.0, np.nan, result)
    result = np.where(q_nonpositive & ~x_is_int, np.nan, result)
    even = x_is_int & (np.fmod(x, 2.0) == 0)
    result = np.where(at_pole, np.where(even, np.inf, np.nan), result)
    return np.where(x == 1.0, np.inf, result)


def _factorial(n: float) -> float:
    try:
        return math.gamma(n + 1.0)
    except (OverflowError, ValueError):
        return math.inf


def polygamma(n: np.ndarray, x: np.ndarray) -> np.ndarray:
    """psi^(n)(x) = (-1)**(n+1) n! zeta(n + 1, x) for natural n >= 1."""
    n, x = np.broadcast_arrays(np.asarray(n, dtype=np.float64), np.asarray(x, dtype=np.float64))
    natural = (n >= 0) & (n == np.floor(n)) & np.isfinite(n)
    order = np.where(natural, n, 1.0)
    factorial = _vectorize(_factorial)(order)
    sign = np.where(np.fmod(order, 2.0) == 1.0, 1.0, -1.0)
    higher = sign * factorial * zeta(order + 1.0, x)
    result = np.where(order == 0, digamma(x), higher)
    return np.where(natural, result, np.nan)
