"""A representative slice of the real conformance suites must pass.

The slice is chosen by rule (tools/conformance/slice.py): 40 testdata op
families at even spacing, each with its smallest enabled file, plus 15
interpreter-suite files at even spacing over the single-process files. The
runner's own verdicts (the files' check ops) are the oracle. Every case also
runs a second time after its results were overwritten, and must give the same
bits (no result shares the executable's storage).
"""
from __future__ import annotations

import json

import pytest

from tools.conformance.slice import choose_interpret, choose_testdata
from tools.tests.helpers import run_cli
from xla_core.testing.conformance import conformance_dir

TESTDATA = conformance_dir("testdata")
INTERPRET = conformance_dir("interpret")


@pytest.mark.skipif(TESTDATA is None or INTERPRET is None, reason="conformance suites not found")
def test_representative_slice_passes(capsys, tmp_path):
    files = choose_testdata(TESTDATA) + choose_interpret(INTERPRET)
    assert len(files) == 55
    report = tmp_path / "slice.json"
    r = run_cli(capsys, "conformance", *files, "--jobs", "2", "--json", report,
                "--check-result-ownership")
    results = json.loads(report.read_text())["results"]
    bad = [f"{e['file']}#{e['case']}: {e['status']}: {e['message'][:200]}"
           for e in results if e["status"] not in ("pass", "skip")]
    assert not bad, "\n".join(bad)
    assert r.code == 0
