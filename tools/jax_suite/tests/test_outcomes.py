"""The plugin's stream, selection and cause names, on synthetic records."""
from __future__ import annotations

import json

from tools.jax_suite.outcomes import (
    CRASHED,
    FAILED,
    PASSED,
    SKIPPED,
    TIMEOUT,
    Outcome,
    cause_of,
    read_stream,
)
from tools.jax_suite.selection import key_hash, key_of, select


def _lines(*records) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def test_stream_outcomes_and_test_in_flight():
    text = _lines({"collected": ["A::t1", "A::t2", "A::t3"]},
                  {"start": "A::t1"},
                  {"test": "A::t1", "outcome": "passed", "message": None, "seconds": 0.5},
                  {"start": "A::t2"},
                  {"test": "A::t2", "outcome": "failed", "message": "ValueError: bad"},
                  {"start": "A::t3"}) + '{"test": "A::t3", "outc'  # cut by a crash
    state = read_stream(text)
    assert state.collected == ["A::t1", "A::t2", "A::t3"]
    assert state.outcomes["A::t1"] == Outcome(PASSED, None, 0.5)
    assert state.outcomes["A::t2"].status == FAILED
    assert "A::t3" not in state.outcomes
    assert state.in_flight == "A::t3"


def test_stream_without_collection():
    state = read_stream("")
    assert state.collected is None and not state.outcomes and state.in_flight is None


def test_key_drops_the_file():
    assert key_of("tests/lax_test.py::LaxTest::testAdd0") == "LaxTest::testAdd0"
    assert key_of("tests/x.py::test_f[1]") == "test_f[1]"


def test_sample_is_stable_and_shards_partition_it():
    keys = [f"T::test{i}" for i in range(200)]
    sample = select(keys, 50, None, None)
    assert len(sample) == 50
    assert sample == select(list(reversed(keys)), 50, None, None)  # order does not matter
    # a sample of a sample is the same smallest-hash set
    assert select(keys, 20, None, None) <= sample
    shards = [select(keys, 50, (i, 3), None) for i in range(3)]
    assert set().union(*shards) == sample
    assert sum(len(s) for s in shards) == 50
    assert all(key_hash(k) % 3 == 1 for k in shards[1])
    assert select(keys, None, None, {"T::test3", "T::nope"}) == {"T::test3"}


def test_cause_groups_alike_failures():
    a = Outcome(FAILED, "AssertionError: \nNot equal to tolerance rtol=1e-06, atol=1e-06\n"
                        "Mismatched elements: 3 / 12 (25%)")
    b = Outcome(FAILED, "AssertionError: \nNot equal to tolerance rtol=0.001, atol=2e-05\n")
    assert cause_of(a) == cause_of(b) == \
        "failed: AssertionError: Not equal to tolerance rtol=N, atol=N"
    c = Outcome(FAILED, "jax.errors.JaxRuntimeError: UNIMPLEMENTED: op at 0x7f00aa not f32[3]")
    assert cause_of(c) == "failed: jax.errors.JaxRuntimeError: UNIMPLEMENTED: op at 0x… " \
                          "not f32[N]"
    assert cause_of(Outcome(FAILED, "assert 1 == 2")) == "failed: assert N == N"
    assert cause_of(Outcome(SKIPPED, "Skipped: not on cpu")) == "skipped: Skipped: not on cpu"
    assert cause_of(Outcome(CRASHED, "process killed by SIGSEGV")) == \
        "crashed: process killed by SIGSEGV"
    assert cause_of(Outcome(TIMEOUT)) == "timeout"
    assert cause_of(Outcome(PASSED)) == "passed"
    long = cause_of(Outcome(FAILED, "E: " + "x" * 500))
    assert len(long) < 160 and long.endswith("...")
