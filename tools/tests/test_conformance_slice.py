"""A representative slice of the real conformance suites must pass.

The slice is chosen by rule, not by hand: the testdata op families (file name
up to its first dtype word) are sorted and 40 are taken at even spacing, each
with its smallest enabled file; plus 15 interpreter-suite files at even
spacing over the sorted single-process files. The runner's own verdicts (the
files' check ops) are the oracle. Every case also runs a second time after its results were
overwritten, and must give the same bits (no result shares the executable's storage).
"""
from __future__ import annotations

import json
import re

import pytest

from tools.tests.helpers import run_cli
from xla_core.testing.conformance import conformance_dir

TESTDATA = conformance_dir("testdata")
INTERPRET = conformance_dir("interpret")
_FAMILY = re.compile(r"^(.*?)_(?:bool|u?int\d+|float\d+|bfloat16|complex\d+|f8\w*)(?:_|$)")


def _evenly(items: list, count: int) -> list:
    if len(items) <= count:
        return items
    return [items[(i * len(items)) // count] for i in range(count)]


def choose_testdata(count: int = 40) -> list:
    families: dict = {}
    for path in sorted(TESTDATA.glob("*.mlir")):
        m = _FAMILY.match(path.stem)
        if m is None or "RUN-DISABLED" in path.read_text():
            continue
        families.setdefault(m.group(1), []).append(path)
    chosen = [min(families[f], key=lambda p: (p.stat().st_size, p.name))
              for f in _evenly(sorted(families), count)]
    return chosen


def choose_interpret(count: int = 15) -> list:
    files = [p for p in sorted(INTERPRET.glob("*.mlir"))
             if "interpreter.run_parallel" not in p.read_text()]
    return _evenly(files, count)


@pytest.mark.skipif(TESTDATA is None or INTERPRET is None, reason="conformance suites not found")
def test_representative_slice_passes(capsys, tmp_path):
    files = choose_testdata() + choose_interpret()
    assert len(files) == 55
    report = tmp_path / "slice.json"
    r = run_cli(capsys, "conformance", *files, "--jobs", "2", "--json", report,
                "--check-result-ownership")
    results = json.loads(report.read_text())["results"]
    bad = [f"{e['file']}#{e['case']}: {e['status']}: {e['message'][:200]}"
           for e in results if e["status"] not in ("pass", "skip")]
    assert not bad, "\n".join(bad)
    assert r.code == 0
