"""The fuzzing harness itself: the mutator, the contract checks, the minimizer, the worker
runner, the comparison of backends, and a short end-to-end run."""
import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import stablehlo
from tools.fuzz.contract import EXCEPTION, MISMATCH, MISMATCH_INT, TIMEOUT, Finding, check_text
from tools.fuzz.driver import minimize_finding
from tools.fuzz.mutator import Mutator
from tools.fuzz.run_target import compare_backends
from tools.fuzz.runner import CRASHED, OK, TIMED_OUT, SubprocessRunner
from tools.tests.helpers import REPO_ROOT, run_subprocess

ADD = """func.func @main(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = stablehlo.add %a, %b : tensor<4x8xf32>
  %1 = stablehlo.multiply %0, %b : tensor<4x8xf32>
  func.return %1 : tensor<4x8xf32>
}
"""
REDUCE = ("func.func @main(%x: tensor<3x5xi32>) -> tensor<3xi32> {\n"
          "  %init = stablehlo.constant dense<0> : tensor<i32>\n"
          "  %0 = stablehlo.reduce(%x init: %init) applies stablehlo.add across dimensions = [1]"
          " : (tensor<3x5xi32>, tensor<i32>) -> tensor<3xi32>\n"
          "  func.return %0 : tensor<3xi32>\n"
          "}\n")
FAKE_TARGETS = "tools.fuzz.tests.fake_targets"


def _parses(text: str) -> bool:
    try:
        stablehlo.parse(text)
        return True
    except stablehlo.OpenHLOError:
        return False


def test_seed_programs_of_the_tests_parse():
    assert _parses(ADD) and _parses(REDUCE)


def test_mutants_are_deterministic_plausible_and_varied():
    mutator = Mutator([ADD, REDUCE])
    first = [mutator.mutate(ADD, random.Random(seed)) for seed in range(200)]
    again = [mutator.mutate(ADD, random.Random(seed)) for seed in range(200)]
    assert first == again
    assert sum(m != ADD for m in first) >= 190
    assert len(set(first)) >= 120
    parsed = sum(_parses(m) for m in first)
    # Plausible: a share get through the parser and verifier; most do not (they are wrong).
    assert 10 <= parsed <= 190, parsed


@pytest.mark.parametrize("strategy", ["integer", "dimension", "element_type", "attribute",
                                      "delete_line", "duplicate_line", "region",
                                      "swap_operands", "replace_value", "nest_type", "splice"])
def test_each_mutation_changes_the_text(strategy):
    mutator = Mutator([ADD])
    rng = random.Random(3)
    results = {getattr(mutator, strategy)(REDUCE, rng) for _ in range(20)}
    assert any(r is not None and r != REDUCE for r in results), strategy


def test_mutations_of_a_known_kind():
    mutator = Mutator([])
    dims = {mutator.dimension(ADD, random.Random(s)) for s in range(40)}
    assert any("tensor<0x8xf32>" in d or "tensor<4x0xf32>" in d for d in dims)
    assert any("?x" in d or "x?x" in d for d in dims)
    types = {mutator.element_type(ADD, random.Random(s)) for s in range(80)}
    assert any("xi3>" in t for t in types)
    swapped = {mutator.swap_operands(ADD, random.Random(s)) for s in range(10)}
    assert any("stablehlo.add %b, %a" in s for s in swapped)


def test_text_contract_passes_good_and_bad_input():
    assert check_text(ADD) is None
    assert check_text(ADD.replace("%b :", "%c :")) is None  # an OpenHLOError: allowed


def test_text_contract_reports_other_exceptions_with_their_place(monkeypatch):
    def broken(text, filename="<string>", *, verify=True):
        raise TypeError("planted")
    monkeypatch.setattr(stablehlo, "parse", broken)
    finding = check_text(ADD)
    assert finding.kind == EXCEPTION and finding.error == "TypeError"
    assert finding.where.startswith("tools/fuzz/tests/test_fuzz.py:") and "broken" in finding.where


def test_text_contract_reports_a_slow_input(monkeypatch):
    def slow(text, filename="<string>", *, verify=True):
        while True:
            time.sleep(0.01)
    monkeypatch.setattr(stablehlo, "parse", slow)
    finding = check_text(ADD, time_limit_s=0.3)
    assert finding.kind == TIMEOUT


class _PlantedOracle:
    """A fake target: a TypeError whenever the text mentions i3."""
    calls = 0

    def check(self, text):
        self.calls += 1
        if "i3" in text:
            return Finding(EXCEPTION, "TypeError", "planted.py:1 in parse", "i3")
        return None


def test_minimizer_shrinks_a_planted_finding_to_its_cause():
    text = ADD.replace("%b : tensor<4x8xf32>\n  func", "%b : tensor<4x8xi3>\n  func")
    oracle = _PlantedOracle()
    finding = oracle.check(text)
    small = minimize_finding(oracle, finding, text, budget=30)
    assert "i3" in small
    assert len(small) < 20, small
    assert len(small) < len(text) / 5


def test_runner_returns_values_and_survives_a_segfault():
    with SubprocessRunner(f"{FAKE_TARGETS}:echo", timeout=30) as runner:
        assert runner.call([1, 2]).value == [1, 2]
    with SubprocessRunner(f"{FAKE_TARGETS}:segfault", timeout=30) as runner:
        outcome = runner.call("x")
        assert outcome.status == CRASHED
        assert outcome.detail == "SIGSEGV" and outcome.stage == "about to crash"
        assert runner.call("again").status == CRASHED  # a fresh worker, crashed again


def test_runner_stops_a_hang():
    with SubprocessRunner(f"{FAKE_TARGETS}:hang", timeout=1.0) as runner:
        outcome = runner.call("x")
    assert outcome.status == TIMED_OUT and outcome.stage == "about to hang"


OWNER_OF_A_HANG = f"""
from tools.fuzz.runner import SubprocessRunner
runner = SubprocessRunner("{FAKE_TARGETS}:hang", timeout=600)
runner._start()
print(runner._process.pid, flush=True)
runner.call("x")
"""


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_runner_worker_ends_with_its_owner():
    # A fuzzing engine killed mid-input (the driver's grace period ran out) must not leave
    # its worker behind, busy on a hanging input: CI once found one spinning 28 min later.
    owner = subprocess.Popen([sys.executable, "-c", OWNER_OF_A_HANG], stdout=subprocess.PIPE,
                             text=True, cwd=REPO_ROOT)
    try:
        worker = int(owner.stdout.readline())
        time.sleep(1.0)  # the worker is inside the hang
        assert _running(worker)
    finally:
        owner.kill()
        owner.wait()
    deadline = time.monotonic() + 20
    while _running(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    still = _running(worker)
    if still:
        os.kill(worker, signal.SIGKILL)
    assert not still, "the worker outlived its owner"


def test_runner_status_ok():
    with SubprocessRunner(f"{FAKE_TARGETS}:echo", timeout=30) as runner:
        assert runner.call("a").status == OK


def test_backend_comparison():
    ints = np.array([1, 2, 3], np.int32)
    floats = np.array([1.0, np.nan, 1e6], np.float32)
    same = ("results", [ints, floats])
    assert compare_backends(same, same, "") is None
    near = ("results", [ints, floats * np.float32(1 + 1e-6)])
    assert compare_backends(near, same, "") is None
    wrong_int = ("results", [ints + 1, floats])
    assert compare_backends(wrong_int, same, "").kind == MISMATCH_INT
    wrong_float = ("results", [ints, np.array([2.0, np.nan, 1e6], np.float32)])
    assert compare_backends(wrong_float, same, "").kind == MISMATCH
    assert compare_backends(("rejected", "no"), same, "") is None


def test_a_short_fuzzing_run_reports_its_progress(tmp_path):
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    (seeds / "add.mlir").write_text(ADD)
    (seeds / "reduce.mlir").write_text(REDUCE)
    report = tmp_path / "report.json"
    # 15 s: the engine's start (imports, instrumentation) counts, and under load takes seconds
    outcome = run_subprocess("fuzz", "--target", "text", "--time", "15", "--seeds", seeds,
                             "--corpus", tmp_path / "corpus", "--findings", tmp_path / "found",
                             "--report", report, timeout=240)
    assert outcome.code in (0, 1), outcome.err
    summary = json.loads(report.read_text())["targets"][0]
    assert summary["target"] == "text"
    assert summary["executions"] > 10
    assert summary["coverage"] > 100
    assert summary["corpus_size"] >= 2
    assert "[text] done:" in outcome.out
    assert outcome.code == (1 if summary["findings"] else 0)
