"""Interpreter kernels of ``stablehlo.cholesky`` and ``stablehlo.triangular_solve``.

Both work on batches of matrices (the trailing two dimensions) with numpy
only: one loop over the matrix size, every step vectorized over the batch
(and over the right-hand sides). They compute in f64/complex128 and round to
the element type once.

* cholesky reads only the ``lower`` (or upper) triangle; the other triangle of
  the result is zero (the spec leaves it implementation-defined). A matrix
  that is not positive definite gives NaNs instead of an error (undefined
  behaviour in the spec; XLA also returns NaNs).
* triangular_solve reads only the named triangle of ``a`` (and assumes a unit
  diagonal when ``unit_diagonal``); ``op(a)`` transposes or conjugate-
  transposes it; a right-side solve ``x op(a) = b`` is the left-side solve
  ``op(a)^T x^T = b^T``.
"""
from __future__ import annotations

import numpy as np

from stablehlo.interpreter.accumulate import to_result
from stablehlo.interpreter.kernels import kernel
from stablehlo.interpreter.opattrs import bool_value, enum_value, fail
from stablehlo.ir.types import numpy_dtype


def _compute_dtype(dtype) -> np.dtype:
    return np.dtype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64)


def _swap(x: np.ndarray) -> np.ndarray:
    return np.swapaxes(x, -1, -2)


def _check_square(op, name: str, x: np.ndarray) -> int:
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise fail(op, f"{name} must be a batch of square matrices, got shape {x.shape}")
    return x.shape[-1]


def cholesky_lower(a: np.ndarray) -> np.ndarray:
    """Lower Cholesky factor of each matrix, reading only its lower triangle."""
    n = a.shape[-1]
    factor = np.zeros_like(a)
    with np.errstate(all="ignore"):
        for j in range(n):
            row = factor[..., j, :j]
            diag = a[..., j, j] - np.sum(row * np.conj(row), axis=-1)
            pivot = np.sqrt(np.real(diag)).astype(a.dtype)
            factor[..., j, j] = pivot
            if j + 1 < n:
                below = factor[..., j + 1:, :j] @ np.conj(row)[..., :, None]
                factor[..., j + 1:, j] = (a[..., j + 1:, j] - below[..., 0]) / pivot[..., None]
    return factor


@kernel("stablehlo.cholesky")
def cholesky(ctx, op, a):
    _check_square(op, "operand", a)
    lower = bool_value(op, "lower", False)
    x = np.asarray(a).astype(_compute_dtype(a.dtype))
    if not lower:
        x = np.conj(_swap(x))  # the upper triangle of a is the lower one of a^H
    factor = cholesky_lower(x)
    if not lower:
        factor = np.conj(_swap(factor))
    return to_result(factor, numpy_dtype(op.result_types[0].element_type))


def solve_triangular(m: np.ndarray, b: np.ndarray, lower: bool) -> np.ndarray:
    """Solve ``m x = b`` for triangular ``m`` by substitution, batched."""
    n = m.shape[-1]
    x = np.zeros(np.broadcast_shapes(m.shape[:-2], b.shape[:-2]) + b.shape[-2:],
                 dtype=np.result_type(m.dtype, b.dtype))
    rows = range(n) if lower else range(n - 1, -1, -1)
    with np.errstate(all="ignore"):
        for i in rows:
            known = slice(0, i) if lower else slice(i + 1, n)
            partial = m[..., i:i + 1, known] @ x[..., known, :]
            x[..., i, :] = (b[..., i, :] - partial[..., 0, :]) / m[..., i, i][..., None]
    return x


@kernel("stablehlo.triangular_solve")
def triangular_solve(ctx, op, a, b):
    n = _check_square(op, "a", a)
    left = bool_value(op, "left_side")
    lower = bool_value(op, "lower")
    unit = bool_value(op, "unit_diagonal")
    transpose = enum_value(op, "transpose_a", "NO_TRANSPOSE")
    if b.ndim != a.ndim or b.shape[:-2] != a.shape[:-2]:
        raise fail(op, f"a {a.shape} and b {b.shape} must have the same batch dimensions")
    if (b.shape[-2] if left else b.shape[-1]) != n:
        raise fail(op, f"b {b.shape} does not match a {a.shape} for left_side={left}")
    dtype = _compute_dtype(np.result_type(a.dtype, b.dtype)
                           if a.dtype.kind == "c" or b.dtype.kind == "c" else a.dtype)
    m = np.asarray(a).astype(dtype)
    m = np.tril(m) if lower else np.triu(m)
    if unit:
        idx = np.arange(n)
        m[..., idx, idx] = 1
    if transpose in ("TRANSPOSE", "ADJOINT"):
        m = _swap(m)
        if transpose == "ADJOINT":
            m = np.conj(m)
        lower = not lower
    elif transpose != "NO_TRANSPOSE":
        raise fail(op, f"unknown transpose_a {transpose}")
    rhs = np.asarray(b).astype(dtype)
    if not left:
        m, rhs, lower = _swap(m), _swap(rhs), not lower
    x = solve_triangular(m, rhs, lower)
    if not left:
        x = _swap(x)
    return to_result(x, numpy_dtype(op.result_types[0].element_type))
