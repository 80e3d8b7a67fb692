"""Quantize a jitted JAX function through OpenHLO's StableHLO quantizer.

    from frameworks.jax.quantize import quantize_jit
    q = quantize_jit(mlp, params, x, mode="weight-int8")   # or weight-int4, dynamic-int8,
    y = q(x)                                                # static-int8 (calibration=...)
    print(q.report.format_table()); print(q.text)           # !quant.uniform StableHLO

``fn(params, *inputs)`` is lowered by ``jax.jit`` with ``params`` closed over, so the weights
are constants of the program (the quantizer quantizes dot_generals and convolutions with a
constant rhs), then ``xla_core.quantization.quantize`` rewrites it (options as there:
``granularity``, ``group_size``, ``skip``, ``method``, ...; ``calibration`` is a list of
input tuples for ``static-int8``). Calling the result runs the quantized program on an
OpenHLO backend (``backend``, default ``cpu``) after ``quant-lower`` (integer math, no
quantized type left), outside JAX's dispatch: inputs are arrays (numpy or JAX), results
numpy arrays. ``module`` is the quantized program itself, which any StableHLO consumer
takes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import jax
import numpy as np

from pjrt.plugins.compiler_services import QuantizationReport, copy_module, quantize, run_passes
from stablehlo.ir.core import Module
from stablehlo.text import parse_module, print_module


@dataclass
class QuantizedFunction:
    """A quantized program of a JAX function: ``module`` (quantized StableHLO), ``report``
    (each dot/convolution's choice), callable on inputs (see the module docstring)."""
    module: Module
    report: QuantizationReport
    backend: str = "cpu"
    _executable: object = field(default=None, repr=False)

    @property
    def text(self) -> str:
        return print_module(self.module)

    def lowered(self) -> Module:
        """A copy of the program through ``quant-lower``: integer and float math only."""
        return run_passes(copy_module(self.module), "quant-lower")

    def __call__(self, *inputs) -> list:
        if self._executable is None:
            import pjrt
            self._executable = pjrt.make_client(self.backend).compile(self.lowered())
        return [np.asarray(r) for r in self._executable(*[np.asarray(x) for x in inputs])]


def quantize_jit(fn, params, *example_inputs, mode: str, calibration=None,
                 backend: str = "cpu", **options) -> QuantizedFunction:
    """``fn(params, *inputs)`` lowered for ``example_inputs`` (arrays or
    ``jax.ShapeDtypeStruct``s) and quantized with ``mode``; see the module docstring."""
    def closed(*inputs):
        return fn(params, *inputs)
    lowered = jax.jit(closed, keep_unused=True).lower(*example_inputs)
    module = parse_module(lowered.as_text(), f"<jax.jit({getattr(fn, '__name__', 'fn')})>")
    sets = None
    if calibration is not None:
        sets = [[np.asarray(x) for x in jax.tree.leaves(inputs)] for inputs in calibration]
    quantized, report = quantize(module, mode, sets, **options)
    return QuantizedFunction(quantized, report, backend)
