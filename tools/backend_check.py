"""``openhlo backend-check NAME``: the backend conformance suite on a registered backend.

Runs the runtime contract's checks (pjrt/testing: devices, buffers, events, execution,
multi-device, donation, deleted objects, argument errors, compile errors, failures) and a
slice of the StableHLO conformance programs (tools/conformance/slice.py: testdata op
families and interpreter-suite files at even spacing, each file run case by case by the
conformance runner, results checked for ownership), and prints a table of verdicts per
area. Exit status 0 only if no check failed.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Optional

from tools.diagnostics import CliError

SLICE_TESTDATA = 10  # op families of the testdata suite
SLICE_INTERPRET = 4  # files of the interpreter suite


def add_parser(subparsers) -> None:
    from pjrt.registry import available_backends
    p = subparsers.add_parser(
        "backend-check", help="run the backend conformance suite on a backend",
        description="Check that a registered backend keeps the runtime contract and runs a "
                    "slice of the StableHLO conformance programs; prints pass/fail per area. "
                    "Exit status 0 only if no check failed.")
    p.add_argument("backend", metavar="NAME",
                   help=f"a registered backend (known: {', '.join(available_backends())})")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="an option for the backend's factory (repeatable; values are read as "
                        "Python literals, else kept as text); default: num_devices=2 if the "
                        "backend takes it")
    p.add_argument("--conformance", metavar="DIR", type=Path,
                   help="the StableHLO conformance suites (holding testdata/ and interpret/); "
                        "default: shared/conformance/stablehlo next to the checkout")
    p.add_argument("--no-conformance", action="store_true",
                   help="run the runtime contract's checks only")
    p.add_argument("-v", "--verbose", action="store_true", help="print each check as it ends")
    p.set_defaults(handler=backend_check_command)


def backend_check_command(args: argparse.Namespace) -> int:
    from pjrt.registry import make_client
    from pjrt.testing import failures, run_suite, summary_table
    options = _options(args.option)
    make_client(args.backend, **(options or {}))  # an unknown or broken backend fails here
    # Judge the code the cpu backend ends up running (as `openhlo conformance` does): its
    # generated kernels, not the op-by-op first tier (pjrt/plugins/cpu/tiering.py).
    os.environ.setdefault("OPENHLO_CPU_ASYNC_CODEGEN", "0")
    extra = {} if args.no_conformance else {"conformance": conformance_checks(args.conformance)}

    def show(result) -> None:
        if args.verbose:
            print(f"{result.status:4}  {result.area} / {result.name}"
                  + (f": {result.message}" if result.message else ""), file=sys.stderr)

    results = run_suite(args.backend, options, extra_areas=extra, on_result=show)
    sys.stdout.write(summary_table(results, args.backend))
    return 1 if failures(results) else 0


def _options(pairs: list) -> Optional[dict]:
    import ast
    if not pairs:
        return None
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"--option takes KEY=VALUE, got {pair!r}")
        try:
            options[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            options[key] = value
    return options


def conformance_checks(root: Optional[Path] = None) -> tuple:
    """One check per file of the conformance slice under ``root`` (default: the shared
    suites); one skipped check when the suites are not there."""
    from xla_core.testing.conformance import conformance_dir
    from tools.conformance.slice import choose_interpret, choose_testdata
    testdata = (root / "testdata") if root is not None else conformance_dir("testdata")
    interpret = (root / "interpret") if root is not None else conformance_dir("interpret")
    if testdata is None or interpret is None or not testdata.is_dir() or \
            not interpret.is_dir():
        return (conformance_suites_not_found,)
    files = (choose_testdata(testdata, SLICE_TESTDATA)
             # Probes need a probe_dir option, which a backend need not take.
             + choose_interpret(interpret, SLICE_INTERPRET, exclude=("interpreter.probe",)))
    return tuple(ConformanceFile(path) for path in files)


def conformance_suites_not_found(suite) -> None:
    from pjrt.testing import Skipped
    raise Skipped("the StableHLO conformance suites were not found; pass --conformance DIR")


class ConformanceFile:
    """A check: every case of one conformance file passes on the suite's backend (cases
    the file disables upstream are skipped; results must be the caller's own)."""

    def __init__(self, path: Path):
        self.path = path
        self.check_name = path.name

    def __call__(self, suite) -> None:
        from pjrt.testing import CheckFailed
        from tools.conformance.command import plan_cases
        from tools.conformance.execute import PASS, SKIP, Target, execute_case
        target = Target(suite.backend, check_result_ownership=True)
        for case in plan_cases([str(self.path)]):
            status, message, _ = execute_case(case, target)
            if status not in (PASS, SKIP):
                raise CheckFailed(f"{case.label}: {status}: {message[:300]}")
