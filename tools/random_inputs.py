"""Random arguments of the right types, for running a program without inputs.

Integers come from a small range (so sums and products stay readable and do
not overflow), floats from a standard normal, booleans are fair coin flips,
complex numbers have normal real and imaginary parts, and quantized tensors
get storage integers within the storage range.
"""
from __future__ import annotations

import numpy as np

from stablehlo.ir.types import (ComplexType, FloatType, IndexType, IntegerType, QuantizedType,
                                TensorType, TokenType, TupleType, Type, numpy_dtype)

from tools.diagnostics import CliError

SMALL_INT_RANGE = (-5, 5)


def random_arguments(types: list[Type], seed: int) -> list:
    rng = np.random.default_rng(seed)
    return [random_value(t, rng, f"argument {i}") for i, t in enumerate(types)]


def random_value(type: Type, rng: np.random.Generator, what: str):
    if isinstance(type, TensorType):
        if not type.is_static:
            raise CliError(f"{what} has the dynamic type {type}; give its value with --inputs")
        return random_tensor(type, rng)
    if isinstance(type, TupleType):
        return tuple(random_value(t, rng, f"{what}[{i}]") for i, t in enumerate(type.types))
    if isinstance(type, TokenType):
        from stablehlo.interpreter.values import TOKEN
        return TOKEN
    raise CliError(f"{what}: cannot make a random value of type {type}")


def random_tensor(type: TensorType, rng: np.random.Generator) -> np.ndarray:
    try:
        return _random_tensor(type, rng)
    except ValueError as exc:  # numpy's own limits: a dim past its size type, even with
        # another dim 0 (tensor<0x9223372036854775807xf32> is valid StableHLO)
        raise CliError(f"cannot make random values of type {type}: {exc}") from None


def _random_tensor(type: TensorType, rng: np.random.Generator) -> np.ndarray:
    shape = tuple(type.shape)
    elem = type.element_type
    dtype = numpy_dtype(elem)
    if isinstance(elem, QuantizedType):
        return rng.integers(elem.min_value, elem.max_value, size=shape,
                            endpoint=True).astype(dtype)
    if isinstance(elem, IntegerType) and elem.width == 1:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if isinstance(elem, (IntegerType, IndexType)):
        low, high = _int_range(elem)
        return rng.integers(low, high, size=shape, endpoint=True).astype(dtype)
    if isinstance(elem, ComplexType):
        real = rng.standard_normal(shape)
        imag = rng.standard_normal(shape)
        return (real + 1j * imag).astype(dtype)
    if isinstance(elem, FloatType):
        values = rng.standard_normal(shape)
        if str(elem) == "f8E8M0FNU":  # no sign bit and no zero: powers of two only
            values = np.abs(values) + 0.5
        return values.astype(dtype)
    raise CliError(f"cannot make random values of element type {elem}")


def _int_range(elem) -> tuple[int, int]:
    low, high = SMALL_INT_RANGE
    if isinstance(elem, IntegerType):
        if elem.signed:
            low = max(low, -(1 << (elem.width - 1)))
            high = min(high, (1 << (elem.width - 1)) - 1)
        else:
            low, high = 0, min(2 * high - 1, (1 << elem.width) - 1)
    return low, high
