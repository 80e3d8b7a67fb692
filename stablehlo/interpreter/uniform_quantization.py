"""Uniform quantization arithmetic: the spec's ``quantize`` and ``dequantize``.

A quantized tensor holds storage integers ``q``; its real value is
``(q - zero_point) * scale`` in the expressed type. Per-axis types carry one
(scale, zero_point) pair per index of ``axis``.

Both directions round in the expressed type after every step, as the spec's
formulas do (``convert``, ``multiply``, ``divide``, ``add`` on expressed-type
tensors), computing in float64 where one float64 operation followed by one
rounding equals the expressed-type operation:

    dequantize(q) = convert(q - zp) * convert(scale)
    quantize(x)   = convert(round_nearest_even(clamp(min, x / scale + zp, max)))

The evaluator uses these for the dequantize-compute-quantize semantics of
ops on quantized tensors; the uniform_quantize/uniform_dequantize kernels
are in conversions.py.
"""
from __future__ import annotations

import numpy as np

from stablehlo.interpreter import numerics as nx
from stablehlo.ir.types import QuantizedType, numpy_dtype


def _parameters(qtype: QuantizedType, rank: int):
    """(scales, zero points) as float64 arrays that broadcast against the tensor."""
    expressed = numpy_dtype(qtype.expressed_type)
    # The spec builds the scales as constants of the expressed type.
    scales = nx.round_to(np.asarray(qtype.scales, dtype=np.float64), expressed)
    scales = scales.astype(np.float64)
    zero_points = np.asarray(qtype.zero_points, dtype=np.float64)
    if qtype.axis is None:
        return scales.reshape(()), zero_points.reshape(())
    shape = [1] * rank
    shape[qtype.axis] = len(qtype.scales)
    return scales.reshape(shape), zero_points.reshape(shape)


def dequantize(storage: np.ndarray, qtype: QuantizedType) -> np.ndarray:
    """Expressed-type values of the storage integers ``storage``."""
    expressed = numpy_dtype(qtype.expressed_type)
    scales, zero_points = _parameters(qtype, storage.ndim)
    centered = storage.astype(np.float64) - zero_points  # exact: small integers
    centered = nx.round_to(centered, expressed).astype(np.float64)
    with np.errstate(all="ignore"):
        return nx.round_to(centered * scales, expressed)


def quantize(values: np.ndarray, qtype: QuantizedType) -> np.ndarray:
    """Storage integers of expressed-type ``values`` (per the spec's ``quantize``)."""
    expressed = numpy_dtype(qtype.expressed_type)
    storage = numpy_dtype(qtype.storage_type)
    scales, zero_points = _parameters(qtype, np.ndim(values))
    x = nx.to_float64(values)
    with np.errstate(all="ignore"):
        scaled = nx.round_to(x / scales, expressed).astype(np.float64)
        shifted = nx.round_to(scaled + zero_points, expressed).astype(np.float64)
    low, high = float(qtype.min_value), float(qtype.max_value)
    # clamp(min, x, max) = min(max(x, min), max); NaN stays NaN (and becomes 0).
    clamped = np.where(shifted < low, low, np.where(shifted > high, high, shifted))
    rounded = np.rint(clamped)
    result = np.where(np.isnan(rounded), 0.0, rounded).astype(np.int64)
    return nx.wrap_int(result, storage)


def requantize(storage: np.ndarray, source: QuantizedType,
               target: QuantizedType) -> np.ndarray:
    """Storage integers of ``target`` for storage integers of ``source``."""
    return quantize(dequantize(storage, source), target)
