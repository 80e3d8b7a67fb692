"""The pytest plugin ``openhlo jax-suite`` loads into each child pytest (``-p``).

It does two things, configured by environment variables so that the runner needs no
pytest option of its own:
- selection: keep a deterministic sample of the collected tests (``SAMPLE_ENV``), one
  shard of them (``SHARD_ENV``, ``i/n``), or exactly the tests listed in a file
  (``SELECT_ENV``, one key a line);
- the device under test: JAX's ``jax_test_dut`` flag (``TEST_DUT_ENV``), which the tests'
  ``run_on_devices``/``skip_on_devices`` gates and tolerances read instead of the platform
  name (JAX sets it only from the command line of its own test runner);
- a stream: every event is appended to the JSON-lines file ``STREAM_ENV`` and flushed at
  once, so that the runner sees which test was running when a process crashed or hung
  (pytest's own junit XML is written only at the end and is lost in a crash).

Records: ``{"collected": [key, ...]}`` once, then per test ``{"start": key}`` and
``{"test": key, "outcome": ..., "message": ..., "seconds": ...}``. A test's key is its
pytest node id without the file part (``Class::test_name``), the same in every run of
the file. Besides pytest, this module imports only the standard library and selection.py:
it runs inside JAX's test setup.
"""
from __future__ import annotations

import json
import os
import time

import pytest

from tools.jax_suite.selection import (SAMPLE_ENV, SELECT_ENV, SHARD_ENV, STREAM_ENV,
                                      TEST_DUT_ENV, key_of, select)

MAX_MESSAGE = 2000  # characters of a failure message kept: the cause is in the first lines


class _Stream:
    def __init__(self, path: str):
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (open for the whole run)

    def write(self, record: dict) -> None:
        self.file.write(json.dumps(record) + "\n")
        self.file.flush()


class _Recorder:
    """Folds the setup/call/teardown reports of each test into one outcome."""

    def __init__(self, stream: _Stream):
        self.stream = stream
        self.pending: dict[str, dict] = {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items):
        sample = os.environ.get(SAMPLE_ENV)
        shard = os.environ.get(SHARD_ENV)
        only_path = os.environ.get(SELECT_ENV)
        only = None
        if only_path:
            with open(only_path, encoding="utf-8") as f:
                only = {line.rstrip("\n") for line in f if line.strip()}
        keep = select([key_of(i.nodeid) for i in items], int(sample) if sample else None,
                      tuple(int(p) for p in shard.split("/")) if shard else None, only)
        kept = [i for i in items if key_of(i.nodeid) in keep]
        dropped = [i for i in items if key_of(i.nodeid) not in keep]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept
        self.stream.write({"collected": [key_of(i.nodeid) for i in kept]})

    def pytest_runtest_logstart(self, nodeid, location):
        key = key_of(nodeid)
        self.pending[key] = {"test": key, "outcome": "passed", "message": None,
                             "start": time.monotonic()}
        self.stream.write({"start": key})

    def pytest_runtest_logreport(self, report):
        record = self.pending.get(key_of(report.nodeid))
        if record is None:
            return
        if report.skipped and record["outcome"] == "passed":
            record["outcome"] = "skipped"
            record["message"] = _skip_reason(report)
        elif report.failed and record["outcome"] in ("passed", "skipped"):
            # A failure in setup or teardown is an error of the test's fixture, not the test.
            record["outcome"] = "failed" if report.when == "call" else "error"
            record["message"] = _failure_message(report)
        if report.when == "teardown":
            del self.pending[record["test"]]
            record["seconds"] = round(time.monotonic() - record.pop("start"), 3)
            self.stream.write(record)


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # (file, line, "Skipped: why")
        return str(longrepr[2])
    return str(getattr(report, "wasxfail", "") or longrepr)


def _failure_message(report) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    message = getattr(crash, "message", None) or str(report.longrepr).strip().splitlines()[-1:]
    if isinstance(message, list):
        message = message[0] if message else ""
    return message[:MAX_MESSAGE]


def pytest_configure(config):
    dut = os.environ.get(TEST_DUT_ENV)
    if dut:
        import jax
        from jax._src import test_util  # noqa: F401 - defines the jax_test_dut flag
        jax.config.update("jax_test_dut", dut)
    path = os.environ.get(STREAM_ENV)
    if path:
        config.pluginmanager.register(_Recorder(_Stream(path)), "openhlo_jax_suite_recorder")
