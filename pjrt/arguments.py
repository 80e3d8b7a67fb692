"""Entry functions and host arguments: which function runs, and host values checked
against its signature (count, shape, dtype) with errors that name the argument."""
from __future__ import annotations

import numpy as np

from stablehlo.ir.core import Func, Module
from stablehlo.ir.types import TensorType, TokenType, TupleType, Type, numpy_dtype

from pjrt.errors import ArgumentError


def resolve_entry(module: Module, entry: str | None) -> str:
    """``entry`` if the module has it, else ``main``, else the only function."""
    names = [f.name for f in module.functions()]
    if entry is not None:
        if entry not in names:
            raise ArgumentError(f"no function @{entry} in module; functions: "
                                + (", ".join("@" + n for n in names) or "none"))
        return entry
    if "main" in names:
        return "main"
    if len(names) == 1:
        return names[0]
    if not names:
        raise ArgumentError("module has no functions to run")
    raise ArgumentError("module has no @main and several functions ("
                        + ", ".join("@" + n for n in names) + "); name the entry")


def entry_function(module: Module, entry: str | None = None) -> Func:
    """The ``Func`` that ``resolve_entry`` picks."""
    return module.lookup(resolve_entry(module, entry))


def check_arguments(types: list[Type], args: list, entry: str) -> list:
    """Host ``args`` checked against ``types``, converted to the exact dtypes."""
    if len(args) != len(types):
        raise ArgumentError(f"@{entry} takes {len(types)} argument(s), got {len(args)}")
    return [_check_one(t, a, f"argument {i} of @{entry}") for i, (t, a) in
            enumerate(zip(types, args))]


def _check_one(type: Type, value, what: str):
    if isinstance(type, TensorType):
        return _check_tensor(type, value, what)
    if isinstance(type, TupleType):
        if not isinstance(value, tuple) or len(value) != len(type.types):
            raise ArgumentError(f"{what}: expected {type}, got {_describe(value)}")
        return tuple(_check_one(t, v, f"{what}[{i}]") for i, (t, v) in
                     enumerate(zip(type.types, value)))
    if isinstance(type, TokenType):
        from stablehlo.interpreter.values import TOKEN
        if value is not TOKEN:
            raise ArgumentError(f"{what}: expected a token, got {_describe(value)}")
        return value
    raise ArgumentError(f"{what}: arguments of type {type} are not supported")


def _check_tensor(type: TensorType, value, what: str) -> np.ndarray:
    dtype = numpy_dtype(type.element_type)
    if not isinstance(value, np.ndarray):
        if isinstance(value, (tuple, list)) and not _is_nested_number_list(value):
            raise ArgumentError(f"{what}: expected {type}, got {_describe(value)}")
        try:
            value = np.asarray(value, dtype=dtype)
        except (TypeError, ValueError) as exc:
            raise ArgumentError(f"{what}: cannot convert to {type}: {exc}") from None
    elif value.dtype != dtype:
        value = _reinterpret_raw(value, dtype, type, what)
    if not _shape_fits(type, tuple(value.shape)):
        raise ArgumentError(f"{what}: expected {type} (shape {_shape_text(type.shape)}), "
                            f"got shape {tuple(value.shape)}")
    return value


def _shape_fits(type: TensorType, shape: tuple) -> bool:
    """Whether ``shape`` fits ``type`` (dynamic dimensions take any size)."""
    return len(shape) == len(type.shape) and all(
        d is None or d == s for d, s in zip(type.shape, shape))


def _reinterpret_raw(value: np.ndarray, dtype: np.dtype, type: TensorType, what: str):
    # np.save stores ml_dtypes arrays (bf16, f8, i4) as raw void bytes; those
    # are accepted when the width matches. Any other dtype is a real mismatch.
    if value.dtype.kind == "V" and value.dtype.itemsize == dtype.itemsize:
        return value.view(dtype)
    raise ArgumentError(f"{what}: expected {type} (dtype {dtype.name}), "
                        f"got dtype {value.dtype.name}")


def _is_nested_number_list(value) -> bool:
    if isinstance(value, (tuple, list)):
        return all(_is_nested_number_list(v) for v in value)
    return isinstance(value, (int, float, complex, bool, np.generic))


def _shape_text(shape) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + \
        ("," if len(shape) == 1 else "") + ")"


def _describe(value) -> str:
    if isinstance(value, np.ndarray):
        return f"array of shape {value.shape} and dtype {value.dtype.name}"
    return type(value).__name__
