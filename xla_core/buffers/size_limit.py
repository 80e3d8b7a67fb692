"""The per-buffer size limit, checked on a whole program before a backend compiles it.

Every value a program defines is a buffer some backend allocates when it runs (an
argument, a result, a temporary, a constant the compiler materializes): a 300-byte
program may ask for a ``tensor<100000x1000000xf32>`` broadcast of a scalar. The check
here looks at the types only (it allocates nothing) and runs once, in the contract's
compile path (``pjrt.api.Client.compile``), so every backend refuses such a program the
same way and before its compiler materializes anything. The limit is
``stablehlo.limits.max_buffer_bytes()`` (``OPENHLO_MAX_BUFFER_BYTES``).
"""
from __future__ import annotations

from stablehlo.errors import ResourceLimitError, VerificationError
from stablehlo.ir.core import Module, Operation
from stablehlo.ir.types import TensorType, TupleType, Type, element_facts
from stablehlo.limits import BUFFER_BYTES_ENV, constant_over_limit, max_buffer_bytes


class BufferLimitError(ResourceLimitError):
    """A value of the program would need a buffer larger than ``max_buffer_bytes()``."""


def check_buffer_sizes(module: Module) -> None:
    """Raise BufferLimitError naming the first argument, block argument or op result of
    ``module`` whose static type needs more than ``max_buffer_bytes()`` bytes."""
    limit = max_buffer_bytes()
    for func in module.functions():
        if func.body is None:
            continue
        for arg in func.body.arguments:
            _check(arg.type, limit, f"argument #{arg.index} of @{func.name}")
        for op in func.body.walk():
            _check_op(op, limit)
    for op in module.body.operations:  # ops outside functions (the parser takes them)
        if op.name != "func.func":
            for inner in op.walk():
                _check_op(inner, limit)


def _check_op(op: Operation, limit: int) -> None:
    for result in op.results:
        _check(result.type, limit, f"{op.where()}: result #{result.index}")
    if op.name == "stablehlo.constant":
        # A backend materializes its constants when it compiles (a splat is one element
        # only in the IR), so they have their own, smaller limit.
        type = op.results[0].type
        if isinstance(type, TensorType) and type.is_static:
            nbytes = type.num_elements * _element_bytes(type, op.where())
            too_big = constant_over_limit(f"constant {type}", nbytes)
            if too_big:
                raise BufferLimitError(f"{op.where()}: {too_big}")
    for region in op.regions:
        for block in region.blocks:
            for arg in block.arguments:
                _check(arg.type, limit, f"{op.where()}: region argument #{arg.index}")


def _check(type: Type, limit: int, what: str) -> None:
    if isinstance(type, TupleType):
        for i, inner in enumerate(type.types):
            _check(inner, limit, f"{what}[{i}]")
        return
    if not isinstance(type, TensorType) or not type.is_static:
        return  # tokens need no buffer; a dynamic size is known (and checked) at run time
    size = type.num_elements * _element_bytes(type, what)
    if size > limit:
        raise BufferLimitError(
            f"{what} has type {type}: {size} bytes ({size / 2**30:.1f} GiB), more than "
            f"the per-buffer limit of {limit} bytes; set {BUFFER_BYTES_ENV} to raise it")


def _element_bytes(type: TensorType, what: str) -> int:
    try:
        return element_facts(type.element_type).host_bytes
    except TypeError:  # a foreign dialect's element type: it parses, but nothing runs it
        raise VerificationError(f"{what} has type {type}: its element type is not one "
                                f"StableHLO has, and no backend can hold it") from None
