"""``openhlo.async_start`` / ``openhlo.async_done`` on the reference interpreter.

The start only records its operands (a ``StartedCollective``, the value of its future);
the done runs the wrapped collective on them. Running it at the done lets whatever the
program does between the two happen first, as on a backend that overlaps them: a peer may
need this device's work between start and done before it can join the collective.
Results are those of the synchronous collective either way.
"""
from __future__ import annotations

from dataclasses import dataclass

from stablehlo.errors import InterpreterError
from stablehlo.interpreter.kernels import kernel
from stablehlo.ir.core import Operation


@dataclass(frozen=True)
class StartedCollective:
    start: Operation
    operands: tuple


@kernel("openhlo.async_start", multi=True)
def async_start(ctx, op, *operands):
    return [StartedCollective(op, operands)]


@kernel("openhlo.async_done", multi=True)
def async_done(ctx, op, started):
    if not isinstance(started, StartedCollective):
        raise InterpreterError(f"expected the future of an openhlo.async_start, got "
                               f"{type(started).__name__}")
    return ctx.run_region(started.start.regions[0], list(started.operands))
