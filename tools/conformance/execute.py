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
from dataclasses import dataclass

from stablehlo.errors import CheckFailure, OpenHLOError
from stablehlo.registry import RegistryError

from tools.conformance.discover import INTERPRET, ROUNDTRIP, SKIP, Case, Invocation

PASS, FAIL, ERROR = "pass", "fail", "error"
STATUSES = (PASS, FAIL, ERROR, SKIP)

_CLIENTS: dict = {}  # one client per backend per worker process


@dataclass(frozen=True)
class Target:
    """What to run the cases on: a backend, and whether to check that results are the
    caller's own (each result is overwritten and the program run again: the second run
    must give the first run's bits, so no result shared storage with anything the
    executable keeps, such as a folded constant or an argument), and whether to class each
    compiled case by the contractions it runs (integer_path.py; the cpu backend)."""
    backend: str
    check_result_ownership: bool = False
    integer_path: bool = False


class _Failed(Exception):
    """A case outcome that is a failure rather than an error."""


def execute_case(case: Case, target: Target) -> tuple[str, str, tuple | None]:
    """(status, message, integer path) of ``case`` on ``target``; the integer path is the
    (class, reason) of ``integer_path.classify`` for a case that compiled when the target
    asks for it, else None."""
    path: list = []
    status, message = _execute(case, target, path)
    return status, message, (path[0] if path else None)


def _execute(case: Case, target: Target, path: list) -> tuple[str, str]:
    if case.kind == SKIP:
        return SKIP, case.message
    try:
        if case.kind == ROUNDTRIP:
            return _roundtrip(case)
        if case.kind == INTERPRET:
            return _interpret(case, target, path)
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


def _interpret(case: Case, target: Target, path: list) -> tuple[str, str]:
    inv = case.invocation
    if not inv.expect_error:
        return _evaluate(case, target, path)
    try:
        _evaluate(case, target, path)
    except (OpenHLOError, RegistryError, _Failed, ValueError) as exc:
        return PASS, f"failed as expected: {exc}"
    raise _Failed("expected an error (the RUN line starts with 'not'), but the program ran")


def _evaluate(case: Case, target: Target, path: list) -> tuple[str, str]:
    """Compile and run the case; with ``target.integer_path`` its class goes into ``path``
    once it compiled."""
    from stablehlo.interpreter.evaluator import parse_args
    from stablehlo.text import parse_module
    inv = case.invocation
    module = parse_module(case.text, case.file)
    args = parse_args(inv.args_text) if inv.args_text is not None else []
    if inv.passes:
        _run_passes(module, inv.passes)
    with _client(target.backend, inv) as client:
        exe = client.compile(module)
        if target.integer_path:
            from tools.conformance.integer_path import classify
            path.append(classify(module, exe))
        captured = io.StringIO()
        with contextlib.redirect_stdout(captured):
            results = exe(*args)
            if target.check_result_ownership:
                results = _check_results_are_owned(exe, args, results)
    if inv.check_prefixes:
        _filecheck(case, inv, captured.getvalue(), results, exe.result_types)
    return PASS, ""


def _check_results_are_owned(exe, args: list, results: list) -> list:
    """Overwrite every writable result, run again: the new results must be the old bits.
    Returns the new results (the old ones now hold the overwriting pattern)."""
    import numpy as np
    kept = [np.array(r, copy=True) if isinstance(r, np.ndarray) else None for r in results]
    for r in results:
        if isinstance(r, np.ndarray) and r.flags.writeable and r.size:
            pattern = np.frombuffer(b"\xa5" * r.nbytes, dtype=r.dtype).reshape(r.shape)
            np.copyto(r, pattern, casting="no")
    again = exe(*args)
    for i, (old, new) in enumerate(zip(kept, again)):
        if old is None:
            continue
        new = np.asarray(new)
        if old.shape != new.shape or old.tobytes() != new.tobytes():
            raise _Failed(f"result #{i} changed after the previous call's result #{i} was "
                          f"written into: it shares storage with the executable or an argument")
    return again


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
