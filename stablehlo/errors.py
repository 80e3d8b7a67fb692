"""Error types of the IR layer; higher layers derive their own from OpenHLOError."""
from __future__ import annotations


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


class InterpreterError(OpenHLOError):
    """A program that cannot be evaluated (unsupported op, bad inputs, failed check)."""


class CheckFailure(InterpreterError):
    """A ``check.*`` op found a wrong value; carries the worst mismatch."""
