"""Small float programs for the quantizer's tests, built with the Builder from numpy weights."""
from __future__ import annotations

import numpy as np

from stablehlo.builder import Builder
from stablehlo.ir.types import F32, UI8, IntegerType, TensorType, tensor


def _dense(b: Builder, x, weight: np.ndarray, bias: np.ndarray, relu: bool):
    y = b.dot_general(x, b.constant(weight), contracting=((1,), (0,)))
    y = b.add(y, b.broadcast_in_dim(b.constant(bias), y.type.shape, dims=[1]))
    if relu:
        y = b.maximum(y, b.broadcast_in_dim(b.constant(np.float32(0)), y.type.shape, dims=[]))
    return y


def mlp(weights: list, batch: int):
    """``x -> relu(x W0 + b0) -> ... -> x Wn + bn``; ``weights``: [(W, b), ...]."""
    b = Builder()
    with b.function("main", [tensor((batch, weights[0][0].shape[0]), F32)]) as (_, (x,)):
        for i, (weight, bias) in enumerate(weights):
            x = _dense(b, x, weight, bias, relu=i < len(weights) - 1)
        b.return_(x)
    return b.module


def cnn(conv_weights: list, dense: tuple, batch: int, image: tuple):
    """NHWC convolutions ('SAME' 3x3, bias, relu), a flatten and one dense layer."""
    b = Builder()
    height, width, channels = image
    with b.function("main", [tensor((batch, height, width, channels), F32)]) as (_, (x,)):
        for kernel, bias in conv_weights:
            x = b.convolution(x, b.constant(kernel),
                              dimension_numbers="[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]",
                              window_strides=[1, 1], padding=[[1, 1], [1, 1]])
            x = b.add(x, b.broadcast_in_dim(b.constant(bias), x.type.shape, dims=[3]))
            x = b.maximum(x, b.broadcast_in_dim(b.constant(np.float32(0)), x.type.shape,
                                                dims=[]))
        x = b.reshape(x, (batch, int(np.prod(x.type.shape[1:]))))
        b.return_(_dense(b, x, dense[0], dense[1], relu=False))
    return b.module


def random_mlp(seed: int, sizes=(16, 32, 8), batch: int = 4):
    rng = np.random.default_rng(seed)
    weights = [((rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32),
                (0.1 * rng.standard_normal(n)).astype(np.float32))
               for m, n in zip(sizes[:-1], sizes[1:])]
    return mlp(weights, batch), weights


def random_cnn(seed: int, batch: int = 2, image=(6, 6, 3), features=(4, 5), classes=3):
    rng = np.random.default_rng(seed)
    convs, channels = [], image[2]
    for f in features:
        convs.append(((rng.standard_normal((3, 3, channels, f)) / np.sqrt(9 * channels))
                      .astype(np.float32), (0.1 * rng.standard_normal(f)).astype(np.float32)))
        channels = f
    flat = image[0] * image[1] * channels
    dense = ((rng.standard_normal((flat, classes)) / np.sqrt(flat)).astype(np.float32),
             (0.1 * rng.standard_normal(classes)).astype(np.float32))
    return cnn(convs, dense, batch, image)


def torch_int4_program(outputs: int, depth: int, group: int, batch: int):
    """frameworks/torch's weight-int4 linear: packed ui8 weight and [N, K/G] scales as
    arguments."""
    b = Builder()
    rows = outputs * depth // group
    with b.function("main", [tensor((batch, depth), F32), TensorType((outputs, depth // 2), UI8),
                             tensor((outputs, depth // group), F32)]) as (_, (x, w, s)):
        nibbles = b.bitcast_convert(w, TensorType((outputs, depth // 2, 2), IntegerType(4)))
        grouped = b.reshape(nibbles, (rows, group))
        values = b.multiply(b.convert(grouped, F32),
                            b.broadcast_in_dim(b.reshape(s, (rows,)), (rows, group), [0]))
        weight = b.reshape(values, (outputs, depth))
        b.return_(b.dot_general(x, weight, contracting=((1,), (1,))))
    return b.module
