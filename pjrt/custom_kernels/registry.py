"""The custom-kernel registry: a kernel declared once, run natively by every frontend.

A ``CustomKernel`` is a name, an implementation (an XLA FFI handler: C/C++ source text
compiled by our toolchain, a symbol of a shared library, or a handler address registered
through the PJRT FFI extension), and optionally what frontends and tools need around it:

* ``attrs``: the attributes it takes, name -> element type (``"f32"``, ``"i64"``, ``"str"``),
  passed to the handler in the call frame (sorted by name, as the FFI ABI wants);
* ``shape_fn(*inputs, **attrs) -> [TensorSpec]``: its results' shapes and dtypes from its
  operands' (``TensorSpec``s); frontends use it for ``ffi_call``'s result types and
  ``torch.library``'s fake kernel, ``check_kernel`` compares it with what the kernel writes;
* ``reference(*arrays, **attrs)``: a numpy version, for ``check_kernel``;
* ``vjp``: the name of another registered kernel that takes the primal operands followed
  by the results' cotangents and returns one cotangent per operand (JAX's custom_vjp and
  torch's register_autograd both call it, so gradients run natively too);
* ``num_inputs``/``num_outputs``: its operand count (default: the shape function's
  positional parameters that are not attributes) and result count (default 1);
* ``vmap_method``: JAX's batching rule for ``ffi_call`` (``"sequential"``,
  ``"broadcast_all"``, ``"expand_dims"``), None: not batchable.

On the cpu backend a ``stablehlo.custom_call @name`` whose target is registered runs as a
native call of the handler (pjrt/plugins/cpu/native/ffi_call.h), with no Python on the path.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Optional

import numpy as np

from stablehlo.registry import Registry

from pjrt.custom_kernels.implementation import Handler, Implementation
from pjrt.errors import ArgumentError


class TensorSpec(NamedTuple):
    """A kernel operand's or result's shape and numpy dtype."""
    shape: tuple
    dtype: np.dtype


ATTR_TYPES = ("f32", "f64", "i32", "i64", "i1", "str")


@dataclass(frozen=True)
class CustomKernel:
    name: str
    implementation: Implementation
    attrs: dict = field(default_factory=dict)
    shape_fn: Optional[Callable] = None
    reference: Optional[Callable] = None
    vjp: Optional[str] = None
    vmap_method: Optional[str] = None
    num_inputs: Optional[int] = None
    num_outputs: int = 1

    def output_specs(self, inputs, **attrs) -> list:
        """The results' ``TensorSpec``s for operands ``inputs`` (anything with ``shape`` and
        ``dtype``), from the shape function."""
        if self.shape_fn is None:
            raise ArgumentError(f"custom kernel {self.name!r} has no shape function "
                                       "(its callers give the result types)")
        specs = [TensorSpec(tuple(x.shape), np.dtype(x.dtype)) for x in inputs]
        out = self.shape_fn(*specs, **attrs)
        if isinstance(out, TensorSpec):
            out = [out]
        return [TensorSpec(tuple(s.shape), np.dtype(s.dtype)) for s in out]

    def attr_values(self, given: dict) -> dict:
        """``given`` attributes checked against the declaration and typed (numpy scalars of
        the declared element type, strings as str)."""
        unknown = set(given) - set(self.attrs)
        missing = set(self.attrs) - set(given)
        if unknown or missing:
            raise ArgumentError(
                f"custom kernel {self.name!r} takes attributes {sorted(self.attrs)}; got "
                f"{sorted(given)}")
        typed = {}
        for name, kind in self.attrs.items():
            value = given[name]
            typed[name] = str(value) if kind == "str" else np.dtype(_NUMPY[kind]).type(value)
        return typed

    def cache_key(self) -> str:
        return f"{self.name}:{self.implementation.cache_key()}"


_NUMPY = {"f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64", "i1": "bool"}

CUSTOM_KERNELS: Registry[CustomKernel] = Registry("custom kernel",
                                                  entry_point_group="openhlo.custom_kernels")


def define_kernel(name: str, implementation: Implementation, *, attrs: Optional[dict] = None,
                  shape_fn: Optional[Callable] = None, reference: Optional[Callable] = None,
                  vjp: Optional[str] = None, vmap_method: Optional[str] = None,
                  num_inputs: Optional[int] = None, num_outputs: int = 1,
                  override: bool = False) -> CustomKernel:
    """Declare and register a kernel (see the module docstring); returns it."""
    for attr, kind in (attrs or {}).items():
        if kind not in ATTR_TYPES:
            raise ArgumentError(f"custom kernel {name!r}: attribute {attr!r} has type "
                                       f"{kind!r}; known: {', '.join(ATTR_TYPES)}")
    if num_inputs is None and shape_fn is not None:
        positional = [p for p in inspect.signature(shape_fn).parameters.values()
                      if p.kind == p.POSITIONAL_OR_KEYWORD and p.name not in (attrs or {})]
        num_inputs = len(positional)
    kernel = CustomKernel(name, implementation, dict(attrs or {}), shape_fn, reference, vjp,
                          vmap_method, num_inputs, num_outputs)
    CUSTOM_KERNELS.register(name, kernel, override=override)
    return kernel


def register_ffi_handler(name: str, address: int) -> CustomKernel:
    """Register a bare XLA FFI handler (an ``XLA_FFI_Handler*``), as the PJRT FFI extension
    and ``jax.ffi.register_ffi_target(..., platform="openhlo")`` do: its call sites give the
    result types and attributes. Registering the same handler again is a no-op."""
    existing = CUSTOM_KERNELS.lookup(name)
    if existing is not None and existing.implementation == Handler(address):
        return existing
    return define_kernel(name, Handler(address))
