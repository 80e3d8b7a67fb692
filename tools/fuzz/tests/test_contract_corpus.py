"""The error contract over mutants of the conformance programs (issue 14).

A fixed sample: seeded mutants (tools/fuzz/mutator.py) of the shared conformance programs
(skipped where the suites are absent).
Parsing, verifying and printing each may raise only an OpenHLOError (tools/fuzz/contract.py);
a smaller sample of the mutants that parse is compiled and executed on the backends in a
worker process, where a crash, a hang or any other exception is a failure. The sample
depends only on the seed and the conformance files, so a failure reproduces; the message
lists every failing mutant with its finding, and ``openhlo fuzz minimize`` shrinks one.
"""
import random

import pytest

from tools.fuzz.contract import CRASH, EXCEPTION, TIMEOUT, text_contract
from tools.fuzz.mutator import Mutator
from tools.fuzz.run_target import check_run, make_runner
from tools.fuzz.seeds import seed_programs
from xla_core.testing.conformance import conformance_dir

SEED = 14
TEXT_SAMPLE = 300
RUN_SAMPLE = 36
# Seeds above this size make slow mutants and add no new syntax.
MAX_SEED_BYTES = 2500
# Generous: these catch hangs, not slowness (the machine running the tests may be loaded).
TEXT_HANG_S = 60.0
RUN_HANG_S = 120.0


@pytest.fixture(scope="module")
def mutants():
    if conformance_dir() is None:
        pytest.skip("no conformance programs (../shared/conformance)")
    programs = seed_programs(max_bytes=MAX_SEED_BYTES, include_regressions=False)
    rng = random.Random(SEED)
    mutator = Mutator([text for _, text in programs])
    sample = []
    for i in range(TEXT_SAMPLE):
        name, text = rng.choice(programs)
        sample.append((f"mutant {i} of {name}", mutator.mutate(text, rng)))
    return sample


def _report(failures) -> str:
    return "\n\n".join(f"{name}: {finding.describe()}\n{text}" for name, finding, text in failures)


def test_parse_verify_print_raise_only_openhlo_errors(mutants):
    failures = []
    for name, text in mutants:
        finding, _parsed = text_contract(text, TEXT_HANG_S)
        if finding is not None:
            failures.append((name, finding, text))
    assert not failures, f"{len(failures)} of {len(mutants)} mutants:\n" + _report(failures)


def test_compile_and_execute_raise_only_openhlo_errors(mutants):
    runnable = [(name, text) for name, text in mutants
                if text_contract(text, TEXT_HANG_S) == (None, True)][:RUN_SAMPLE]
    assert len(runnable) >= RUN_SAMPLE // 2
    failures = []
    with make_runner(RUN_HANG_S) as runner:
        for name, text in runnable:
            finding = check_run(runner, text)
            if finding is not None and finding.kind in (CRASH, EXCEPTION, TIMEOUT):
                failures.append((name, finding, text))
    assert not failures, f"{len(failures)} of {len(runnable)} mutants:\n" + _report(failures)
