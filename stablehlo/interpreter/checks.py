"""The ``check`` dialect: assertions of the conformance suites.

Comparison rules (stablehlo-format.md §10):

* ``expect_eq[_const]``: exact equality on the element type; floats compare by
  value (NaN != NaN, -0 == +0); complex numbers compare both parts.
* ``expect_almost_eq[_const]``: absolute tolerance (default 1e-4). Equal values
  pass, two NaNs pass, an inf or NaN paired with anything else fails,
  otherwise ``|a - b| <= tolerance``; complex parts are checked separately.
* ``expect_close``: ULP distance within ``[min_ulp_difference,
  max_ulp_difference]`` (defaults 0 and 1). Bitwise-equal values and two NaNs
  are 0 apart; any other pair with a non-finite value is infinitely apart;
  otherwise, with ``m(x)`` the bit pattern of ``|x|`` read as an unsigned
  integer, same signs are ``|m(a) - m(b)|`` apart and opposite signs
  ``m(a) + m(b)``. Complex: the larger distance of the two parts. The bit
  patterns are those of the element type itself (bf16, f8, ...).
* ``expect_serialized_eq``: exact equality with what ``interpreter.probe``
  recorded for ``probe_id`` at iteration ``iter`` (see io.py).

The comparison functions are pure: they return ``None`` when the check holds
and a message describing the worst mismatch otherwise; the kernels raise
``CheckFailure`` with that message.
"""
from __future__ import annotations

import numpy as np

from stablehlo.errors import CheckFailure
from stablehlo.ir.attributes import DenseElementsAttr, attr_to_python
from stablehlo.interpreter.kernels import kernel

DEFAULT_TOLERANCE = 1e-4


# ---------------------------------------------------------------------------
# Pure comparisons

def _kind(array: np.ndarray) -> str:
    dtype = array.dtype
    if dtype == np.bool_:
        return "bool"
    if np.issubdtype(dtype, np.complexfloating):
        return "complex"
    if np.issubdtype(dtype, np.integer):
        return "int"
    if np.issubdtype(dtype, np.floating):
        return "float"
    # ml_dtypes types: int2/int4/uint2/uint4 behave as integers, the rest as floats.
    return "int" if "int" in dtype.name else "float"


def _as_exact(array: np.ndarray) -> np.ndarray:
    """Values in a dtype numpy compares exactly (ml_dtypes -> int64 / float64)."""
    kind = _kind(array)
    if kind == "int" and array.dtype.kind not in "iu":
        return array.astype(np.int64)
    if kind == "float" and array.dtype.kind != "f":
        return array.astype(np.float64)
    return array


def _shape_problem(actual: np.ndarray, expected: np.ndarray):
    if actual.shape != expected.shape:
        return f"shape mismatch: actual {actual.shape}, expected {expected.shape}"
    return None


def _report(bad: np.ndarray, score: np.ndarray, actual, expected, what) -> str:
    """Message for the element with the largest ``score`` among ``bad`` ones."""
    flat_bad = np.flatnonzero(bad)
    scores = np.asarray(score, dtype=np.float64).reshape(-1)[flat_bad]
    scores = np.where(np.isnan(scores), np.inf, scores)
    worst = int(flat_bad[int(np.argmax(scores))]) if flat_bad.size else 0
    index = np.unravel_index(worst, actual.shape) if actual.ndim else ()
    a = actual.reshape(-1)[worst] if actual.size else actual
    e = expected.reshape(-1)[worst] if expected.size else expected
    return (f"{flat_bad.size} of {actual.size} elements differ; worst at index "
            f"{tuple(int(i) for i in index)}: actual {_fmt(a)}, expected {_fmt(e)} "
            f"({what(worst)})")


def _fmt(x) -> str:
    if isinstance(x, (np.bool_, bool)):
        return "true" if x else "false"
    return repr(x.item()) if hasattr(x, "item") else repr(x)


def compare_eq(actual, expected):
    """None if ``actual`` equals ``expected`` exactly, else a message."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    problem = _shape_problem(actual, expected)
    if problem:
        return problem
    a, e = _as_exact(actual), _as_exact(expected)
    if _kind(actual) != _kind(expected):
        return f"element type mismatch: actual {actual.dtype}, expected {expected.dtype}"
    bad = ~(a == e)
    if not bad.any():
        return None
    if _kind(actual) in ("int", "float", "complex"):
        diff = np.abs(a.astype(np.complex128 if _kind(actual) == "complex" else np.float64)
                      - e.astype(np.complex128 if _kind(actual) == "complex" else np.float64))
    else:
        diff = bad.astype(np.float64)
    flat = diff.reshape(-1)
    return _report(bad, diff, actual, expected, lambda i: f"difference {flat[i]}")


def _almost_bad(a: np.ndarray, e: np.ndarray, tolerance: float):
    """(bad mask, |a - e|) for real float arrays under the almost-equal rule."""
    a = a.astype(np.float64)
    e = e.astype(np.float64)
    equal = a == e
    both_nan = np.isnan(a) & np.isnan(e)
    finite = np.isfinite(a) & np.isfinite(e)
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: masked out below
        diff = np.abs(a - e)
    close = finite & (diff <= tolerance)
    bad = ~(equal | both_nan | close)
    return bad, np.where(finite, diff, np.inf)


def compare_almost_eq(actual, expected, tolerance: float = DEFAULT_TOLERANCE):
    """None if every element is within ``tolerance`` (absolute), else a message."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    problem = _shape_problem(actual, expected)
    if problem:
        return problem
    kind = _kind(actual)
    if kind == "bool":
        return compare_eq(actual, expected)
    if kind == "complex":
        bad_re, d_re = _almost_bad(actual.real, expected.real, tolerance)
        bad_im, d_im = _almost_bad(actual.imag, expected.imag, tolerance)
        bad, diff = bad_re | bad_im, np.maximum(d_re, d_im)
    else:
        bad, diff = _almost_bad(_as_exact(actual), _as_exact(expected), tolerance)
    if not bad.any():
        return None
    flat = diff.reshape(-1)
    return _report(bad, diff, actual, expected,
                   lambda i: f"|difference| {flat[i]} > tolerance {tolerance}")


_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _magnitude_bits(x: np.ndarray) -> np.ndarray:
    """m(x): the bit pattern of |x| in x's own float type, as a uint64."""
    return np.abs(x).view(_UNSIGNED[x.dtype.itemsize]).astype(np.uint64)


def ulp_distance(a: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Elementwise ULP distance (float64, inf for non-finite mismatches)."""
    a, e = np.asarray(a), np.asarray(e)
    if _kind(a) == "complex":
        return np.maximum(ulp_distance(a.real, e.real), ulp_distance(a.imag, e.imag))
    if _kind(a) in ("int", "bool"):
        return np.abs(_as_exact(a).astype(np.float64) - _as_exact(e).astype(np.float64))
    unsigned = _UNSIGNED[a.dtype.itemsize]
    same_bits = a.view(unsigned) == e.astype(a.dtype).view(unsigned)
    a64, e64 = a.astype(np.float64), e.astype(np.float64)
    both_nan = np.isnan(a64) & np.isnan(e64)
    finite = np.isfinite(a64) & np.isfinite(e64)
    ma, me = _magnitude_bits(a), _magnitude_bits(e.astype(a.dtype))
    same_sign = np.signbit(a64) == np.signbit(e64)
    # Integer arithmetic: float64 could not tell f64 patterns 1 ULP apart.
    apart = np.where(ma >= me, ma - me, me - ma)
    dist = np.where(same_sign, apart, ma + me).astype(np.float64)
    dist = np.where(finite, dist, np.inf)
    return np.where(same_bits | both_nan, 0.0, dist)


def compare_close(actual, expected, max_ulp: int = 1, min_ulp: int = 0):
    """None if every ULP distance lies in ``[min_ulp, max_ulp]``, else a message."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    problem = _shape_problem(actual, expected)
    if problem:
        return problem
    dist = ulp_distance(actual, expected)
    bad = (dist > max_ulp) | (dist < min_ulp)
    if not bad.any():
        return None
    flat = dist.reshape(-1)
    return _report(bad, np.where(dist > max_ulp, dist, min_ulp - dist), actual, expected,
                   lambda i: f"ULP distance {flat[i]:g} not in [{min_ulp}, {max_ulp}]")


# ---------------------------------------------------------------------------
# Kernels

def _fail(op, message) -> None:
    if message is not None:
        raise CheckFailure(f"{op.name} failed: {message}")


def _const(op) -> np.ndarray:
    value = op.attributes.get("value")
    if not isinstance(value, DenseElementsAttr):
        raise CheckFailure(f"{op.name} needs a dense 'value' attribute")
    return value.array


def _number(op, name: str, default):
    attr = op.attributes.get(name)
    return default if attr is None else attr_to_python(attr)


@kernel("check.expect_eq", multi=True)
def expect_eq(ctx, op, actual, expected):
    _fail(op, compare_eq(actual, expected))
    return []


@kernel("check.expect_eq_const", multi=True)
def expect_eq_const(ctx, op, actual):
    _fail(op, compare_eq(actual, _const(op)))
    return []


@kernel("check.expect_almost_eq", multi=True)
def expect_almost_eq(ctx, op, actual, expected):
    tolerance = float(_number(op, "tolerance", DEFAULT_TOLERANCE))
    _fail(op, compare_almost_eq(actual, expected, tolerance))
    return []


@kernel("check.expect_almost_eq_const", multi=True)
def expect_almost_eq_const(ctx, op, actual):
    tolerance = float(_number(op, "tolerance", DEFAULT_TOLERANCE))
    _fail(op, compare_almost_eq(actual, _const(op), tolerance))
    return []


@kernel("check.expect_close", multi=True)
def expect_close(ctx, op, actual, expected):
    max_ulp = int(_number(op, "max_ulp_difference", 1))
    min_ulp = int(_number(op, "min_ulp_difference", 0))
    _fail(op, compare_close(actual, expected, max_ulp, min_ulp))
    return []


@kernel("check.expect_serialized_eq", multi=True)
def expect_serialized_eq(ctx, op, actual):
    from stablehlo.interpreter.io import probe_store
    probe_id = str(_number(op, "probe_id", ""))
    iteration = int(_number(op, "iteration", _number(op, "iter", 0)))
    expected = probe_store(ctx).read(probe_id, iteration, op.operands[0].type)
    _fail(op, compare_eq(actual, expected))
    return []
