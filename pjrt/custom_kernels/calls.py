"""One call of a custom kernel as a program, and running it on the cpu backend.

``call_module`` builds ``main(operands) -> custom_call @name`` for given operand types;
``run_kernel`` compiles it once per (kernel, operand types, attributes) on the cpu backend and
runs it: the eager path of torch's custom op and of ``check_kernel``, natively (the same
call step as inside a larger compiled program).
"""
from __future__ import annotations

import functools

import numpy as np

from stablehlo.builder import Builder
from stablehlo.ir.types import TensorType, element_type_for_dtype

from pjrt.custom_kernels.attributes import ir_attributes
from pjrt.custom_kernels.registry import CUSTOM_KERNELS, TensorSpec

# The typed FFI's API version in StableHLO (API_VERSION_TYPED_FFI).
TYPED_FFI = 4


def tensor_type(spec) -> TensorType:
    return TensorType(tuple(int(d) for d in spec.shape), element_type_for_dtype(spec.dtype))


def call_module(name: str, inputs: list, outputs: list, attrs: dict):
    """A module whose ``main`` calls kernel ``name`` on operands of ``inputs``' specs
    (shape, dtype) with results of ``outputs``' specs and typed attributes ``attrs``."""
    b = Builder()
    with b.function("main", [tensor_type(s) for s in inputs]) as (_, args):
        results = b.custom_call(name, list(args), [tensor_type(s) for s in outputs],
                                api_version=TYPED_FFI,
                                attributes={"mhlo.backend_config": ir_attributes(attrs)})
        b.return_(*(results if isinstance(results, list) else [results]))
    return b.module


@functools.lru_cache(maxsize=256)
def _executable(name: str, inputs: tuple, attr_items: tuple):
    kernel = CUSTOM_KERNELS.get(name)
    attrs = dict(attr_items)
    outputs = kernel.output_specs(inputs, **attrs)
    module = call_module(name, list(inputs), outputs, attrs)
    return _cpu_client().compile(module)


@functools.lru_cache(maxsize=1)
def _cpu_client():
    import pjrt
    return pjrt.make_client("cpu")


def run_kernel(name: str, *arrays, **attrs) -> list:
    """Kernel ``name`` on numpy ``arrays`` with attributes ``attrs`` (checked and typed by
    its declaration), run natively; a list of numpy results."""
    kernel = CUSTOM_KERNELS.get(name)
    typed = kernel.attr_values(attrs)
    arrays = [np.ascontiguousarray(a) for a in arrays]
    inputs = tuple(TensorSpec(a.shape, a.dtype) for a in arrays)
    exe = _executable(name, inputs, tuple(sorted(typed.items())))
    return [np.asarray(r) for r in exe(*arrays)]
