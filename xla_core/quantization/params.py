"""Quantization parameters: scales and zero points from weights and from calibrated ranges.

Weights are symmetric (zero point 0, as the spec requires of a quantized dot's rhs). int8: the
scale of a channel is ``max|w| / 127``, so every weight rounds to within half a step (``scale /
2``) of its value. int4 has so few levels that covering the largest weight costs the rest
precision: each channel's scale is ``r * max|w| / 7`` with the ratio ``r`` from a grid over
[0.6, 8/7] (1 included) that minimises the channel's squared reconstruction error, so weights
beyond ``7 * scale`` clip and ``r > 1`` uses the level -8 of a channel whose largest
magnitude is negative; then alternating minimisation refines it (the integers for the
scale, the least-squares scale for the integers), which the grid's spacing leaves room for in
small groups. Never worse than ``max|w| / 7``: on Gaussian and uniform groups of 32 it removes
about 21% of that scale's squared error. Activations are asymmetric int8:
the range is widened to contain 0 (so that zero, e.g. padding, is exact), ``scale =
(hi - lo) / 255`` and the zero point maps ``lo`` to -128.

Storage integers are made by the interpreter's ``quantize`` (the spec's arithmetic), so a
quantized constant holds exactly what ``uniform_quantize`` of the float weight would give.
"""
from __future__ import annotations

import numpy as np

from stablehlo.interpreter.uniform_quantization import quantize as quantize_storage
from stablehlo.ir.types import F32, IntegerType, QuantizedType

INT8_MIN, INT8_MAX = -128, 127


def storage_type(bits: int) -> IntegerType:
    return IntegerType(bits)


def symmetric_max(bits: int) -> int:
    """The largest magnitude a symmetric ``bits``-bit weight uses (127, 7)."""
    return (1 << (bits - 1)) - 1


def _positive_scales(amax: np.ndarray, qmax: int) -> np.ndarray:
    """``amax / qmax`` in f32; an all-zero channel gets scale 1 (the spec needs scale > 0)."""
    scales = (np.asarray(amax, dtype=np.float64) / qmax).astype(np.float32)
    return np.where(scales > 0, scales, np.float32(1.0))


# int4 clipping ratios searched (see the module docstring): steps of 1/50 from 0.6 to 1, of
# 1/28 above (8/7 lets -8 reach the largest magnitude). Groups of 32 pick 0.75-1.14; groups of
# 128 and whole channels reach below 0.7; a finer grid gains under 1% of error.
_INT4_CLIP_RATIOS = np.concatenate([np.arange(30, 51) / 50, 1 + np.arange(1, 5) / 28])
# weights searched at once: the working arrays (512 KiB each) stay in cache
_SEARCH_BLOCK = 1 << 17


def _least_error_scales(channels: np.ndarray, amax: np.ndarray, bits: int) -> np.ndarray:
    """Per row of ``channels`` ([C, M], f32), a f32 scale whose symmetric rounding (clamped
    to the storage range) has a least squared error: the best ``ratio * amax / qmax`` of
    the grid, refined by alternating minimisation (``_refine_steps``). The search runs on
    each row divided by its ``amax`` (the same choice: a row's errors all scale by
    ``amax**2``), in place, a block of rows at a time."""
    low, high = -(1 << (bits - 1)), symmetric_max(bits)
    unit_steps = np.ones(len(channels), dtype=np.float32)
    divisors = np.where(amax > 0, amax, 1.0).astype(np.float32)
    block_rows = max(1, _SEARCH_BLOCK // max(1, channels.shape[1]))
    for start in range(0, len(channels), block_rows):
        rows = slice(start, start + block_rows)
        unit = channels[rows] / divisors[rows, None]
        work = np.empty_like(unit)
        best_error = np.full(len(unit), np.inf, dtype=np.float32)
        for ratio in _INT4_CLIP_RATIOS:
            step = np.float32(ratio / high)
            np.divide(unit, step, out=work)
            np.rint(work, out=work)
            np.clip(work, low, high, out=work)
            work *= step
            work -= unit
            error = np.einsum("cm,cm->c", work, work)
            better = error < best_error
            best_error[better] = error[better]
            unit_steps[rows][better] = step
        unit_steps[rows] = _refine_steps(unit, unit_steps[rows], low, high, work)
    return np.where(amax > 0, (amax * unit_steps).astype(np.float32), np.float32(1.0))


# alternating-minimisation rounds after the grid: the first two remove most of what they can
# (with groups of 16, up to 10% of a group's error that the grid's spacing misses)
_REFINE_ROUNDS = 3


def _refine_steps(unit: np.ndarray, steps: np.ndarray, low: int, high: int,
                  work: np.ndarray) -> np.ndarray:
    """Alternate the two exact minimisations of ``|clip(q) * step - unit|^2`` per row: the
    integers ``q`` for a step (round to nearest, clamp), then the step for those integers
    (least squares, ``<unit, q> / <q, q>``). Neither raises the error, so the result is
    never worse than ``steps``."""
    for _ in range(_REFINE_ROUNDS):
        np.divide(unit, steps[:, None], out=work)
        np.rint(work, out=work)
        np.clip(work, low, high, out=work)
        norms = np.einsum("cm,cm->c", work, work)
        projections = np.einsum("cm,cm->c", work, unit)
        fitted = projections / np.where(norms > 0, norms, 1)
        steps = np.where((norms > 0) & (fitted > 0), fitted, steps).astype(np.float32)
    return steps


def weight_type(weights: np.ndarray, bits: int, axis) -> QuantizedType:
    """The symmetric quantized type of ``weights``: one scale per index of ``axis``
    (per-channel), or one for the whole tensor when ``axis`` is None."""
    values = np.asarray(weights, dtype=np.float32)
    channels = values.reshape(1, -1) if axis is None else \
        np.moveaxis(values, axis, 0).reshape(values.shape[axis], -1)
    amax = np.abs(channels).max(axis=1, initial=0.0).astype(np.float64)
    if bits == 4:
        scales = _least_error_scales(channels, amax, bits)
    else:
        scales = _positive_scales(amax, symmetric_max(bits))
    return QuantizedType(storage_type(bits), F32, tuple(float(s) for s in scales),
                         (0,) * len(scales), axis)


def activation_type(low: float, high: float) -> QuantizedType:
    """The asymmetric per-tensor int8 type covering [low, high] (widened to contain 0)."""
    low, high = min(float(low), 0.0), max(float(high), 0.0)
    scale = float(_positive_scales(np.array([high - low]), INT8_MAX - INT8_MIN)[0])
    zero_point = int(np.clip(np.round(INT8_MIN - low / scale), INT8_MIN, INT8_MAX))
    return QuantizedType(storage_type(8), F32, (scale,), (zero_point,))


def accumulator_type(lhs: QuantizedType, rhs: QuantizedType, result_axis) -> QuantizedType:
    """The i32 type of a quantized dot/convolution's exact integer sum: scale ``s_x * s_w``
    (per result channel when the weights are per-channel), zero point 0."""
    scales = tuple(float(lhs.scales[0]) * float(s) for s in rhs.scales)
    axis = result_axis if rhs.axis is not None else None
    return QuantizedType(storage_type(32), F32, scales, (0,) * len(scales), axis)


def quantize_array(values: np.ndarray, qtype: QuantizedType) -> np.ndarray:
    """Storage integers of ``values`` under ``qtype`` (the spec's quantize)."""
    return quantize_storage(np.asarray(values, dtype=np.float32), qtype)


def quantize_weights(weights: np.ndarray, bits: int, axis) -> tuple[np.ndarray, np.ndarray]:
    """``weights`` as symmetric ``bits``-bit storage integers (int8 numpy, also for int4)
    and their f32 scales, one per index of ``axis`` (``weight_type``): what a framework
    stores for a weight the quantizer would quantize the same way."""
    qtype = weight_type(weights, bits, axis)
    storage = quantize_array(weights, qtype).astype(np.int8)
    return storage, np.asarray(qtype.scales, dtype=np.float32)
