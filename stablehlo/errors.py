"""Error types of the IR layer (higher layers derive their own from OpenHLOError), and
``api_boundary``, which shortens the tracebacks of OpenHLOErrors leaving the public API."""
from __future__ import annotations

import functools
import os
from types import TracebackType
from typing import Callable, Optional


class OpenHLOError(Exception):
    """Base of every error OpenHLO raises on bad input."""


class ParseError(OpenHLOError):
    """Malformed text; the message starts with ``file:line:col:``."""

    def __init__(self, message: str, file: str = "<string>", line: int = 0, col: int = 0):
        self.file, self.line, self.col = file, line, col
        self.reason = message
        super().__init__(f"{file}:{line}:{col}: error: {message}")


class VerificationError(OpenHLOError):
    """An op that violates its constraints; the message names op, operand and place."""


class ResourceLimitError(OpenHLOError):
    """A program asks for more than a limit of ``stablehlo.limits`` allows (a buffer, a
    constant); the runtime reports it as RESOURCE_EXHAUSTED."""


class InterpreterError(OpenHLOError):
    """A program that cannot be evaluated (unsupported op, bad inputs, failed check)."""


class CheckFailure(InterpreterError):
    """A ``check.*`` op found a wrong value; carries the worst mismatch."""


TRACEBACK_ENV = "OPENHLO_TRACEBACK"
"""Set this environment variable to 1 to keep OpenHLO's own frames and chained causes in the
tracebacks of errors raised through the public API (for debugging OpenHLO itself)."""

# Frames in files of these packages are OpenHLO's own. Matched by path, not imported: the
# IR layer imports nothing above it.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_INTERNAL_DIRS = tuple(os.path.join(_PACKAGE_DIR, name) + os.sep
                       for name in ("stablehlo", "xla_core", "pjrt", "frameworks", "tools"))


def api_boundary(fn: Callable) -> Callable:
    """Decorates a public entry point: an OpenHLOError leaves it with OpenHLO's own frames
    and chained causes removed from its traceback, so a user sees the message and their own
    frames (their code that called in, and a plugin of theirs that OpenHLO called), not
    fifteen frames of the parser. ``OPENHLO_TRACEBACK=1`` keeps everything."""
    @functools.wraps(fn)
    def boundary(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except OpenHLOError as exc:
            if debugging_openhlo():
                raise
            raise for_user(exc) from None
    return boundary


def debugging_openhlo() -> bool:
    """Whether ``OPENHLO_TRACEBACK`` asks for OpenHLO's own frames in API errors."""
    return os.environ.get(TRACEBACK_ENV, "0") not in ("", "0")


def for_user(exc: OpenHLOError) -> OpenHLOError:
    """``exc`` with OpenHLO's own frames dropped from its traceback: what ``api_boundary``
    raises, for hot entry points that catch at their end instead of paying for a wrapper
    call (raise it ``from None``, after checking ``debugging_openhlo()``)."""
    return exc.with_traceback(_user_frames(exc.__traceback__))


def _user_frames(tb: Optional[TracebackType]) -> Optional[TracebackType]:
    """The traceback ``tb`` without the frames of OpenHLO's own files."""
    kept = []
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(_INTERNAL_DIRS):
            kept.append(tb)
        tb = tb.tb_next
    trimmed = None
    for entry in reversed(kept):
        trimmed = TracebackType(trimmed, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return trimmed
