"""Every input the fuzzer once failed on, held to the same contract again.

Each ``tools/fuzz/regressions/*.mlir`` is a minimized finding of ``openhlo fuzz`` (ours, not
upstream text); its first line names the target. The oracle runs the text contract in a
worker process (and, for ``run``, compiles and executes on both backends there), so a crash
or a hang fails this test instead of ending the session: the input may only be accepted or
rejected with an OpenHLOError.
"""
from pathlib import Path

import pytest

from tools.fuzz.oracle import TARGETS, Oracle

REGRESSIONS = sorted((Path(__file__).resolve().parents[1] / "regressions").glob("*.mlir"))
# Generous: a hang, not slowness, is what a time limit here should catch.
HANG_S = 60.0


def _target(text: str) -> str:
    first = text.split("\n", 1)[0]
    assert first.startswith("// target:"), "the first line must be '// target: text|run'"
    target = first.split(":", 1)[1].strip()
    assert target in TARGETS
    return target


def test_there_are_regressions():
    assert REGRESSIONS


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.stem for p in REGRESSIONS])
def test_regression_keeps_the_contract(path):
    text = path.read_text(encoding="utf-8")
    with Oracle(_target(text), HANG_S, HANG_S) as oracle:
        finding = oracle.check(text)
    assert finding is None, finding.describe()
