"""Entry functions and host arguments: which function runs, and host values checked
against its signature (count, shape, dtype) with errors that name the argument."""
from __future__ import annotations

import numpy as np

from stablehlo.ir.attributes import IntegerAttr
from stablehlo.ir.core import Func, Module
from stablehlo.ir.types import TensorType, TokenType, TupleType, Type, numpy_dtype

from pjrt.errors import ArgumentError


def count_option(module: Module, given, name: str) -> int:
    """A replica or partition count: ``given`` unless it is the default 1, else the
    module's ``mhlo.<name>``, else 1."""
    if not isinstance(given, int) or isinstance(given, bool) or given < 1:
        raise ArgumentError(f"CompileOptions.{name} must be a positive integer, got {given!r}")
    attr = module.attributes.get(f"mhlo.{name}")
    if given != 1 or attr is None:
        return given
    if not isinstance(attr, IntegerAttr) or attr.value < 1:
        raise ArgumentError(f"module attribute mhlo.{name} must be a positive integer, "
                            f"got {attr}")
    return attr.value


def resolve_entry(module: Module, entry: str | None) -> str:
    """``entry`` if the module has it, else ``main``, else the only function, else the only
    public one (the others are callees); it must have a body (a private declaration
    verifies, but there is nothing to run)."""
    name = _entry_name(module, entry)
    if module.lookup(name).body is None:
        raise ArgumentError(f"function @{name} is a declaration without a body; there is "
                            f"nothing to run")
    return name


def _entry_name(module: Module, entry: str | None) -> str:
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
    public = [f.name for f in module.functions() if f.visibility != "private"]
    if len(public) == 1:  # the others are callees (a composite's decomposition, say)
        return public[0]
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
    if not isinstance(value, np.ndarray) and hasattr(value, "__array__"):
        # Arrays of other libraries (jax, torch) keep their dtype: checked as numpy arrays.
        try:
            value = np.asarray(value)
        except Exception as exc:  # noqa: BLE001 - whatever the library raises
            raise ArgumentError(f"{what}: cannot read {_describe(value)} as an array: "
                                f"{exc}") from None
    if not isinstance(value, np.ndarray):
        if isinstance(value, (tuple, list)) and not _is_nested_number_list(value):
            raise ArgumentError(f"{what}: expected {type}, got {_describe(value)}")
        try:
            value = np.asarray(value, dtype=dtype)
        except (TypeError, ValueError) as exc:
            raise ArgumentError(f"{what}: cannot convert to {type}: {exc}") from None
    elif value.dtype != dtype:
        value = _reinterpret_raw(native_byte_order(value), dtype, type, what)
    if not _shape_fits(type, tuple(value.shape)):
        raise ArgumentError(f"{what}: expected {type} (shape {_shape_text(type.shape)}), "
                            f"got shape {tuple(value.shape)}")
    return value


def _shape_fits(type: TensorType, shape: tuple) -> bool:
    """Whether ``shape`` fits ``type`` (dynamic dimensions take any size)."""
    return len(shape) == len(type.shape) and all(
        d is None or d == s for d, s in zip(type.shape, shape))


def _reinterpret_raw(value: np.ndarray, dtype: np.dtype, type: TensorType, what: str):
    # np.save stores ml_dtypes arrays (bf16, f8, i4: numpy's user-defined dtypes) as raw
    # void bytes; those are accepted when the width matches. Raw bytes for numpy's own
    # types, structured dtypes and any other dtype are a real mismatch.
    if value.dtype == dtype:
        return value
    raw = value.dtype.kind == "V" and value.dtype.fields is None
    if raw and dtype.isbuiltin == 2 and value.dtype.itemsize == dtype.itemsize:
        return value.view(dtype)
    raise ArgumentError(f"{what}: expected {type} (dtype {dtype.name}), "
                        f"got dtype {_dtype_text(value.dtype)}")


def native_byte_order(array: np.ndarray) -> np.ndarray:
    """``array`` in the machine's byte order (a converted copy when it is not): programs
    and buffers hold native-order values."""
    if array.dtype.byteorder in "=|" or array.dtype.fields is not None:
        return array
    native = array.dtype.newbyteorder("=")
    return array if native == array.dtype else array.astype(native)


def check_transfer(array, what: str):
    """A host value about to become a buffer: arrays in native byte order, and no larger
    than ``stablehlo.limits.max_buffer_bytes()`` (a zero-strided view of a huge shape costs
    nothing until it is copied)."""
    from stablehlo.limits import BUFFER_BYTES_ENV, max_buffer_bytes
    if not isinstance(array, np.ndarray):
        return array
    limit = max_buffer_bytes()
    if array.nbytes > limit:
        raise ArgumentError(f"{what}: an array of shape {array.shape} and dtype "
                            f"{_dtype_text(array.dtype)} needs {array.nbytes} bytes, more than "
                            f"the per-buffer limit of {limit} bytes ({BUFFER_BYTES_ENV})")
    return native_byte_order(array)


def _dtype_text(dtype: np.dtype) -> str:
    """``float32``, ``>f4 (big-endian float32)``, ``[('a', '<i2'), ('b', '<i2')]``."""
    if dtype.fields is not None:
        return str(dtype)
    if dtype.byteorder not in "=|" and dtype.newbyteorder("=") != dtype:
        return f"{dtype.str} (non-native byte order {dtype.name})"
    return dtype.name


def _is_nested_number_list(value) -> bool:
    if isinstance(value, (tuple, list)):
        return all(_is_nested_number_list(v) for v in value)
    return isinstance(value, (int, float, complex, bool, np.generic))


def _shape_text(shape) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + \
        ("," if len(shape) == 1 else "") + ")"


def _describe(value) -> str:
    if isinstance(value, np.ndarray):
        return f"array of shape {value.shape} and dtype {_dtype_text(value.dtype)}"
    return type(value).__name__
