"""The registry of interpreter kernels, one per op name.

A kernel implements one op's semantics in numpy::

    @kernel("stablehlo.add")
    def add(ctx, op, lhs, rhs):
        return lhs + rhs

It receives the evaluation context, the ``Operation`` (for attributes and
result types) and the operand values (see values.py), and returns the op's
single result, or with ``multi=True`` a list of all results. The evaluator
checks the results against the op's result types (dtype and shape), so a
kernel may return an array of a wider dtype that casts exactly.

Region-carrying ops call ``ctx.run_region(region, args) -> list``; see
``EvalContext`` in evaluator.py for the rest of the context API.

Ops on quantized types never reach float kernels with storage integers: the
evaluator dequantizes operands and requantizes results around them (the
spec's dequantize-compute-quantize semantics), passing a view of ``op`` whose
quantized types are replaced by their expressed types.
"""
from __future__ import annotations

from typing import Callable

from stablehlo.registry import Registry

KERNELS: Registry[Callable] = Registry("interpreter kernel")


def kernel(*names: str, multi: bool = False):
    """Register ``fn`` as the kernel of every op in ``names``."""
    def decorate(fn: Callable) -> Callable:
        wrapped = fn if multi else _single(fn)
        for name in names:
            KERNELS.register(name, wrapped)
        return fn
    return decorate


def _single(fn: Callable) -> Callable:
    def run(ctx, op, *args):
        return [fn(ctx, op, *args)]
    run.__name__ = fn.__name__
    run.__doc__ = fn.__doc__
    return run
