"""Every registered backend passes the backend conformance suite (the runtime contract's
checks and a slice of the conformance programs, whose check ops are the oracle), and
``openhlo backend-check`` prints the verdicts per area with the right exit status. The
template backend, installed with pip, runs the same suite in
pjrt/tests/test_backend_template.py."""
from __future__ import annotations

import pytest

from pjrt.errors import UnavailableError
from pjrt.registry import BACKENDS, available_backends, register_plugin
from pjrt.testing import PASS, failures, run_suite
from tools.backend_check import conformance_checks
from tools.tests.helpers import run_cli
from xla_core.testing.conformance import conformance_dir


def skip_without_device(backend: str) -> None:
    """Skip a backend whose device this machine lacks (cuda without a driver): its factory
    raises UnavailableError, which only a machine with the device can cure."""
    try:
        BACKENDS.get(backend)().close()
    except UnavailableError as exc:
        pytest.skip(f"{backend}: {exc}")


@pytest.mark.parametrize("backend", available_backends())
def test_every_registered_backend_passes_the_suite(backend, monkeypatch):
    skip_without_device(backend)
    # The cpu backend's generated kernels are judged, not its first tier.
    monkeypatch.setenv("OPENHLO_CPU_ASYNC_CODEGEN", "0")
    results = run_suite(backend, extra_areas={"conformance": conformance_checks()})
    assert failures(results) == []
    contract = [r for r in results if r.area != "conformance"]
    assert all(r.status == PASS for r in contract), [r for r in contract if r.status != PASS]
    conformance = [r for r in results if r.area == "conformance"]
    if conformance_dir("testdata") is not None and conformance_dir("interpret") is not None:
        assert len(conformance) == 14 and all(r.status == PASS for r in conformance)


def test_the_command_prints_a_table_per_area(capsys):
    r = run_cli(capsys, "backend-check", "interpreter", "--no-conformance",
                "--option", "num_devices=3")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[:2] == ["backend interpreter", "area            pass  fail  skip  verdict"]
    assert "donation           2     0     0  pass" in lines
    assert lines[-1] == "21 passed, 0 failed, 0 skipped"


def test_the_command_fails_on_a_broken_contract_and_names_the_check(capsys, monkeypatch,
                                                                   tmp_path):
    from pjrt.host import HostBuffer
    from pjrt.plugins.interpreter.plugin import InterpreterClient
    monkeypatch.setattr(BACKENDS, "_entries", dict(BACKENDS._entries))

    class ForgetsDonation(InterpreterClient):
        """Runs a donating execution, then undeletes the donated buffers."""
        platform_name = "forgetful"

        def _compile(self, executable, device_assignment):
            loaded = super()._compile(executable, device_assignment)
            launch = loaded._launch

            def keep_donated(args_per_device, devices, donate, *launch_id):
                kept = [(b, b._storage) for args in args_per_device for b in args
                        if isinstance(b, HostBuffer)]
                outputs, events = launch(args_per_device, devices, donate, *launch_id)
                for buffer, storage in kept:
                    buffer._storage = storage
                return outputs, events
            loaded._launch = keep_donated
            return loaded

    register_plugin("forgetful", ForgetsDonation)
    r = run_cli(capsys, "backend-check", "forgetful", "--conformance", tmp_path)
    assert r.code == 1
    assert [line for line in r.out.splitlines() if line.startswith("fail: ")] == [
        "fail: donation / donation deletes the donated buffer: after donating argument 0 "
        "only it is deleted"]
    assert "conformance        0     0     1  skipped" in r.out  # no suites under tmp_path
    assert ("skip: conformance / conformance suites not found: the StableHLO conformance "
            "suites were not found; pass --conformance DIR") in r.out


def test_an_unknown_backend_is_an_error(capsys):
    r = run_cli(capsys, "backend-check", "nosuch")
    assert r.code == 1
    assert "unknown backend 'nosuch'; known: " in r.err


def test_options_are_python_literals_or_text(capsys):
    r = run_cli(capsys, "backend-check", "interpreter", "--option", "num_devices")
    assert r.code == 1 and "--option takes KEY=VALUE, got 'num_devices'" in r.err
