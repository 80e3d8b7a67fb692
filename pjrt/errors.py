"""The runtime's typed errors, with PJRT's (absl) status codes.

Every error a backend raises through the contract is a ``PjrtError`` whose ``code`` says
what kind of failure it is; ``error_code`` maps any exception (ours or a parse/verify error
of the IR) to a code, which the PJRT C API shim reports to frameworks.
"""
from __future__ import annotations

import enum
from typing import ClassVar

from stablehlo.errors import OpenHLOError, ParseError, ResourceLimitError, VerificationError


class ErrorCode(enum.IntEnum):
    """The absl status codes that PJRT errors carry."""
    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class PjrtError(OpenHLOError):
    """Base of runtime errors; ``code`` is what a PJRT C API shim reports."""
    code: ClassVar[ErrorCode] = ErrorCode.UNKNOWN


class ArgumentError(PjrtError):
    """Arguments, options or devices that do not fit (signature, client, ids)."""
    code = ErrorCode.INVALID_ARGUMENT


class FailedPreconditionError(PjrtError):
    """An object used in the wrong state: a deleted executable, an event set twice."""
    code = ErrorCode.FAILED_PRECONDITION


class BufferDeletedError(FailedPreconditionError):
    """Use of a buffer that was deleted or donated to an execution."""


class DeadlineExceededError(PjrtError, TimeoutError):
    """A wait that timed out."""
    code = ErrorCode.DEADLINE_EXCEEDED


class UnimplementedError(PjrtError):
    """Something this backend does not support, e.g. an op its compiler lacks."""
    code = ErrorCode.UNIMPLEMENTED


class PluginError(PjrtError):
    """A backend plugin that failed to load or to create its client."""
    code = ErrorCode.UNAVAILABLE


class UnavailableError(PjrtError):
    """A peer that cannot be reached: the key-value store of a multi-process client."""
    code = ErrorCode.UNAVAILABLE


class ExecutionError(PjrtError):
    """An execution that failed at run time; the message names the op when known."""
    code = ErrorCode.INTERNAL


def error_code(exc: BaseException) -> ErrorCode:
    """The code to report for ``exc`` (parse and verify errors are bad arguments)."""
    if isinstance(exc, PjrtError):
        return exc.code
    if isinstance(exc, ResourceLimitError):
        return ErrorCode.RESOURCE_EXHAUSTED
    if isinstance(exc, (ParseError, VerificationError)):
        return ErrorCode.INVALID_ARGUMENT
    if isinstance(exc, OpenHLOError):  # an interpreter error or failed check while running
        return ErrorCode.INTERNAL
    return ErrorCode.UNKNOWN
