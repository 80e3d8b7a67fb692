"""The reference interpreter: StableHLO semantics in numpy.

``evaluate(module, args)`` runs a module's entry function and returns its
results (see evaluator.py). Importing this package registers every kernel
family in ``KERNELS``.
"""
from stablehlo.interpreter.kernels import KERNELS, kernel
from stablehlo.interpreter.values import TOKEN
from stablehlo.interpreter.evaluator import EvalContext, evaluate

# Importing a family registers its kernels (@kernel decorators).
from stablehlo.interpreter import (  # noqa: F401,E402
    elementwise, chlo, data_movement, indexing, sort, reductions, windows, linalg,
    convolution, batch_norm, factorization, fft, random, control_flow, checks, collectives, io,
    quantization, async_collectives,
)

__all__ = ["evaluate", "EvalContext", "KERNELS", "kernel", "TOKEN"]
