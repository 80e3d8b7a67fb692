"""``openhlo bench-text``: throughput of the text parser, the verifier and the printer.

Every ``.mlir`` file under the given paths (default: the public conformance
``testdata`` folder next to the repository) is split at ``// -----`` and each
chunk is parsed, verified and printed. Each phase reports MB/s (of the input
text for parse and verify, of the output text for print) and ops/s; chunks
that fail a phase are counted and left out of the later phases. This is a
measurement tool, not a timed test: nothing fails on slowness.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field

from tools.diagnostics import CliError

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_PATH = os.path.join(os.path.dirname(REPO_ROOT), "shared", "conformance", "stablehlo",
                            "testdata")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "bench-text", help="measure parse/verify/print throughput",
        description="Parse, verify and print every .mlir file under PATHS and report MB/s "
                    "and ops/s per phase.")
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help=f".mlir files or folders (default: {DEFAULT_PATH})")
    p.add_argument("--limit", type=int, default=None, metavar="N",
                   help="use only the first N files (sorted by path)")
    p.add_argument("--generic", action="store_true", help="time the generic printer")
    p.set_defaults(handler=bench_command)


@dataclass
class Phase:
    name: str
    seconds: float = 0.0
    bytes: int = 0
    ops: int = 0
    chunks: int = 0
    failures: list = field(default_factory=list)

    def row(self) -> str:
        mb = self.bytes / 1e6
        mbps = mb / self.seconds if self.seconds else 0.0
        opsps = self.ops / self.seconds if self.seconds else 0.0
        return (f"{self.name:<7} {self.chunks:>7} {mb:>9.2f} {self.ops:>9} {self.seconds:>9.2f} "
                f"{mbps:>8.3f} {opsps:>10.0f} {len(self.failures):>6}")


def bench_command(args: argparse.Namespace) -> int:
    from stablehlo.text import split_input_file
    from tools.conformance.discover import find_files
    paths = args.paths or [DEFAULT_PATH]
    try:
        files = find_files(paths)
    except FileNotFoundError as exc:
        raise CliError(f"no such file or folder: {exc}") from None
    if args.limit is not None:
        files = files[:args.limit]
    if not files:
        raise CliError("no .mlir files under " + ", ".join(paths))
    chunks = []
    for path in files:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        chunks += [(path, line, "\n" * (line - 1) + chunk)
                   for _, line, chunk in split_input_file(text) if "func.func" in chunk]
    phases = run_phases(chunks, args.generic)
    sys.stdout.write(report(phases, len(files)))
    return 0


def run_phases(chunks: list, generic: bool = False) -> list[Phase]:
    """Time parse, verify and print over ``chunks`` of (file, line, text)."""
    from stablehlo.errors import OpenHLOError
    from stablehlo.text import parse_module, print_module
    from stablehlo.verify import verify_module
    parse, verify, printing = Phase("parse"), Phase("verify"), Phase("print")
    for path, line, text in chunks:
        size = len(text.encode("utf-8"))
        try:
            module, seconds = _timed(parse_module, text, path)
        except OpenHLOError as exc:
            parse.failures.append(f"{path}:{line}: {exc}")
            continue
        ops = sum(1 for _ in module.walk())
        _add(parse, seconds, size, ops)
        try:
            _, seconds = _timed(verify_module, module)
        except OpenHLOError as exc:
            verify.failures.append(f"{path}:{line}: {exc}")
            continue
        _add(verify, seconds, size, ops)
        out, seconds = _timed(print_module, module, generic=generic)
        _add(printing, seconds, len(out.encode("utf-8")), ops)
    return [parse, verify, printing]


def _timed(fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def _add(phase: Phase, seconds: float, size: int, ops: int) -> None:
    phase.seconds += seconds
    phase.bytes += size
    phase.ops += ops
    phase.chunks += 1


def report(phases: list[Phase], files: int) -> str:
    header = (f"{'phase':<7} {'modules':>7} {'MB':>9} {'ops':>9} {'seconds':>9} "
              f"{'MB/s':>8} {'ops/s':>10} {'failed':>6}")
    total = Phase("total", sum(p.seconds for p in phases), phases[0].bytes, phases[0].ops,
                  phases[0].chunks, [f for p in phases for f in p.failures])
    lines = [f"text benchmark over {files} files", header]
    lines += [p.row() for p in phases] + [total.row()]
    lines.append("(total: input MB and ops of parsed modules over the time of all phases)")
    for failure in total.failures[:10]:
        lines.append("failed: " + " ".join(failure.split())[:200])
    if len(total.failures) > 10:
        lines.append(f"... and {len(total.failures) - 10} more failures")
    return "\n".join(lines) + "\n"
