"""Custom kernels from JAX: registered handlers and declared kernels through ``jax.ffi``.

* ``jax.ffi.register_ffi_target(name, capsule, platform="openhlo")`` puts an XLA FFI handler
  into the custom-kernel registry (pjrt/custom_kernels): the plugin installs
  ``register_ffi_target`` as jaxlib's custom-call handler of the platform (plugin.py), and
  ``jax.ffi.ffi_call(name, ...)`` then runs the handler natively inside the compiled program.
* ``call(name, *args, **attrs)`` calls a kernel declared with ``define_kernel``: result types
  from its shape function, attributes typed by its declaration, its batching rule as
  ``vmap_method``, and, when it declares a VJP kernel, differentiable through
  ``jax.custom_vjp`` (the backward pass is an ``ffi_call`` of the VJP kernel).
"""
from __future__ import annotations

import ctypes

from pjrt.custom_kernels import CUSTOM_KERNELS, register_ffi_handler

_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_get_name = ctypes.pythonapi.PyCapsule_GetName
_get_name.restype = ctypes.c_char_p
_get_name.argtypes = [ctypes.py_object]


def _handler_address(capsule) -> int:
    if isinstance(capsule, dict):  # staged handlers: only the execute stage runs here
        capsule = capsule["execute"]
    return _get_pointer(capsule, _get_name(capsule))


def register_ffi_target(name, fn, platform, api_version, traits) -> None:
    """jaxlib's custom-call handler for our platform (``xla_client``'s signature)."""
    from pjrt.errors import UnimplementedError
    if api_version != 1:
        raise UnimplementedError(f"FFI target {name!r}: only typed FFI handlers (api_version=1) "
                                 "run on openhlo")
    register_ffi_handler(name if isinstance(name, str) else name.decode(), _handler_address(fn))


def _ffi(name: str, args, attrs: dict):
    import jax
    kernel = CUSTOM_KERNELS.get(name)
    outs = [jax.ShapeDtypeStruct(s.shape, s.dtype) for s in kernel.output_specs(args, **attrs)]
    target = jax.ffi.ffi_call(name, outs if len(outs) > 1 else outs[0],
                              vmap_method=kernel.vmap_method)
    return target(*args, **attrs)


def call(name: str, *args, **attrs):
    """Kernel ``name`` on JAX arrays ``args`` (one result, or a tuple)."""
    import jax
    kernel = CUSTOM_KERNELS.get(name)
    typed = kernel.attr_values(attrs)
    if kernel.vjp is None:
        return _ffi(name, args, typed)

    @jax.custom_vjp
    def apply(*operands):
        return _ffi(name, operands, typed)

    def forward(*operands):
        return apply(*operands), operands

    def backward(operands, cotangent):
        cotangents = cotangent if isinstance(cotangent, tuple) else (cotangent,)
        grads = _ffi(kernel.vjp, (*operands, *cotangents), typed)
        return tuple(grads) if isinstance(grads, (list, tuple)) else (grads,)

    apply.defvjp(forward, backward)
    return apply(*args)
