"""Comparing a platform's outcomes with the baseline's: per-file figures, causes, output.

The figure of a file is ``platform passed / baseline passed``: of the tests that pass on
the baseline, the share that also pass on the platform. Tests that fail or are skipped on
the baseline do not count either way. Each baseline-passed test that did not pass on the
platform has a cause (``outcomes.cause_of``); the causes are counted per file.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

from tools.jax_suite.outcomes import NOT_RUN, PASSED, STATUSES, Outcome, cause_of

TOP_CAUSES = 10
EXAMPLES = 3  # test keys kept per cause in the JSON


@dataclass
class FileResult:
    """The two runs of one file. ``platform_error`` set: the platform could not run it."""
    file: str
    baseline: dict[str, Outcome] = field(default_factory=dict)
    platform: dict[str, Outcome] = field(default_factory=dict)
    baseline_error: str | None = None
    platform_error: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    restarts: dict[str, int] = field(default_factory=dict)

    def baseline_passed(self) -> list[str]:
        return sorted(k for k, o in self.baseline.items() if o.status == PASSED)

    def platform_outcome(self, key: str) -> Outcome:
        if self.platform_error is not None and key not in self.platform:
            return Outcome(NOT_RUN, "the platform could not run the file")
        return self.platform.get(key, Outcome(NOT_RUN))

    def figures(self) -> dict:
        passed = self.baseline_passed()
        causes: Counter[str] = Counter()
        examples: dict[str, list[str]] = {}
        platform_passed = 0
        for key in passed:
            outcome = self.platform_outcome(key)
            if outcome.status == PASSED:
                platform_passed += 1
                continue
            cause = cause_of(outcome)
            causes[cause] += 1
            examples.setdefault(cause, [])
            if len(examples[cause]) < EXAMPLES:
                examples[cause].append(key)
        return {
            "file": self.file,
            "baseline": _counts(self.baseline),
            "platform": _counts({k: self.platform_outcome(k) for k in passed}),
            "baseline_passed": len(passed),
            "platform_passed": platform_passed,
            "ratio": platform_passed / len(passed) if passed else None,
            "causes": [{"cause": c, "count": n, "examples": examples[c]}
                       for c, n in causes.most_common()],
            "baseline_error": self.baseline_error,
            "platform_error": self.platform_error,
            "seconds": {k: round(v, 1) for k, v in self.seconds.items()},
            "restarts": self.restarts,
        }


def _counts(outcomes: dict[str, Outcome]) -> dict[str, int]:
    counts = Counter(o.status for o in outcomes.values())
    return {s: counts[s] for s in STATUSES if counts[s]}


def totals(figures: list[dict]) -> dict:
    base = sum(f["baseline_passed"] for f in figures)
    plat = sum(f["platform_passed"] for f in figures)
    return {"baseline_passed": base, "platform_passed": plat,
            "ratio": plat / base if base else None,
            "seconds": {side: round(sum(f["seconds"].get(side, 0.0) for f in figures), 1)
                        for side in ("baseline", "platform")}}


def _percent(ratio: float | None) -> str:
    return "-" if ratio is None else f"{100 * ratio:.1f}%"


def table(figures: list[dict], total: dict, baseline: str, platform: str) -> str:
    """The per-file table, then each file's main causes and errors."""
    head = ("file", f"{baseline} passed", f"of those, {platform} passed", "ratio",
            f"{baseline} failed/skipped", "seconds")
    rows = []
    for f in figures:
        b = f["baseline"]
        not_passed = sum(n for s, n in b.items() if s != PASSED)
        skipped = b.get("skipped", 0)
        seconds = "/".join(f"{f['seconds'].get(s, 0):.0f}" for s in ("baseline", "platform"))
        rows.append((f["file"], str(f["baseline_passed"]), str(f["platform_passed"]),
                     _percent(f["ratio"]), f"{not_passed - skipped}/{skipped}", seconds))
    seconds = "/".join(f"{total['seconds'][s]:.0f}" for s in ("baseline", "platform"))
    rows.append(("total", str(total["baseline_passed"]), str(total["platform_passed"]),
                 _percent(total["ratio"]), "", seconds))
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = []
    for n, row in enumerate([head, *rows]):
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
        lines.append("  ".join(cells).rstrip())
        if n == 0 or n == len(rows) - 1:
            lines.append("  ".join("-" * w for w in widths))
    for f in figures:
        notes = []
        for side in ("baseline", "platform"):
            if f[f"{side}_error"]:
                notes.append(f"  {side} run failed: " + f[f"{side}_error"].replace(
                    "\n", "\n    "))
        notes += [f"  {c['count']:6d}  {c['cause']}" for c in f["causes"][:TOP_CAUSES]]
        if len(f["causes"]) > TOP_CAUSES:
            rest = sum(c["count"] for c in f["causes"][TOP_CAUSES:])
            notes.append(f"  {rest:6d}  ({len(f['causes']) - TOP_CAUSES} other causes)")
        if notes:
            lines += ["", f"{f['file']}: main causes of baseline-passed tests not passing "
                          f"on {platform}" if f["causes"] else f"{f['file']}:", *notes]
    return "\n".join(lines) + "\n"


def write_json(path: str, results: list[FileResult], figures: list[dict], total: dict,
               settings: dict) -> None:
    """Everything: settings, per-file figures and causes, and every test's two outcomes
    (``--baseline-json`` reads the baseline side back)."""
    files = []
    for result, fig in zip(results, figures):
        tests = []
        for key in sorted(result.baseline):
            base = result.baseline[key]
            entry = {"id": key, "baseline": base.status}
            if base.status == PASSED:
                plat = result.platform_outcome(key)
                entry["platform"] = plat.status
                if plat.status != PASSED and plat.message:
                    entry["message"] = plat.message
            tests.append(entry)
        files.append({**fig, "tests": tests})
    with open(path, "w", encoding="utf-8") as f:
        json.dump({**settings, "files": files, "total": total}, f, indent=1)
        f.write("\n")


def read_baseline(path: str) -> dict[str, dict[str, Outcome]]:
    """The baseline outcomes of an earlier ``--json``: file -> key -> outcome."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return {entry["file"]: {t["id"]: Outcome(t["baseline"]) for t in entry["tests"]}
            for entry in data["files"]}
