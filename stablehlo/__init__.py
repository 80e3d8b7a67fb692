"""StableHLO IR for OpenHLO: types, attributes, ops, text, verifier, builder, interpreter.

Public API::

    import stablehlo
    m = stablehlo.parse(text)            # parse + verify; ParseError / VerificationError
    print(m)                             # MLIR's canonical pretty form
    stablehlo.print_module(m, generic=True)
    outs = stablehlo.evaluate(m, [x, y]) # reference interpreter (numpy)
"""
from __future__ import annotations

from stablehlo.errors import (CheckFailure, InterpreterError, OpenHLOError, ParseError,
                              VerificationError, api_boundary)
from stablehlo.ir.core import Block, Func, Location, Module, Operation, Region, Value
from stablehlo.ir.ops import OPS
# Loaded before ``def verify`` below: importing a submodule for the first time binds it as an
# attribute of this package, which would replace the public ``verify`` function with the
# ``stablehlo.verify`` module on the first ``parse()``.
from stablehlo.verify import verify_module as _verify_module

__all__ = [
    "parse", "print_module", "verify", "evaluate", "Module", "Func", "Operation", "Block",
    "Region", "Value", "Location", "OPS", "OpenHLOError", "ParseError", "VerificationError",
    "InterpreterError", "CheckFailure",
]


@api_boundary
def parse(text: str, filename: str = "<string>", *, verify: bool = True) -> Module:
    """Parse MLIR text into a Module, and verify it unless ``verify=False``."""
    from stablehlo.text import parse_module
    module = parse_module(text, filename)
    if verify:
        _verify_module(module)
    return module


@api_boundary
def print_module(module: Module, generic: bool = False) -> str:
    """MLIR text of ``module``: pretty form, or generic form with ``generic=True``."""
    from stablehlo.text import print_module as _print
    return _print(module, generic=generic)


@api_boundary
def verify(module: Module) -> None:
    """Raise VerificationError naming the op and place of the first violation."""
    _verify_module(module)


@api_boundary
def evaluate(module: Module, args=(), entry: str = "main"):
    """Run ``entry`` on numpy ``args`` with the reference interpreter."""
    from stablehlo.interpreter import evaluate as _evaluate
    return _evaluate(module, args, entry=entry)
