"""Special functions in float64 for the CHLO kernels: lgamma, digamma,
erf/erfc, erf_inv, bessel_i1e, Hurwitz zeta and polygamma.

Only numpy and ``math`` are available to stablehlo/, so these are written
here: exact library functions (math.lgamma, math.erf, math.erfc) vectorized
where they exist, and series/asymptotic expansions evaluated to float64
accuracy elsewhere. The functions take and return float64 arrays, except
zeta and polygamma, which compute in their arguments' type (f32 or f64; see
Note [zeta as XLA evaluates it]).

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

# Note [zeta as XLA evaluates it]
# XLA computes zeta(x, q) in the argument type (f32 for f32 and narrower):
# ten terms of the series, then a 12-term Euler-Maclaurin tail evaluated by
# Horner's rule (Johansson 2015, formula 5). In f32 that is several ULP away
# from the exact value, and XLA's polygamma inherits it, so the zeta here runs
# that same evaluation in the compute type, rounding after every operation.
# In float64 it is accurate to a few ULP.

_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510,
              43867 / 798, -174611 / 330, 854513 / 138, -236364091 / 2730)  # B_2 .. B_24
# B_2j / (2j)! for j = 1..12, the Euler-Maclaurin coefficients.
_EULER_MACLAURIN = tuple(b / math.factorial(2 * j) for j, b in enumerate(_BERNOULLI, start=1))
_ZETA_DIRECT_TERMS = 10


def _zeta_series(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Direct terms plus the Euler-Maclaurin tail, in x's float type."""
    t = x.dtype.type
    one = t(1)
    acc = q
    power_sum = _pow(q, -x)
    for _ in range(_ZETA_DIRECT_TERMS - 1):
        acc = acc + one
        power_sum = power_sum + _pow(acc, -x)
    acc = acc + one
    acc_power = _pow(acc, -x)
    correction = acc_power * acc / (x - one)
    inverse_square = one / (acc * acc)
    # Horner: sum_j c_j (x+1)...(x+2j-2) / acc**(2j-2), innermost j = 12.
    horner = np.zeros_like(x)
    for j in range(len(_EULER_MACLAURIN), 1, -1):
        rising = (x + t(2 * j - 2)) * (x + t(2 * j - 3))
        horner = rising * (inverse_square * (horner + t(_EULER_MACLAURIN[j - 1])))
    tail = acc_power * (t(0.5) + (x / acc) * (t(_EULER_MACLAURIN[0]) + horner))
    accurate = (power_sum + correction) + tail
    # Where the first omitted term is negligible, the plain sum is the answer.
    negligible = np.abs(acc_power) < np.abs(power_sum) * t(_smallest_subnormal(x.dtype))
    return np.where(negligible, power_sum, accurate)


def _pow(base: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """pow correctly rounded to the operands' float type."""
    return np.power(base.astype(np.float64), exponent.astype(np.float64)).astype(base.dtype)


def _smallest_subnormal(dtype) -> float:
    return float(np.finfo(dtype).smallest_subnormal)


def zeta(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Hurwitz zeta(x, q) = sum_{k>=0} (q + k)**-x, in x's type (f32 or f64)."""
    x, q = np.broadcast_arrays(np.asarray(x), np.asarray(q))
    result = _zeta_series(x, q)
    x_is_int = x == np.floor(x)
    q_nonpositive = q <= 0
    # Domain rules (as XLA's decomposition has them).
    result = np.where(x < 1, np.nan, result)
    result = np.where(q_nonpositive & ~x_is_int, np.nan, result)
    at_pole = q_nonpositive & (q == np.floor(q))
    even = x_is_int & (np.fmod(x, 2) == 0)
    result = np.where(at_pole, np.where(even, np.inf, np.nan), result)
    return np.where(x == 1, np.inf, result).astype(x.dtype)


# The Lanczos approximation (g = 7, n = 9) behind XLA's lgamma; used for the
# n! of polygamma so that f32 results carry XLA's rounding, see
# Note [zeta as XLA evaluates it].
_LANCZOS_G = 7.0
_LANCZOS_BASE = 0.99999999999980993227684700473478
_LANCZOS = (676.520368121885098567009190444019, -1259.13921672240287047156078755283,
            771.3234287776530788486528258894, -176.61502916214059906584551354,
            12.507343278686904814458936853, -0.13857109526572011689554707,
            9.984369578019570859563e-6, 1.50563273514931155834e-7)


def _lanczos_lgamma(x: np.ndarray) -> np.ndarray:
    """log(Gamma(x)) for x >= 1/2 by the Lanczos sum, in x's float type."""
    t_ = x.dtype.type
    z = x - t_(1)
    a = np.full_like(x, t_(_LANCZOS_BASE))
    for k, coeff in enumerate(_LANCZOS, start=1):
        a = a + t_(coeff) / (z + t_(k))
    shift = t_(_LANCZOS_G + 0.5)
    t = shift + z
    log_t = t_(math.log(_LANCZOS_G + 0.5)) + _rounded(np.log1p, z / shift)
    # (z + 1/2) log t - t, written so that it does not overflow.
    r = (z + t_(0.5) - t / log_t) * log_t
    return t_((math.log(2) + math.log(math.pi)) / 2) + r + _rounded(np.log, a)


def _rounded(fn, x: np.ndarray) -> np.ndarray:
    return fn(x.astype(np.float64)).astype(x.dtype)


def polygamma(n: np.ndarray, x: np.ndarray) -> np.ndarray:
    """psi^(n)(x) = (-1)**(n+1) n! zeta(n + 1, x) for natural n >= 1, in x's type."""
    n, x = np.broadcast_arrays(np.asarray(n), np.asarray(x))
    t = x.dtype.type
    natural = (n >= 0) & (n == np.floor(n)) & np.isfinite(n)
    order = np.where(natural, n, t(1)).astype(x.dtype)
    factorial = _rounded(np.exp, _lanczos_lgamma(order + t(1)))
    sign = np.where(np.fmod(order, 2) == 1, t(1), t(-1))
    higher = sign * factorial * zeta(order + t(1), x)
    lowest = digamma(x.astype(np.float64)).astype(x.dtype)
    result = np.where(order == 0, lowest, higher)
    return np.where(natural, result, np.nan).astype(x.dtype)
