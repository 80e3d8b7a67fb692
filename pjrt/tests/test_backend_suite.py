"""The backend suite (pjrt/testing) can fail: backends that break one promise of the contract
fail the check of that promise, and only it; a backend that refuses programs is skipped
where it refuses; a one-device backend skips the multi-device checks. (Every registered
backend passing the suite, with a conformance slice: tools/tests/test_backend_check.py.)"""
from __future__ import annotations

import numpy as np
import pytest

from pjrt.api import UnimplementedError
from pjrt.host import HostBuffer, HostClient
from pjrt.plugins.compile_driver import CompileDriverMixin
from pjrt.plugins.interpreter.plugin import InterpreterClient, InterpreterProgram
from pjrt.registry import BACKENDS, register_plugin
from pjrt.testing import FAIL, PASS, SKIP, run_suite, summary_table


@pytest.fixture
def isolated_backends(monkeypatch):
    monkeypatch.setattr(BACKENDS, "_entries", dict(BACKENDS._entries))
    return BACKENDS


def _verdicts(backend: str, **options) -> dict:
    return {(r.area, r.name): r for r in run_suite(backend, options or None)}


class _OffByOne(InterpreterProgram):
    """Adds 1 to every floating-point result."""

    def run(self, args, replica_id, partition_id, grid):
        results = super().run(args, replica_id, partition_id, grid)
        return [r + np.ones((), r.dtype) if isinstance(r, np.ndarray) and r.dtype.kind == "f"
                else r for r in results]


class _WrongResults(InterpreterClient):
    platform_name = "wrong"

    def compile_program(self, module, entry, options):
        return _OffByOne(module, entry, None)


class _WritableBuffer(HostBuffer):
    def to_numpy(self):
        return np.array(super().to_numpy())  # a writable copy: breaks "read-only"


class _WritableBuffers(InterpreterClient):
    platform_name = "writable"

    def buffer_from_numpy(self, array, device=None):
        buffer = super().buffer_from_numpy(array, device)
        return _WritableBuffer(self, buffer.device, buffer._storage, buffer.dtype, buffer.shape)


class _RefusesEverything(CompileDriverMixin, HostClient):
    platform_name = "refusing"

    def compile_program(self, module, entry, options):
        op = module.lookup(entry).body.operations[0]
        raise UnimplementedError(f"{op.where()} is not supported by the refusing backend")


def test_a_backend_with_wrong_results_fails_the_checks_that_compute(isolated_backends):
    register_plugin("wrong", _WrongResults)
    verdicts = _verdicts("wrong")
    failed = {key for key, r in verdicts.items() if r.status == FAIL}
    assert ("execution", "execute buffers and host arrays") in failed
    assert ("donation", "donation deletes the donated buffer") in failed
    assert ("multi-device", "execute sharded with all reduce") in failed
    message = verdicts[("events", "events of buffers and executions")].message
    assert message.startswith("add: got [[")
    # What computes nothing still passes.
    assert verdicts[("buffers", "buffer round trip")].status == PASS
    assert verdicts[("compile errors", "compile errors name the place")].status == PASS


def test_writable_host_copies_fail_the_buffer_check_only(isolated_backends):
    register_plugin("writable", _WritableBuffers)
    verdicts = _verdicts("writable")
    failed = {key: r.message for key, r in verdicts.items() if r.status == FAIL}
    assert failed == {("buffers", "buffer round trip"): "to_numpy() returned a writable array"}


def test_refused_programs_and_missing_devices_are_skipped(isolated_backends):
    register_plugin("refusing", lambda: _RefusesEverything(num_devices=1))
    results = run_suite("refusing")
    verdicts = {(r.area, r.name): r for r in results}
    refused = verdicts[("execution", "execute buffers and host arrays")]
    assert refused.status == SKIP
    assert "refuses the program" in refused.message and "refusing backend" in refused.message
    needs_two = verdicts[("buffers", "buffer copy to device")]
    assert (needs_two.status, needs_two.message) == (SKIP, "needs 2 devices, the client has 1")
    assert verdicts[("devices", "identity and devices")].status == PASS
    assert verdicts[("compile errors", "compile errors name the place")].status == PASS
    table = summary_table(results, "refusing")
    assert "execution          0     0     5  skipped" in table


def test_a_backend_that_cannot_make_a_client_fails_every_check(isolated_backends):
    def broken(**options):
        raise RuntimeError("no device found")
    register_plugin("broken", broken)
    results = run_suite("broken")
    assert results and all(r.status == FAIL for r in results)
    assert "no device found" in results[0].message
