"""The runtime contract, named after PJRT: Client, Device, LoadedExecutable.

Frameworks and tools talk only to these classes; a backend (see registry.py)
is a plugin that creates a ``Client``. This is the first slice of the
contract: a client enumerates its devices and compiles a StableHLO module to a
``LoadedExecutable``, whose ``execute`` takes and returns host numpy arrays.
Buffers, memory spaces, events and compile options arrive with the next
runtime issue (see pjrt/README.md).

Invariants every backend inherits from this module:

* ``execute`` checks the arguments against the entry function's signature
  (count, shape, dtype) before the backend sees them, so every backend gives
  the same clear error (argument index, expected and actual type);
* the entry function is ``entry`` when given, else ``@main``, else the only
  function of the module (the StableHLO conformance convention).
"""
from __future__ import annotations

import abc
from dataclasses import dataclass

import numpy as np

from stablehlo.errors import OpenHLOError
from stablehlo.ir.core import Func, Module
from stablehlo.ir.types import TensorType, TokenType, TupleType, Type, numpy_dtype


class PjrtError(OpenHLOError):
    """Base of runtime errors (bad arguments, failed plugins)."""


class ArgumentError(PjrtError):
    """Arguments that do not match the entry function's signature."""


class PluginError(PjrtError):
    """A backend plugin that failed to load or to create its client."""


@dataclass(frozen=True)
class Device:
    """One device of a client. ``id`` is unique within the client's platform."""
    id: int
    kind: str
    process_index: int = 0
    local_hardware_id: int = 0

    def __str__(self) -> str:
        return f"{self.kind}:{self.id}"


class Client(abc.ABC):
    """One backend instance: identity, devices, and the compiler entry point."""

    @property
    @abc.abstractmethod
    def platform_name(self) -> str:
        """Short name of the platform, e.g. ``"interpreter"``."""

    @property
    def platform_version(self) -> str:
        return "0"

    @property
    def process_index(self) -> int:
        return 0

    @abc.abstractmethod
    def devices(self) -> list[Device]:
        """Every device of this client."""

    def addressable_devices(self) -> list[Device]:
        """The devices this process can run on (all of them until multi-process)."""
        return [d for d in self.devices() if d.process_index == self.process_index]

    @abc.abstractmethod
    def compile(self, module: Module, entry: str | None = None) -> "LoadedExecutable":
        """Check and compile ``module``; raise an OpenHLOError naming the place if invalid."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} platform={self.platform_name!r}>"


class LoadedExecutable(abc.ABC):
    """A compiled program bound to a client; ``execute`` runs its entry function."""

    def __init__(self, client: Client, module: Module, entry: str | None = None):
        self.client = client
        self.module = module
        self.entry = resolve_entry(module, entry)
        func = module.lookup(self.entry)
        self.parameter_types: list[Type] = list(func.type.inputs)
        self.result_types: list[Type] = list(func.type.results)

    @property
    def name(self) -> str:
        return self.module.name or self.entry

    def execute(self, args) -> list:
        """Run the entry function on host ``args``; returns host numpy arrays."""
        checked = check_arguments(self.parameter_types, list(args), self.entry)
        return list(self._execute(checked))

    @abc.abstractmethod
    def _execute(self, args: list) -> list:
        """Backend hook: run on arguments already checked against the signature."""


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


def check_arguments(types: list[Type], args: list, entry: str) -> list:
    """``args`` checked against ``types``; host values converted to exact dtypes."""
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
    shape = tuple(value.shape)
    if len(shape) != len(type.shape) or any(
            d is not None and d != s for d, s in zip(type.shape, shape)):
        raise ArgumentError(f"{what}: expected {type} (shape {_shape_text(type.shape)}), "
                            f"got shape {shape}")
    return value


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


def entry_function(module: Module, entry: str | None = None) -> Func:
    """The ``Func`` that ``resolve_entry`` picks."""
    return module.lookup(resolve_entry(module, entry))
