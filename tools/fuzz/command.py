"""``openhlo fuzz``: coverage-guided fuzzing of the parser, verifier, printer and backends.

    openhlo fuzz [--target text|run|all] [--time S] [--jobs N] [--corpus DIR]
                 [--findings DIR] [--seeds DIR] [--report FILE] [--time-limit S]
    openhlo fuzz minimize FILE [--target text|run] [-o OUT]

The exit code is 1 when the run found anything but float mismatches between the backends
(contract.py's FAILING_CLASSES), so CI fails on a finding.
"""
from __future__ import annotations

import argparse
import json
import sys

from tools.diagnostics import CliError, read_source
from tools.fuzz.contract import DEFAULT_TIME_LIMIT, FAILING_CLASSES
from tools.fuzz.seeds import DEFAULT_MAX_SEED_BYTES


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "fuzz", help="fuzz the parser, verifier, printer and backends (atheris)",
        description="Coverage-guided fuzzing with a structured MLIR mutator, seeded from the "
                    "conformance suites (or --seeds). Target 'text': parse, verify, print and "
                    "reparse in process; only OpenHLOError may escape and the printed text "
                    "must print the same again. Target 'run': also compile and execute on "
                    "the cpu and interpreter backends in a worker process (crashes and hangs "
                    "are caught) and compare their results. 'openhlo fuzz minimize FILE' "
                    "shrinks one failing input.")
    configure_parser(p)
    p.set_defaults(handler=fuzz_command)


def configure_parser(p: argparse.ArgumentParser) -> None:
    from xla_core.cache_root import cache_root
    p.add_argument("action", nargs="?", choices=("fuzz", "minimize"), default="fuzz",
                   help="fuzz (default), or minimize FILE")
    p.add_argument("file", nargs="?", metavar="FILE",
                   help="the failing input to minimize ('-' reads stdin)")
    p.add_argument("--target", choices=("text", "run", "all"), default="all",
                   help="what to fuzz; 'all' runs text, then run, each for --time "
                        "(default all; minimize: text unless given)")
    p.add_argument("--time", type=float, default=60.0, metavar="S",
                   help="seconds of fuzzing per target (default 60)")
    p.add_argument("--jobs", type=int, default=1, help="fuzzing processes per target")
    p.add_argument("--corpus", metavar="DIR",
                   help=f"working corpus (default {cache_root('fuzz', '<target>')})")
    p.add_argument("--findings", metavar="DIR", default=None,
                   help=f"where minimized findings go (default {cache_root('fuzz', 'findings')})")
    p.add_argument("--seeds", action="append", metavar="DIR",
                   help="seed programs (*.mlir under DIR, repeatable) instead of the "
                        "conformance suites")
    p.add_argument("--max-seed-bytes", type=int, default=DEFAULT_MAX_SEED_BYTES,
                   help=f"leave out larger seed programs (default {DEFAULT_MAX_SEED_BYTES})")
    p.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT, metavar="S",
                   help=f"one input taking longer is a finding (default {DEFAULT_TIME_LIMIT:g}; "
                        "the run target allows twice as much)")
    p.add_argument("--report", metavar="FILE", help="write the summary as JSON")
    p.add_argument("-o", "--output", metavar="OUT", help="minimize: write the result here")


def fuzz_command(args: argparse.Namespace) -> int:
    if args.action == "minimize":
        return _minimize_command(args)
    if args.file:
        raise CliError(f"unexpected argument {args.file!r} (did you mean 'fuzz minimize FILE'?)")
    from xla_core.cache_root import cache_root
    from tools.fuzz.driver import Options, fuzz
    targets = ("text", "run") if args.target == "all" else (args.target,)
    summaries = []
    for target in targets:
        options = Options(target=target, seconds=args.time, jobs=args.jobs,
                          corpus=args.corpus and f"{args.corpus}/{target}",
                          findings=args.findings or cache_root("fuzz", "findings"),
                          seeds=args.seeds, time_limit=args.time_limit,
                          max_seed_bytes=args.max_seed_bytes)
        try:
            summary = fuzz(options)
        except (ValueError, RuntimeError) as exc:
            raise CliError(str(exc)) from None
        summaries.append(summary)
        print(f"[{target}] done: " + json.dumps({k: v for k, v in summary.to_json().items()
                                                 if k != "findings"}))
    if args.report:
        with open(args.report, "w", encoding="utf-8") as f:
            json.dump({"targets": [s.to_json() for s in summaries]}, f, indent=1)
    failing = [f for s in summaries for f in s.findings if f["kind"] in FAILING_CLASSES]
    for finding in failing:
        print(f"FINDING {finding['kind']}: {finding['error']} at {finding['where']}: "
              f"{finding['message']} ({finding['file']}):\n{finding['input']}", file=sys.stderr)
    return 1 if failing else 0


def _minimize_command(args: argparse.Namespace) -> int:
    from tools.fuzz.driver import minimize_finding
    from tools.fuzz.oracle import Oracle
    if not args.file:
        raise CliError("fuzz minimize needs the FILE to minimize")
    text, _name = read_source(args.file, args.sources)
    target = "text" if args.target == "all" else args.target
    with Oracle(target, args.time_limit, 2 * args.time_limit) as oracle:
        finding = oracle.check(text)
        if finding is None:
            raise CliError(f"{args.file} does not fail the {target} contract: nothing to minimize")
        small = minimize_finding(oracle, finding, text, budget=300.0)
    result = f"// {finding.describe()}\n{small}"
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(result)
    else:
        sys.stdout.write(result)
    return 0
