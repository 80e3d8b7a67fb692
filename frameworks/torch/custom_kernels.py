"""Custom kernels from PyTorch: a declared kernel (pjrt/custom_kernels) as a ``torch.library``
custom op ``torch.ops.openhlo.<name>``.

``torch_op(name)`` defines it once: the schema from the declaration (its operands as
Tensors, its attributes as keyword-only float/int/bool/str), the CPU implementation (the
kernel run natively on the cpu backend, pjrt/custom_kernels/calls.py), a fake kernel from
the shape function, and autograd from the declared VJP kernel (itself a custom op). The
openhlo torch.compile backend lowers the op to ``stablehlo.custom_call @name`` (a rule in the
ATen lowering registry), so compiled graphs call the kernel natively with no graph break and
no eager fallback.
"""
from __future__ import annotations

import numpy as np
import torch

from pjrt.custom_kernels import CUSTOM_KERNELS, TensorSpec
from pjrt.custom_kernels.attributes import ir_attributes
from pjrt.custom_kernels.calls import TYPED_FFI, run_kernel, tensor_type
from stablehlo.ir.types import numpy_dtype

from frameworks.torch.lowering.dtypes import element_type, torch_dtype
from frameworks.torch.lowering.registry import LOWERINGS

NAMESPACE = "openhlo"
_SCHEMA_TYPES = {"f32": "float", "f64": "float", "i32": "int", "i64": "int", "i1": "bool",
                 "str": "str"}
_LIBRARY = torch.library.Library(NAMESPACE, "FRAGMENT")  # noqa: TOR901 - ops defined below


def _numpy_dtype(dtype: torch.dtype) -> np.dtype:
    return numpy_dtype(element_type(dtype))


def _schema(kernel) -> str:
    inputs = ", ".join(f"Tensor x{i}" for i in range(kernel.num_inputs))
    attrs = "".join(f", {_SCHEMA_TYPES[kind]} {name}" for name, kind in kernel.attrs.items())
    if kernel.attrs:
        attrs = ", *" + attrs
    results = "Tensor" if kernel.num_outputs == 1 else \
        "(" + ", ".join(["Tensor"] * kernel.num_outputs) + ")"
    return f"({inputs}{attrs}) -> {results}"


def _specs(kernel, tensors, attrs) -> list:
    return kernel.output_specs([TensorSpec(tuple(t.shape), _numpy_dtype(t.dtype))
                                for t in tensors], **attrs)


def torch_op(name: str):
    """``torch.ops.openhlo.<name>`` for declared kernel ``name`` (defined on first use)."""
    if hasattr(torch.ops.openhlo, name):
        return getattr(torch.ops.openhlo, name)
    kernel = CUSTOM_KERNELS.get(name)
    qualname = f"{NAMESPACE}::{name}"
    _LIBRARY.define(name + _schema(kernel))

    def cpu(*tensors, **attrs):
        outs = run_kernel(name, *[t.detach().contiguous().numpy() for t in tensors], **attrs)
        results = [torch.from_numpy(o) for o in outs]
        return results[0] if kernel.num_outputs == 1 else tuple(results)

    def fake(*tensors, **attrs):
        results = [tensors[0].new_empty(s.shape, dtype=torch_dtype(tensor_type(s)))
                   for s in _specs(kernel, tensors, attrs)]
        return results[0] if kernel.num_outputs == 1 else tuple(results)

    torch.library.impl(qualname, "CPU", cpu, lib=_LIBRARY)
    torch.library.register_fake(qualname, fake, lib=_LIBRARY)
    op = getattr(torch.ops.openhlo, name)
    if kernel.vjp is not None:
        _register_autograd(qualname, kernel)
    LOWERINGS.register(op.default, _lowering(kernel))
    return op


def _register_autograd(qualname: str, kernel) -> None:
    vjp = torch_op(kernel.vjp)

    def setup_context(ctx, inputs, keyword_only_inputs, output):
        ctx.save_for_backward(*inputs)
        ctx.attrs = keyword_only_inputs

    def backward(ctx, *cotangents):
        grads = vjp(*ctx.saved_tensors, *cotangents, **ctx.attrs)
        return grads if isinstance(grads, tuple) else (grads,)

    torch.library.register_autograd(qualname, backward, setup_context=setup_context,
                                    lib=_LIBRARY)


def _lowering(kernel):
    def lower(ctx, *operands, **attrs):
        typed = kernel.attr_values(attrs)
        specs = kernel.output_specs([TensorSpec(v.type.shape, numpy_dtype(v.type.element_type))
                                     for v in operands], **typed)
        results = ctx.b.custom_call(kernel.name, list(operands), [tensor_type(s) for s in specs],
                                    api_version=TYPED_FFI,
                                    attributes={"mhlo.backend_config": ir_attributes(typed)})
        return tuple(results) if isinstance(results, list) else results
    return lower

