"""Interpreter kernels of batch_norm_inference, batch_norm_training, batch_norm_grad.

The spec defines the three ops by decomposition into reduce/broadcast/
arithmetic in the operand's element type; we evaluate the same formulas
(including batch_norm_grad's, taken from XLA's batchnorm expander) in f64
and round each result once, which agrees with the decomposition to within
rounding. ``feature_index`` names the dimension that is kept; statistics
reduce over all the others.
"""
from __future__ import annotations

import numpy as np

from stablehlo.interpreter.accumulate import to_result
from stablehlo.interpreter.kernels import kernel
from stablehlo.interpreter.opattrs import fail, int_value
from stablehlo.ir.attributes import FloatAttr
from stablehlo.ir.types import numpy_dtype


def _epsilon(op) -> float:
    attr = op.attributes.get("epsilon")
    if not isinstance(attr, FloatAttr):
        raise fail(op, f"attribute 'epsilon' must be a float, got {attr}")
    return float(attr.value)


def _setup(op, operand, *features):
    """(feature_index, reduce axes, f64 operand, features broadcast along it)."""
    operand = np.asarray(operand)
    index = int_value(op, "feature_index")
    if not 0 <= index < operand.ndim:
        raise fail(op, f"feature_index {index} is out of range for rank {operand.ndim}")
    size = operand.shape[index]
    shape = [1] * operand.ndim
    shape[index] = size
    out = []
    for i, f in enumerate(features):
        f = np.asarray(f)
        if f.shape != (size,):
            raise fail(op, f"operand #{i + 1} must have shape ({size},), got {f.shape}")
        out.append(f.astype(np.float64).reshape(shape))
    axes = tuple(d for d in range(operand.ndim) if d != index)
    return index, axes, operand.astype(np.float64), out


def _results(op, *values):
    return [to_result(v, numpy_dtype(t.element_type)) for v, t in zip(values, op.result_types)]


def _normalize(x, scale, offset, mean, variance, epsilon):
    return scale * (x - mean) / np.sqrt(variance + epsilon) + offset


@kernel("stablehlo.batch_norm_inference")
def batch_norm_inference(ctx, op, operand, scale, offset, mean, variance):
    _, _, x, (s, o, m, v) = _setup(op, operand, scale, offset, mean, variance)
    with np.errstate(all="ignore"):
        result = _normalize(x, s, o, m, v, _epsilon(op))
    return _results(op, result)[0]


@kernel("stablehlo.batch_norm_training", multi=True)
def batch_norm_training(ctx, op, operand, scale, offset):
    _, axes, x, (s, o) = _setup(op, operand, scale, offset)
    with np.errstate(all="ignore"):
        mean = np.mean(x, axis=axes, keepdims=True)
        variance = np.mean((x - mean) ** 2, axis=axes, keepdims=True)
        output = _normalize(x, s, o, mean, variance, _epsilon(op))
    return _results(op, output, mean.reshape(-1), variance.reshape(-1))


@kernel("stablehlo.batch_norm_grad", multi=True)
def batch_norm_grad(ctx, op, operand, scale, mean, variance, grad_output):
    _, axes, x, (s, m, v) = _setup(op, operand, scale, mean, variance)
    dy = np.asarray(grad_output).astype(np.float64)
    if dy.shape != x.shape:
        raise fail(op, f"grad_output has shape {dy.shape}, expected {x.shape}")
    eps = _epsilon(op)
    count = x.size / x.shape[int_value(op, "feature_index")] if x.size else 0.0
    with np.errstate(all="ignore"):
        centered = x - m
        stddev = np.sqrt(v + eps)
        i1 = dy * count
        i2 = np.sum(dy, axis=axes, keepdims=True)
        i3 = np.sum(dy * centered, axis=axes, keepdims=True)
        i6 = i1 - i2 - i3 * centered / (v + eps)
        grad_operand = s / stddev / count * i6
        grad_scale = np.sum(dy * centered / stddev, axis=axes)
        grad_offset = np.sum(dy, axis=axes)
    return _results(op, grad_operand, grad_scale, grad_offset)
