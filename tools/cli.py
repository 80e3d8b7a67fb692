"""The ``openhlo`` command: one entry point, one subcommand per tool.

    openhlo run FILE.mlir [--backend NAME] [--inputs ARGS.npz] [--output OUT.npz]
    openhlo opt FILE.mlir [--passes=a,b] [--pipeline=NAME] [--generic] [-o OUT]
    openhlo compile FILE.mlir --backend cuda [--target sm_90a] -o DIR
    openhlo sharding FILE.mlir --num-devices N [--png DIR] [--ranges]
    openhlo conformance PATH... [--backend NAME] [--json OUT] [--jobs N] [--timeout S]
    openhlo backend-check NAME [--option KEY=VALUE] [--conformance DIR] [--no-conformance]
    openhlo bench-text [PATH...]
    openhlo bench-runtime [--backend NAME] [--json OUT]
    openhlo bench [--workloads A,B] [--runners A,B] [--json OUT] [--png OUT] [--quick]
    openhlo jax-suite [--jax-src DIR] [--files A.py,B.py] [--platform P] [--json OUT] ...
    openhlo fuzz [--target text|run|all] [--time S] [--jobs N] [--report OUT] ...
    openhlo fuzz minimize FILE [--target text|run]
    openhlo calibrate [-o hw.json] [--mesh x=4,y=2] [--num-processes P] [--refresh] [--quick]
    openhlo quantize IN.mlir --mode MODE [--calibration IN.npz ...] [-o OUT.mlir] [--report]
    openhlo kernel-check NAME --shape 4,16 [--shape ...] [--attr K=V] [--module M]

Errors in the input are reported on stderr as ``openhlo: error: ...`` (or
``file:line:col: error: ...`` with the source line and a caret) with exit
code 1; usage errors exit with code 2. ``--traceback`` shows the Python
traceback of an error, for debugging OpenHLO itself (before or after the
subcommand; it sets ``OPENHLO_TRACEBACK=1`` for the API's errors too).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import traceback

from stablehlo.errors import TRACEBACK_ENV, OpenHLOError
from stablehlo.registry import RegistryError

from tools.diagnostics import CliError, format_error


def build_parser() -> argparse.ArgumentParser:
    from tools import (backend_check, bench_runtime, bench_text, calibrate, compile, kernel_check,
                       opt, quantize, run, sharding_view)
    from tools.bench import command as bench
    from tools.conformance import command as conformance
    from tools.fuzz import command as fuzz
    from tools.jax_suite import command as jax_suite
    parser = argparse.ArgumentParser(
        prog="openhlo",
        description="OpenHLO: run, transform, test and benchmark StableHLO programs.")
    _add_traceback_flag(parser, default=False)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in (run, opt, compile, sharding_view, conformance, backend_check, bench_text,
                   bench_runtime, bench, jax_suite, fuzz, calibrate, quantize, kernel_check):
        module.add_parser(subparsers)
    for subparser in set(subparsers.choices.values()):
        # SUPPRESS: a subcommand without the flag leaves the value given before it alone.
        _add_traceback_flag(subparser, default=argparse.SUPPRESS)
    return parser


def _add_traceback_flag(parser: argparse.ArgumentParser, default) -> None:
    parser.add_argument("--traceback", action="store_true", default=default,
                        help="show the Python traceback of errors (for debugging OpenHLO)")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.sources = {}  # file name -> text, filled by read_source for error snippets
    with _full_api_tracebacks(args.traceback):
        return _run_command(args)


@contextlib.contextmanager
def _full_api_tracebacks(enabled: bool):
    """With --traceback, errors from the public API keep their internal frames too
    (stablehlo.errors.api_boundary reads the variable); restored after the command, so an
    in-process caller's environment is left as it was."""
    previous = os.environ.get(TRACEBACK_ENV)
    if enabled:
        os.environ[TRACEBACK_ENV] = "1"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(TRACEBACK_ENV, None)
        else:
            os.environ[TRACEBACK_ENV] = previous


def _run_command(args: argparse.Namespace) -> int:
    try:
        return int(args.handler(args) or 0)
    except (CliError, OpenHLOError, RegistryError) as exc:
        _report(args, exc, format_error(exc, args.sources))
        return 1
    except KeyboardInterrupt:
        print("openhlo: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # a bug in OpenHLO, not bad input: say so
        _report(args, exc, f"openhlo: internal error: {type(exc).__name__}: {exc} "
                           "(rerun with --traceback and report it)")
        return 1


def _report(args: argparse.Namespace, exc: BaseException, message: str) -> None:
    if args.traceback:
        traceback.print_exception(exc, file=sys.stderr)
    sys.stderr.write(message.rstrip("\n") + "\n")


if __name__ == "__main__":
    sys.exit(main())
