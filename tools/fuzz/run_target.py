"""The ``run`` target: compile and execute an input on the cpu and interpreter backends.

``execute_on_backends`` runs inside a worker process (runner.py): it compiles the program on
each backend, runs it on random arguments of the entry's types (tools/random_inputs.py) and
returns, per backend, the results or the OpenHLOError that rejected the program, or the
``Finding`` of anything else that escaped. ``check_run`` (in the fuzzing process) sends an
input to the worker and turns a crash, a hang, an escaped exception or a disagreement between
the backends into a ``Finding``.

A hang while executing a program that loops (``stablehlo.while``) is the program's own doing,
not a bug: it is not reported. A hang anywhere else (parsing, compiling, straight-line code)
is.
"""
from __future__ import annotations

import os

import numpy as np

from stablehlo.errors import OpenHLOError
from stablehlo.limits import BUFFER_BYTES_ENV, COLLECTIVE_TIMEOUT_ENV, CONSTANT_BYTES_ENV

from tools.fuzz.contract import (CRASH, MISMATCH, MISMATCH_INT, TIMEOUT, Finding,
                                 exception_finding)
from tools.fuzz.runner import CRASHED, OK, TIMED_OUT, SubprocessRunner

BACKENDS = ("cpu", "interpreter")
WORKER_FUNCTION = "tools.fuzz.run_target:execute_on_backends"
DEFAULT_RUN_TIME_LIMIT = 10.0

# Random arguments larger than this are not made (the harness's own memory, not a finding).
MAX_ARGUMENT_BYTES = 64 << 20
# Results larger than this are not sent back for comparison.
MAX_RESULT_BYTES = 16 << 20
# Float results agree when |cpu - interpreter| <= FLOAT_TOLERANCE * max(1, |interpreter|),
# element by element (the conformance suites' almost-equal tolerance, made relative for
# large values).
FLOAT_TOLERANCE = 1e-3

# The limits a service compiling untrusted programs would set (stablehlo/limits.py): a
# fuzzed program may ask for anything they allow, and at the defaults (the machine's memory
# per buffer, two minutes per wait) one valid input can take longer than the time limit:
# an iota of 6 GiB is slow, not hung. The user's own settings win.
FUZZ_LIMITS = {BUFFER_BYTES_ENV: str(256 << 20), CONSTANT_BYTES_ENV: str(64 << 20),
               COLLECTIVE_TIMEOUT_ENV: "2"}

_CLIENTS: dict = {}


def make_runner(timeout: float = DEFAULT_RUN_TIME_LIMIT) -> SubprocessRunner:
    return SubprocessRunner(WORKER_FUNCTION, timeout,
                            preload=("tools.fuzz.run_target", "pjrt.plugins.cpu.plugin"))


def execute_on_backends(payload: tuple[str, int], stage) -> dict:
    """{backend: ("results", arrays) | ("rejected", message) | ("finding", Finding)}, or
    {"skipped": reason} when no arguments could be made. Runs in the worker."""
    for name, value in FUZZ_LIMITS.items():
        os.environ.setdefault(name, value)
    text, seed = payload
    outcomes: dict = {}
    arguments = None
    for backend in BACKENDS:
        try:
            stage(f"{backend} compile")
            exe = _client(backend).compile(text)
            if arguments is None:
                arguments = _arguments(exe.parameter_types, seed)
                if isinstance(arguments, str):
                    return {"skipped": arguments}
            stage(f"{backend} execute")
            results = _leaves(exe(*arguments))
            sent = sum(r.nbytes for r in results) <= MAX_RESULT_BYTES
            outcomes[backend] = ("results", results if sent else None)
        except OpenHLOError as exc:
            outcomes[backend] = ("rejected", str(exc)[:300])
        except Exception as exc:  # noqa: BLE001 - what the contract forbids, reported
            outcomes[backend] = ("finding", exception_finding(exc))
    return outcomes


def _leaves(values) -> list:
    """The results as arrays, the tensors inside tuples in order (tokens as 0-d objects)."""
    out = []
    for value in values:
        if isinstance(value, (tuple, list)):
            out.extend(_leaves(value))
        else:
            out.append(np.asarray(value))
    return out


def _client(backend: str):
    from pjrt.registry import make_client
    if backend not in _CLIENTS:
        _CLIENTS[backend] = make_client(backend)
    return _CLIENTS[backend]


def _arguments(types: list, seed: int):
    """Random arguments of ``types``, or a string saying why none are made."""
    from tools.diagnostics import CliError
    from tools.random_inputs import random_arguments
    total = sum(_bytes_of(t) for t in types)
    if total > MAX_ARGUMENT_BYTES:
        return f"arguments of {total} bytes"
    try:
        return random_arguments(types, seed)
    except (CliError, TypeError) as exc:  # TypeError: an element type numpy cannot hold (i3)
        return str(exc)


def _bytes_of(type) -> int:
    """Bytes of a static tensor type, or of the static tensors in a tuple type."""
    from stablehlo.ir.types import TensorType, TupleType, numpy_dtype
    if isinstance(type, TupleType):
        return sum(_bytes_of(t) for t in type.types)
    if isinstance(type, TensorType) and type.is_static:
        try:
            itemsize = np.dtype(numpy_dtype(type.element_type)).itemsize
        except TypeError:
            return 0  # random_arguments says why it cannot make one
        return int(np.prod(type.shape, dtype=object)) * itemsize
    return 0


def check_run(runner: SubprocessRunner, text: str, seed: int = 0) -> Finding | None:
    """The run contract of one (parsed and verified) input: None if it holds."""
    outcome = runner.call((text, seed))
    if outcome.status == CRASHED:
        return Finding(CRASH, outcome.detail, outcome.stage or "worker start",
                       f"the worker died ({outcome.detail}) during {outcome.stage}")
    if outcome.status == TIMED_OUT:
        if outcome.stage.endswith("execute") and "stablehlo.while" in text:
            return None
        return Finding(TIMEOUT, "InputTimeout", outcome.stage or "worker start",
                       f"no answer within {runner.timeout:g} s during {outcome.stage}")
    assert outcome.status == OK
    results = outcome.value
    if "skipped" in results:
        return None
    for backend in BACKENDS:
        tag, value = results[backend]
        if tag == "finding":
            return value
    return compare_backends(results["cpu"], results["interpreter"], text)


def compare_backends(cpu: tuple, interpreter: tuple, text: str) -> Finding | None:
    """A MISMATCH(-INT) finding when both backends ran and their results disagree."""
    if cpu[0] != "results" or interpreter[0] != "results":
        return None
    if cpu[1] is None or interpreter[1] is None:  # too large to send back
        return None
    if "stablehlo.rng " in text:  # implementation-defined random numbers
        return None
    from stablehlo.interpreter.checks import compare_eq
    for index, (got, want) in enumerate(zip(cpu[1], interpreter[1])):
        if got.dtype == object and want.dtype == object:  # tokens: no value to compare
            continue
        if got.shape != want.shape or got.dtype != want.dtype:
            return Finding(MISMATCH_INT, "shape", f"result {index}",
                           f"cpu {got.dtype}{got.shape}, interpreter {want.dtype}{want.shape}")
        if got.dtype.kind in "biu" or (got.dtype.kind == "V" and "int" in got.dtype.name):
            problem = compare_eq(got, want)
            kind = MISMATCH_INT
        else:
            problem = _float_problem(got, want)
            kind = MISMATCH
        if problem:
            return Finding(kind, str(got.dtype), f"result {index}", problem)
    return None


def _float_problem(got: np.ndarray, want: np.ndarray):
    """compare_almost_eq (NaN-aware) on values divided by max(1, |interpreter value|), so
    the tolerance is absolute near zero and relative for large values (the message then
    shows the divided values)."""
    from stablehlo.interpreter.checks import compare_almost_eq
    wide = np.complex128 if want.dtype.kind == "c" else np.float64
    got, want = got.astype(wide), want.astype(wide)
    magnitude = np.abs(want)
    scale = np.where(np.isfinite(magnitude), np.maximum(magnitude, 1.0), 1.0)
    return compare_almost_eq(got / scale, want / scale, FLOAT_TOLERANCE)
