"""Typed readers of op attributes for interpreter kernels.

Kernels want plain Python values with the spec's defaults applied; these
helpers read one attribute, check its kind and raise an ``InterpreterError``
naming the op and its location when it is malformed. Absent optional
attributes return the default given by the caller. The reading itself is
``stablehlo.ir.attr_readers`` (shared with the verifier), in its lenient mode.
"""
from __future__ import annotations

import numpy as np

from stablehlo.errors import InterpreterError
from stablehlo.ir.attr_readers import MISSING as _MISSING
from stablehlo.ir.attr_readers import AttrReader
from stablehlo.ir.attributes import StructAttr


def fail(op, message: str) -> InterpreterError:
    """An InterpreterError that names ``op`` and its source location."""
    return InterpreterError(f"{op.where()}: {message}")


_READ = AttrReader(fail, missing="missing attribute", strict=False)


def int_list(op, name: str, default=_MISSING) -> list[int]:
    """An ``array<i64: ...>`` (or dense / list) attribute as a list of ints."""
    return _READ.int_list(op, name, default)


def bool_list(op, name: str, default=_MISSING) -> list[bool]:
    return _READ.bool_list(op, name, default)


def int_value(op, name: str, default=_MISSING) -> int:
    return _READ.int_value(op, name, default)


def bool_value(op, name: str, default=_MISSING) -> bool:
    return _READ.bool_value(op, name, default)


def enum_value(op, name: str, default=_MISSING) -> str:
    return _READ.enum_value(op, name, default)


def struct_attr(op, name: str, kind: str) -> StructAttr:
    """A ``#stablehlo.<kind><...>`` attribute such as gather dimension numbers."""
    return _READ.struct(op, name, kind)


def int_matrix(op, name: str, rows: int, default_zero: bool = True) -> np.ndarray:
    """A ``dense<...> : tensor<Nx2xi64>`` attribute (padding) as an int64 array."""
    array = _READ.int_matrix(op, name, (rows, 2) if default_zero else _MISSING)
    if array.size != rows * 2:
        raise fail(op, f"attribute '{name}' must have shape [{rows}, 2], got {array.shape}")
    return array.reshape(rows, 2)
