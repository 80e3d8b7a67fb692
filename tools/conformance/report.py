"""Progress, summary and JSON report of a conformance run.

The pass rate is over enabled cases: pass / (pass + fail + error).
"""
from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass

from tools.conformance.discover import SKIP, Case
from tools.conformance.execute import ERROR, FAIL, PASS, STATUSES
from tools.conformance.integer_path import CLASSES, summary_lines

MAX_LISTED = 50  # fail/error lines printed without -v


@dataclass
class Result:
    case: Case
    status: str
    message: str
    integer_path: tuple | None = None   # (class, reason): integer_path.classify

    def as_json(self) -> dict:
        c = self.case
        record = {"file": c.file, "case": c.case, "run": c.run, "line": c.line,
                  "function": c.function, "kind": c.kind, "status": self.status,
                  "message": self.message}
        if self.integer_path is not None:
            record["integer_path"] = {"class": self.integer_path[0],
                                      "reason": self.integer_path[1]}
        return record

    def one_line(self) -> str:
        message = " ".join(self.message.split())
        if len(message) > 300:
            message = message[:297] + "..."
        place = f"{self.case.file}:{self.case.line}"
        tail = f": {message}" if message else ""
        return f"{self.status.upper():5} {self.case.label} ({place}){tail}"


class Progress:
    """A counter line on stderr: rewritten in place on a terminal, periodic otherwise."""

    def __init__(self, total: int, verbose: bool, stream=None):
        self.total, self.verbose = total, verbose
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.counts = dict.fromkeys(STATUSES, 0)
        self.done = 0
        self.start = time.monotonic()
        self._last = 0.0

    def update(self, result: Result) -> None:
        self.done += 1
        self.counts[result.status] += 1
        if self.verbose:
            self._clear()
            self.stream.write(result.one_line() + "\n")
        now = time.monotonic()
        interval = 0.2 if self.tty else 10.0
        if now - self._last >= interval or self.done == self.total:
            self._last = now
            self._show()

    def _show(self) -> None:
        c = self.counts
        line = (f"[{self.done}/{self.total}] pass {c[PASS]} fail {c[FAIL]} error {c[ERROR]} "
                f"skip {c[SKIP]} ({time.monotonic() - self.start:.0f} s)")
        self.stream.write(("\r" + line + "\033[K") if self.tty else line + "\n")
        if self.tty and self.done == self.total:
            self.stream.write("\n")
        self.stream.flush()

    def _clear(self) -> None:
        if self.tty:
            self.stream.write("\r\033[K")


def summarize(results: list[Result], files: int, seconds: float) -> dict:
    counts = dict.fromkeys(STATUSES, 0)
    for r in results:
        counts[r.status] += 1
    enabled = counts[PASS] + counts[FAIL] + counts[ERROR]
    summary = {"files": files, "cases": len(results), **counts, "enabled": enabled,
               "pass_rate": round(counts[PASS] / enabled, 6) if enabled else None,
               "wall_seconds": round(seconds, 3)}
    paths = [r.integer_path for r in results if r.integer_path is not None]
    if paths:
        summary["integer_path"] = {c: sum(1 for k, _ in paths if k == c) for c in CLASSES}
    return summary


def summary_text(results: list[Result], summary: dict, backend: str, verbose: bool) -> str:
    lines = []
    bad = [r for r in results if r.status in (FAIL, ERROR)]
    if not verbose:
        lines += [r.one_line() for r in bad[:MAX_LISTED]]
        if len(bad) > MAX_LISTED:
            lines.append(f"... and {len(bad) - MAX_LISTED} more fail/error cases "
                         "(see -v or --json)")
    rate = summary["pass_rate"]
    rate_text = f"{100 * rate:.1f}%" if rate is not None else "n/a"
    lines.append(
        f"conformance on backend {backend}: {summary['files']} files, {summary['cases']} cases: "
        f"{summary[PASS]} pass, {summary[FAIL]} fail, {summary[ERROR]} error, "
        f"{summary[SKIP]} skip; pass rate {rate_text} of {summary['enabled']} enabled; "
        f"{summary['wall_seconds']:.1f} s")
    paths = [r.integer_path for r in results if r.integer_path is not None]
    if paths:
        lines += summary_lines(paths)
    return "\n".join(lines) + "\n"


def write_json(path: str, results: list[Result], summary: dict, backend: str,
               paths: list[str]) -> None:
    document = {"backend": backend, "paths": [os.fspath(p) for p in paths],
                "results": [r.as_json() for r in results], "summary": summary}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(document, f, indent=1)
        f.write("\n")
