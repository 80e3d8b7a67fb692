"""Runtime values of the reference interpreter.

* A tensor is a numpy array whose dtype is exactly
  ``numpy_dtype(type.element_type)`` (ml_dtypes for bf16/f8/i4/...; quantized
  tensors hold their storage integers) and whose shape is the tensor's shape;
  scalars are 0-d arrays.
* A token is the ``TOKEN`` singleton.
* A tuple is a Python ``tuple`` of values.
"""
from __future__ import annotations

import numpy as np

from stablehlo.errors import InterpreterError
from stablehlo.ir.types import TensorType, TokenType, TupleType, Type, numpy_dtype


class Token:
    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "TOKEN"


TOKEN = Token()


def coerce(value, type: Type, what: str):
    """Check that ``value`` fits ``type`` and return it with the exact dtype.

    ``what`` names the place for the error message (e.g. "result #0 of
    'stablehlo.add' at f.mlir:3:5").
    """
    if isinstance(type, TensorType):
        if not isinstance(value, np.ndarray):
            if isinstance(value, (tuple, Token)):
                raise InterpreterError(f"{what}: expected a tensor {type}, got {value!r}")
            value = np.asarray(value)
        dtype = numpy_dtype(type.element_type)
        if value.dtype != dtype:
            value = value.astype(dtype)
        if type.is_static and value.shape != tuple(type.shape):
            raise InterpreterError(
                f"{what}: expected shape {tuple(type.shape)} for {type}, got {value.shape}")
        return value
    if isinstance(type, TokenType):
        if value is not TOKEN:
            raise InterpreterError(f"{what}: expected a token, got {type_name(value)}")
        return value
    if isinstance(type, TupleType):
        if not isinstance(value, tuple) or len(value) != len(type.types):
            raise InterpreterError(f"{what}: expected {type}, got {type_name(value)}")
        return tuple(coerce(v, t, f"{what}[{i}]") for i, (v, t) in
                     enumerate(zip(value, type.types)))
    return value


def type_name(value) -> str:
    if isinstance(value, np.ndarray):
        return f"array{value.shape} of {value.dtype}"
    if isinstance(value, tuple):
        return "tuple(" + ", ".join(type_name(v) for v in value) + ")"
    return repr(value)
