"""The error contract a fuzzed input is held to, and the findings that break it.

Bad input may only ever raise an ``OpenHLOError`` subclass, promptly, without crashing the
process (ARCHITECTURE.md, Errors). ``check_text`` holds one input to that contract in this
process: parse (with verification), print, reparse, print again; the two prints must agree and
the generic printer must not break either. Anything else that escapes, and an input that runs
longer than its time limit, is a ``Finding``.

A finding's ``signature`` (class, exception type, where it was raised) is what deduplication
and the minimizer compare: two inputs that fail with the same signature are the same bug.
"""
from __future__ import annotations

import contextlib
import signal
import traceback
from dataclasses import asdict, dataclass

import stablehlo
from stablehlo.errors import OpenHLOError

# Finding classes. Every class fails a fuzzing run except MISMATCH (float results of the two
# backends that differ beyond the tolerance: worth a look, often an accepted precision gap).
EXCEPTION = "exception"        # something other than an OpenHLOError escaped
TIMEOUT = "timeout"            # one input ran past its time limit
CRASH = "crash"                # the process died (a signal, an abort, out of memory)
ROUNDTRIP = "roundtrip"        # the printed text does not parse back, or prints differently
MISMATCH_INT = "mismatch-int"  # cpu and interpreter disagree on integer or boolean results
MISMATCH = "mismatch"          # cpu and interpreter disagree on floats beyond the tolerance
CLASSES = (CRASH, EXCEPTION, TIMEOUT, ROUNDTRIP, MISMATCH_INT, MISMATCH)
FAILING_CLASSES = frozenset(CLASSES) - {MISMATCH}

DEFAULT_TIME_LIMIT = 5.0


@dataclass(frozen=True)
class Finding:
    """One broken contract: ``kind`` (a class above), ``error`` (the exception type, signal or
    stage), ``where`` (file:line in function, or the stage), and a one-line ``message``."""
    kind: str
    error: str
    where: str
    message: str

    @property
    def signature(self) -> tuple[str, str, str]:
        return (self.kind, self.error, self.where)

    def describe(self) -> str:
        return f"{self.kind}: {self.error} at {self.where}: {self.message}"

    def to_json(self) -> dict:
        return asdict(self)


class InputTimeout(BaseException):
    """Raised by the per-input alarm. A BaseException, so that the code under test cannot
    swallow it in an ``except Exception``."""


@contextlib.contextmanager
def time_limit(seconds: float):
    """Raise InputTimeout in this (main) thread when the block runs longer than ``seconds``.

    The alarm fires between Python bytecodes, so a loop inside one native call is only caught
    when it returns; the subprocess runner catches those."""
    def on_alarm(signum, frame):
        raise InputTimeout()
    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def exception_finding(exc: BaseException, kind: str = EXCEPTION) -> Finding:
    """The finding for an exception that broke the contract, located at its innermost frame."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = "?"
    if frames:
        last = frames[-1]
        where = f"{_short_path(last.filename)}:{last.lineno} in {last.name}"
    message = " ".join(str(exc).split())[:300]
    return Finding(kind, type(exc).__name__, where, message)


def _short_path(filename: str) -> str:
    """A path relative to the repository when inside it (stable across checkouts)."""
    for package in ("/stablehlo/", "/xla_core/", "/pjrt/", "/frameworks/", "/tools/"):
        index = filename.rfind(package)
        if index >= 0:
            return filename[index + 1:]
    return filename


def check_text(text: str, time_limit_s: float = DEFAULT_TIME_LIMIT) -> Finding | None:
    """The text contract of one input, in this process: None if it holds."""
    return text_contract(text, time_limit_s)[0]


def text_contract(text: str,
                  time_limit_s: float = DEFAULT_TIME_LIMIT) -> tuple[Finding | None, bool]:
    """(the finding or None, whether the input parsed and verified)."""
    try:
        with time_limit(time_limit_s):
            return _round_trip(text), True
    except InputTimeout:
        return Finding(TIMEOUT, "InputTimeout", "text",
                       f"parse/print took over {time_limit_s:g} s"), False
    except OpenHLOError:
        return None, False
    except Exception as exc:  # noqa: BLE001 - what the contract forbids, reported
        return exception_finding(exc), False


def text_contract_in_worker(payload: tuple[str, float], stage) -> tuple[Finding | None, bool]:
    """``text_contract`` as a runner.py worker function (a crash costs the worker only)."""
    text, time_limit_s = payload
    stage("text")
    return text_contract(text, time_limit_s)


def _round_trip(text: str) -> Finding | None:
    module = stablehlo.parse(text)
    first = stablehlo.print_module(module)
    stablehlo.print_module(module, generic=True)
    try:
        again = stablehlo.parse(first, "<printed>")
    except OpenHLOError as exc:
        return Finding(ROUNDTRIP, type(exc).__name__, "reparse", _first_line(str(exc)))
    second = stablehlo.print_module(again)
    if first != second:
        return Finding(ROUNDTRIP, "unstable", "print", _first_difference(first, second))
    return None


def _first_line(message: str) -> str:
    return message.splitlines()[0][:300] if message else ""


def _first_difference(a: str, b: str) -> str:
    for i, (x, y) in enumerate(zip(a.splitlines(), b.splitlines())):
        if x != y:
            return f"line {i + 1}: {x.strip()[:120]!r} printed again as {y.strip()[:120]!r}"
    return f"{a.count(chr(10))} lines printed again as {b.count(chr(10))} lines"
