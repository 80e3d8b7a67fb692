"""Test outcomes: reading the plugin's stream and naming the cause of a failure.

Statuses: ``passed``, ``failed`` (the test body raised), ``error`` (a fixture raised),
``skipped`` (also expected failures), ``crashed`` (the process died during the test),
``timeout`` (the test ran past the per-test limit and was killed) and ``not_run`` (the
run stopped before reaching it).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

PASSED, FAILED, ERROR, SKIPPED = "passed", "failed", "error", "skipped"
CRASHED, TIMEOUT, NOT_RUN = "crashed", "timeout", "not_run"
STATUSES = (PASSED, FAILED, ERROR, SKIPPED, CRASHED, TIMEOUT, NOT_RUN)

MAX_CAUSE = 140  # characters of a cause line in the report


@dataclass
class Outcome:
    status: str
    message: str | None = None
    seconds: float | None = None


@dataclass
class StreamState:
    """What one pytest process reported: the tests it selected, the outcomes it finished,
    and the test that had started and not finished (the one to blame for a crash)."""
    collected: list[str] | None = None
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    in_flight: str | None = None


def read_stream(text: str) -> StreamState:
    """Parse the plugin's JSON-lines stream. A last line cut short by a crash is ignored."""
    state = StreamState()
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # the process died mid-write
        if "collected" in record:
            state.collected = list(record["collected"])
        elif "start" in record:
            state.in_flight = record["start"]
        elif "test" in record:
            key = record["test"]
            state.outcomes[key] = Outcome(record["outcome"], record.get("message"),
                                          record.get("seconds"))
            if state.in_flight == key:
                state.in_flight = None
    return state


# A whole number token: not the 32 of "f32", not the 0 of "0x…".
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(\.\d+)?([eE][-+]?\d+)?(?!\w)")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


def cause_of(outcome: Outcome) -> str:
    """A short name for why a test did not pass, the same for tests that failed alike:
    the status, the exception type and the first non-empty line of its message, with
    numbers and addresses blanked (shapes, tolerances and values differ between cases)."""
    if outcome.status == PASSED:
        return PASSED
    message = (outcome.message or "").strip()
    if outcome.status in (FAILED, ERROR):
        kind, _, rest = message.partition(":")
        if not rest or " " in kind.strip():  # no "ExcType: ..." shape
            kind, rest = "", message
        lines = [ln.strip() for ln in rest.splitlines() if ln.strip()]
        first = lines[0] if lines else ""
        text = f"{kind.strip()}: {first}" if kind.strip() else first
    else:
        lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
        text = lines[0] if lines else ""
    text = _NUMBER.sub("N", _ADDRESS.sub("0x…", text))
    if len(text) > MAX_CAUSE:
        text = text[:MAX_CAUSE - 3] + "..."
    return f"{outcome.status}: {text}" if text else outcome.status
