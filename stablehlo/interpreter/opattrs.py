"""Typed readers of op attributes for interpreter kernels.

Kernels want plain Python values with the spec's defaults applied; these
helpers read one attribute, check its kind and raise an ``InterpreterError``
naming the op and its location when it is malformed. Absent optional
attributes return the default given by the caller.
"""
from __future__ import annotations

import numpy as np

from stablehlo.errors import InterpreterError
from stablehlo.ir.attributes import (ArrayAttr, BoolAttr, DenseArrayAttr, DenseElementsAttr,
                                     EnumAttr, IntegerAttr, UnitAttr)

_MISSING = object()


def fail(op, message: str) -> InterpreterError:
    """An InterpreterError that names ``op`` and its source location."""
    return InterpreterError(f"{op.where()}: {message}")


def int_list(op, name: str, default=_MISSING) -> list[int]:
    """An ``array<i64: ...>`` (or 1-d dense / list) attribute as a list of ints."""
    attr = op.attributes.get(name)
    if attr is None:
        if default is _MISSING:
            raise fail(op, f"missing attribute '{name}'")
        return list(default)
    if isinstance(attr, DenseArrayAttr):
        return [int(v) for v in attr.values]
    if isinstance(attr, DenseElementsAttr):
        return [int(v) for v in np.asarray(attr.array).reshape(-1)]
    if isinstance(attr, ArrayAttr):
        return [int(_scalar(op, name, v)) for v in attr.values]
    if isinstance(attr, (tuple, list)):
        return [int(v) for v in attr]
    raise fail(op, f"attribute '{name}' must be an integer array, got {attr}")


def bool_list(op, name: str, default=_MISSING) -> list[bool]:
    attr = op.attributes.get(name)
    if attr is None:
        if default is _MISSING:
            raise fail(op, f"missing attribute '{name}'")
        return list(default)
    if isinstance(attr, DenseArrayAttr):
        return [bool(v) for v in attr.values]
    if isinstance(attr, DenseElementsAttr):
        return [bool(v) for v in np.asarray(attr.array).reshape(-1)]
    raise fail(op, f"attribute '{name}' must be a boolean array, got {attr}")


def int_value(op, name: str, default=_MISSING) -> int:
    attr = op.attributes.get(name)
    if attr is None:
        if default is _MISSING:
            raise fail(op, f"missing attribute '{name}'")
        return default
    return int(_scalar(op, name, attr))


def bool_value(op, name: str, default=_MISSING) -> bool:
    attr = op.attributes.get(name)
    if attr is None:
        if default is _MISSING:
            raise fail(op, f"missing attribute '{name}'")
        return default
    if isinstance(attr, UnitAttr):
        return True
    return bool(_scalar(op, name, attr))


def enum_value(op, name: str, default=_MISSING) -> str:
    attr = op.attributes.get(name)
    if attr is None:
        if default is _MISSING:
            raise fail(op, f"missing attribute '{name}'")
        return default
    if isinstance(attr, EnumAttr):
        return attr.value
    raise fail(op, f"attribute '{name}' must be an enum, got {attr}")


def int_matrix(op, name: str, rows: int, default_zero: bool = True) -> np.ndarray:
    """A ``dense<...> : tensor<Nx2xi64>`` attribute (padding) as an int64 array."""
    attr = op.attributes.get(name)
    if attr is None:
        if not default_zero:
            raise fail(op, f"missing attribute '{name}'")
        return np.zeros((rows, 2), dtype=np.int64)
    if isinstance(attr, DenseElementsAttr):
        array = np.asarray(attr.array, dtype=np.int64)
    elif isinstance(attr, DenseArrayAttr):
        array = np.asarray(attr.values, dtype=np.int64)
    else:
        raise fail(op, f"attribute '{name}' must be a dense integer tensor, got {attr}")
    if array.size != rows * 2:
        raise fail(op, f"attribute '{name}' must have shape [{rows}, 2], got {array.shape}")
    return array.reshape(rows, 2)


def _scalar(op, name: str, attr):
    if isinstance(attr, (IntegerAttr, BoolAttr)):
        return attr.value
    if isinstance(attr, (int, bool, np.integer, np.bool_)):
        return attr
    raise fail(op, f"attribute '{name}' must be an integer or boolean, got {attr}")
