"""``openhlo conformance``: run the StableHLO conformance suites on a backend."""
from __future__ import annotations

import argparse
import os
import sys
import time

from tools.conformance.discover import SKIP, Case, find_files, plan_file
from tools.conformance.execute import ERROR, FAIL, Target
from tools.conformance.pool import run_cases
from tools.conformance.report import Progress, Result, summarize, summary_text, write_json
from tools.diagnostics import CliError
from tools.run import add_opt_level_argument, apply_opt_level

DEFAULT_TIMEOUT = 60.0


def add_parser(subparsers) -> None:
    from pjrt.registry import DEFAULT_BACKEND, available_backends
    p = subparsers.add_parser(
        "conformance", help="run conformance test files on a backend",
        description="Run every .mlir file under the given paths: files whose RUN lines "
                    "interpret them are evaluated case by case (split at '// -----'), other "
                    "files are checked by parse/print round trip, RUN-DISABLED files are "
                    "skipped. Exit status 0 only if nothing failed or errored.")
    p.add_argument("paths", nargs="+", metavar="PATH", help=".mlir files or folders")
    p.add_argument("--backend", default=DEFAULT_BACKEND,
                   help=f"backend to run on (default: {DEFAULT_BACKEND}; known: "
                        f"{', '.join(available_backends())})")
    p.add_argument("--json", metavar="OUT", help="write every result and the summary as JSON")
    p.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1,
                   help="worker processes (default: the number of CPUs; 0 runs in this "
                        "process without timeouts)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
                   help=f"seconds allowed per case (default {DEFAULT_TIMEOUT:g})")
    p.add_argument("--check-result-ownership", action="store_true",
                   help="after each case, overwrite its results and run it again: the second "
                        "run must give the same bits (no result shares storage with the "
                        "executable's constants or the arguments)")
    p.add_argument("--integer-path", action="store_true",
                   help="cpu backend: class every compiled case by its quantized "
                        "contractions (ran an i8 x i8 -> i32 kernel, ran them in float and "
                        "why, has none), from the executable, and count the classes")
    add_opt_level_argument(p)
    p.add_argument("-v", "--verbose", action="store_true",
                   help="print every result as it arrives and no capped list at the end")
    p.set_defaults(handler=conformance_command)


def conformance_command(args: argparse.Namespace) -> int:
    from pjrt.registry import make_client
    if args.timeout <= 0:
        raise CliError("--timeout must be positive")
    if args.jobs < 0:
        raise CliError("--jobs must be 0 (in this process) or more")
    if args.integer_path and args.backend != "cpu":
        raise CliError("--integer-path reads the cpu backend's executables: use --backend cpu")
    apply_opt_level(args)
    # Judge the code the cpu backend ends up running: its generated kernels, not the
    # op-by-op first tier that runs while they compile (see pjrt/plugins/cpu/tiering.py).
    os.environ.setdefault("OPENHLO_CPU_ASYNC_CODEGEN", "0")
    # fail fast on an unknown or broken backend (and learn whether workers may be forked)
    survives_fork = make_client(args.backend).survives_fork
    start = time.monotonic()
    files = _files(args.paths)
    cases = plan_cases(files)
    _preload()
    results: list[Result | None] = [None] * len(cases)
    progress = Progress(len(cases), args.verbose)

    def on_result(index: int, case: Case, status: str, message: str,
                  integer_path: tuple | None) -> None:
        results[index] = Result(case, status, message, integer_path)
        progress.update(results[index])

    run_cases(cases, Target(args.backend, args.check_result_ownership, args.integer_path),
              args.jobs, args.timeout, on_result, fork=survives_fork)
    done = [r for r in results if r is not None]
    summary = summarize(done, len(files), time.monotonic() - start)
    if args.json:
        try:
            write_json(args.json, done, summary, args.backend, args.paths)
        except OSError as exc:
            raise CliError(f"cannot write {args.json}: {exc.strerror or exc}") from None
    sys.stdout.write(summary_text(done, summary, args.backend, args.verbose))
    return 0 if summary[FAIL] == 0 and summary[ERROR] == 0 else 1


def _files(paths: list[str]) -> list[str]:
    try:
        files = find_files(paths)
    except FileNotFoundError as exc:
        raise CliError(f"no such file or folder: {exc}") from None
    if not files:
        raise CliError("no .mlir files under " + ", ".join(paths))
    return files


def plan_cases(files: list[str]) -> list[Case]:
    """Every case of every file; unreadable files become error cases."""
    from xla_core.passes import PASSES
    known_passes = {str(n) for n in PASSES.names()}
    cases: list[Case] = []
    for path in files:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            cases.append(Case(path, None, 0, 1, "unreadable", message=str(exc)))
            continue
        planned = plan_file(path, text, known_passes)
        cases.extend(planned or [Case(path, None, 0, 1, SKIP, message="no test cases")])
    return cases


def _preload() -> None:
    """Import the heavy modules once, so forked workers start warm."""
    for name in ("stablehlo.text", "stablehlo.verify", "stablehlo.interpreter",
                 "pjrt.plugins.interpreter.plugin", "xla_core.passes.inline"):
        try:
            __import__(name)
        except Exception:  # a missing piece shows up as an error in each case instead
            pass

