"""Accumulation dtypes for contraction and reduction kernels.

StableHLO integer arithmetic wraps modulo 2**width, and XLA accumulates
narrow floats (f16, bf16, f8...) in f32 and rounds once at the end. These
helpers pick the numpy dtype a kernel should compute in and bring the result
back to the op's element type:

* integers (any width, incl. i2/i4/ui2/ui4) and booleans accumulate in
  int64/uint64; the low ``width`` bits of the sum are the StableHLO result,
  because two's-complement addition and multiplication commute with taking
  the value modulo 2**width (numerics.wrap_int);
* floats accumulate in f32, or f64 when any participant is f64; complex
  likewise in complex64/complex128.
"""
from __future__ import annotations

import numpy as np

from stablehlo.interpreter import numerics

_KINDS = {numerics.BOOL: "b", numerics.SINT: "i", numerics.UINT: "u",
          numerics.FLOAT: "f", numerics.COMPLEX: "c"}


def kind(dtype) -> str:
    """'b' bool, 'i' signed int, 'u' unsigned int, 'f' float, 'c' complex."""
    return _KINDS[numerics.category(dtype)]


def is_wide_float(dtype) -> bool:
    """f64 or complex128: the types that need f64 accumulation."""
    dtype = np.dtype(dtype)
    return dtype == np.float64 or dtype == np.complex128


def accumulation_dtype(*dtypes) -> np.dtype:
    """The dtype to compute a sum of products of ``dtypes`` in (result dtype included)."""
    kinds = {kind(d) for d in dtypes}
    wide = any(is_wide_float(d) for d in dtypes)
    if "c" in kinds:
        return np.dtype(np.complex128 if wide else np.complex64)
    if "f" in kinds:
        return np.dtype(np.float64 if wide else np.float32)
    if kinds <= {"u", "b"} and "u" in kinds:
        return np.dtype(np.uint64)
    return np.dtype(np.int64)


def widen(array: np.ndarray, dtype) -> np.ndarray:
    """``array`` as ``dtype`` for computing; integers are sign/zero-extended exactly."""
    dtype = np.dtype(dtype)
    array = np.asarray(array)
    if array.dtype == dtype:
        return array
    if kind(array.dtype) in "iu":
        array = numerics.widen_int(array)
        if dtype == np.uint64:
            return array.astype(np.uint64)
    return array.astype(dtype)


def to_result(values: np.ndarray, dtype) -> np.ndarray:
    """Bring an accumulated array back to the op's result ``dtype``, rounding once."""
    dtype = np.dtype(dtype)
    values = np.asarray(values)
    target = kind(dtype)
    source = kind(values.dtype)
    if target == "b":
        return np.asarray(values != 0)
    if target in "iu":
        if source in "iub":
            return numerics.wrap_int(values.astype(np.int64) if source == "b" else values, dtype)
        return values.astype(dtype)
    if target == "f":
        real = np.real(values) if source == "c" else values
        if numerics.is_native_float(dtype):
            return np.asarray(real.astype(dtype))
        return np.asarray(numerics.round_to(real, dtype))
    return np.asarray(values.astype(dtype))
