"""Run one conformance case and classify the outcome.

Statuses: ``pass``; ``fail`` (a check failed: a ``check.*`` op, a FileCheck
mismatch, a round trip that changes the text, an expected error that did not
happen); ``error`` (the program could not be handled: unsupported op, parse
error, crash, timeout); ``skip`` (disabled upstream). This module runs inside
worker processes; ``execute_case`` never raises.
"""
from __future__ import annotations

import contextlib
import io
import shutil
import tempfile
import traceback

from stablehlo.errors import CheckFailure, OpenHLOError
from stablehlo.registry import RegistryError

from tools.conformance.discover import INTERPRET, ROUNDTRIP, SKIP, Case, Invocation

PASS, FAIL, ERROR = "pass", "fail", "error"
STATUSES = (PASS, FAIL, ERROR, SKIP)

_CLIENTS: dict = {}  # one client per backend per worker process


class _Failed(Exception):
    """A case outcome that is a failure rather than an error."""


def execute_case(case: Case, backend: str) -> tuple[str, str]:
    """(status, message) of ``case`` on ``backend``."""
    if case.kind == SKIP:
        return SKIP, case.message
    try:
        if case.kind == ROUNDTRIP:
            return _roundtrip(case)
        if case.kind == INTERPRET:
            return _interpret(case, backend)
        return ERROR, case.message or f"unknown case kind {case.kind!r}"
    except (CheckFailure, _Failed) as exc:
        return FAIL, str(exc)
    except (OpenHLOError, RegistryError) as exc:
        return ERROR, str(exc)
    except RecursionError:
        return ERROR, "crashed: Python recursion limit exceeded"
    except Exception as exc:  # a bug in OpenHLO: report it with where it happened
        return ERROR, f"crashed: {type(exc).__name__}: {exc}{_origin(exc)}"


def _origin(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f" [at {last.filename}:{last.lineno} in {last.name}]"


def _roundtrip(case: Case) -> tuple[str, str]:
    """Parse, verify, print, reparse, verify, print: both prints must agree."""
    from stablehlo.text import parse_module, print_module
    from stablehlo.verify import verify_module
    module = parse_module(case.text, case.file)
    verify_module(module)
    first = print_module(module)
    try:
        again = parse_module(first, case.file + " (as printed)")
        verify_module(again)
    except OpenHLOError as exc:
        raise _Failed(f"printed module does not parse back: {exc}") from None
    second = print_module(again)
    if first != second:
        raise _Failed("printing is not stable under reparse: " + _first_difference(first, second))
    return PASS, ""


def _first_difference(a: str, b: str) -> str:
    la, lb = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            return f"line {i + 1}: {x.strip()!r} became {y.strip()!r}"
    return f"{len(la)} lines became {len(lb)} lines"


def _interpret(case: Case, backend: str) -> tuple[str, str]:
    inv = case.invocation
    if not inv.expect_error:
        return _evaluate(case, backend)
    try:
        _evaluate(case, backend)
    except (OpenHLOError, RegistryError, _Failed, ValueError) as exc:
        return PASS, f"failed as expected: {exc}"
    raise _Failed("expected an error (the RUN line starts with 'not'), but the program ran")


def _evaluate(case: Case, backend: str) -> tuple[str, str]:
    from stablehlo.interpreter.evaluator import parse_args
    from stablehlo.text import parse_module
    inv = case.invocation
    module = parse_module(case.text, case.file)
    args = parse_args(inv.args_text) if inv.args_text is not None else []
    if inv.passes:
        _run_passes(module, inv.passes)
    with _client(backend, inv) as client:
        exe = client.compile(module)
        captured = io.StringIO()
        with contextlib.redirect_stdout(captured):
            results = exe(*args)
    if inv.check_prefixes:
        _filecheck(case, inv, captured.getvalue(), results, exe.result_types)
    return PASS, ""


def _run_passes(module, names: tuple) -> None:
    from xla_core.passes import PassContext, Pipeline, make_pass
    Pipeline("RUN line", [make_pass(n) for n in names]).run(module, PassContext())


@contextlib.contextmanager
def _client(backend: str, inv: Invocation):
    from pjrt.registry import make_client
    if not inv.probe:
        if backend not in _CLIENTS:
            _CLIENTS[backend] = make_client(backend)
        yield _CLIENTS[backend]
        return
    probe_dir = tempfile.mkdtemp(prefix="openhlo-probe-")
    try:
        yield make_client(backend, probe_dir=probe_dir)
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)


def _filecheck(case: Case, inv: Invocation, printed: str, results: list, types: list) -> None:
    from stablehlo.interpreter.io import format_value
    from xla_core.testing.filecheck import FileCheckError, check, directives
    if not directives(case.text, inv.check_prefixes):
        return  # upstream checks the whole file; this chunk has nothing to check
    output = printed + "".join(format_value(value, type, inv.print_dense) + "\n"
                               for value, type in zip(results, types))
    try:
        check(output, case.text, inv.check_prefixes)
    except FileCheckError as exc:
        raise _Failed(f"FileCheck: {exc}") from None
