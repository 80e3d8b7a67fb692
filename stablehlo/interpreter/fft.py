"""Interpreter kernel of ``stablehlo.fft`` (FFT, IFFT, RFFT, IRFFT).

The transforms run over the trailing ``len(fft_length)`` dimensions with
numpy.fft, whose definitions (unnormalised forward, 1/n inverse, RFFT keeping
``n // 2 + 1`` outputs) are the spec's. numpy (>= 2.0) computes complex64 /
float32 transforms in single precision with pocketfft, the library XLA's CPU
FFT (DUCC) descends from, so rounding stays close to the expected values that
come from XLA; f64 types compute in double precision.
"""
from __future__ import annotations

import numpy as np

from stablehlo.interpreter.kernels import kernel
from stablehlo.interpreter.opattrs import enum_value, fail, int_list
from stablehlo.ir.types import numpy_dtype

def _compute_dtypes(operand_dtype, result_dtype) -> tuple[np.dtype, np.dtype]:
    """(complex, real) numpy dtypes the transform computes in."""
    wide = np.dtype(np.float64) in (operand_dtype, result_dtype) or \
        np.dtype(np.complex128) in (operand_dtype, result_dtype)
    if wide:
        return np.dtype(np.complex128), np.dtype(np.float64)
    return np.dtype(np.complex64), np.dtype(np.float32)


@kernel("stablehlo.fft")
def fft(ctx, op, operand):
    fft_type = enum_value(op, "fft_type")
    lengths = int_list(op, "fft_length")
    operand = np.asarray(operand)
    if not 1 <= len(lengths) <= min(3, operand.ndim):
        raise fail(op, f"fft_length {lengths} must have 1 to 3 entries, at most rank "
                       f"{operand.ndim}")
    result_type = op.result_types[0]
    out = numpy_dtype(result_type.element_type)
    shape = tuple(result_type.shape)
    if 0 in shape or 0 in operand.shape or 0 in lengths:
        return np.zeros(shape, dtype=out)
    axes = tuple(range(operand.ndim - len(lengths), operand.ndim))
    cdt, rdt = _compute_dtypes(operand.dtype, out)
    if fft_type == "FFT":
        value = np.fft.fftn(operand.astype(cdt), s=lengths, axes=axes)
    elif fft_type == "IFFT":
        value = np.fft.ifftn(operand.astype(cdt), s=lengths, axes=axes)
    elif fft_type == "RFFT":
        value = np.fft.rfftn(operand.astype(rdt), s=lengths, axes=axes)
    elif fft_type == "IRFFT":
        value = np.fft.irfftn(operand.astype(cdt), s=lengths, axes=axes)
    else:
        raise fail(op, f"unknown fft_type {fft_type}")
    return np.asarray(value).astype(out)
