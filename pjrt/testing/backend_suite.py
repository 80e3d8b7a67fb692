"""The backend conformance suite: what every registered backend must do, checked by name.

``run_suite("mine")`` makes clients of a registered backend and runs every check of
``AREAS`` (contract_checks.py: devices, buffers, events, execution, multi-device, donation,
deleted buffers, argument errors, compile errors, failures); callers may add areas of their
own (``openhlo backend-check`` adds a slice of the StableHLO conformance programs,
tools/backend_check.py). Each check passes, fails (naming what differed), or is skipped
with the reason: it needs two devices and the backend has one, or the backend refuses the
program at compile time (``UnimplementedError``: a backend may run a subset of the ops).
``summary_table`` prints the verdicts per area.

Vendors import this module from an installed OpenHLO; it needs numpy only (no pytest).
The expected values are computed with numpy, independently of every backend.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Callable, Optional

PASS, FAIL, SKIP = "pass", "fail", "skip"


class CheckFailed(Exception):
    """A check saw the backend break the contract; the message says how."""


class Skipped(Exception):
    """A check that does not apply to this backend; the message says why."""


@dataclasses.dataclass(frozen=True)
class CheckResult:
    area: str
    name: str
    status: str  # PASS, FAIL or SKIP
    message: str = ""
    seconds: float = 0.0


class Suite:
    """What checks get: the backend's name and options, a shared client and fresh ones.

    ``options`` go to the backend's factory; when None the suite asks for two devices
    (``num_devices=2``) and falls back to the backend's defaults if it does not take the
    option."""

    def __init__(self, backend: str, options: Optional[dict] = None):
        self.backend = backend
        self.options = options
        self._client = None

    def make_client(self):
        """A fresh client (for checks that close it or compare two clients)."""
        from pjrt.registry import make_client
        from pjrt.errors import PluginError
        if self.options is not None:
            return make_client(self.backend, **self.options)
        try:
            client = make_client(self.backend, num_devices=2)
        except PluginError:  # a backend with a fixed device count
            self.options = {}
            return make_client(self.backend)
        self.options = {"num_devices": 2}
        return client

    @property
    def client(self):
        """The client most checks share."""
        if self._client is None:
            self._client = self.make_client()
        return self._client

    def devices(self, count: int) -> list:
        """The first ``count`` addressable devices; skips the check when there are fewer."""
        devices = self.client.addressable_devices()
        if len(devices) < count:
            raise Skipped(f"needs {count} devices, the client has {len(devices)}")
        return devices[:count]

    def compile(self, text: str, options=None, client=None):
        """``text`` compiled; a program the backend refuses (``UnimplementedError``) skips
        the check."""
        from pjrt.errors import UnimplementedError
        try:
            return (client or self.client).compile(text, options)
        except UnimplementedError as exc:
            raise Skipped(f"the backend refuses the program: {exc}") from None


Check = Callable[[Suite], None]
"""A check: a function named for what it checks, or a callable with a ``check_name``."""


def run_suite(backend: str, options: Optional[dict] = None, *, areas: Optional[dict] = None,
              extra_areas: Optional[dict] = None,
              on_result: Optional[Callable[[CheckResult], None]] = None) -> list:
    """Every check of ``areas`` (default: ``AREAS``) and then of ``extra_areas`` on
    ``backend``; returns the ``CheckResult``s in order. ``on_result`` sees each as it
    comes. A client that cannot be made fails every check with the reason."""
    from pjrt.testing.contract_checks import AREAS
    suite = Suite(backend, options)
    chosen = dict(AREAS if areas is None else areas)
    chosen.update(extra_areas or {})
    results = []
    for area, checks in chosen.items():
        for check in checks:
            result = run_check(suite, area, check)
            results.append(result)
            if on_result is not None:
                on_result(result)
    return results


def run_check(suite: Suite, area: str, check: Check) -> CheckResult:
    """One check's verdict; never raises (but for KeyboardInterrupt)."""
    name = getattr(check, "check_name", None) or check.__name__.replace("_", " ")
    start = time.perf_counter()
    try:
        check(suite)
    except Skipped as exc:
        return CheckResult(area, name, SKIP, str(exc), time.perf_counter() - start)
    except CheckFailed as exc:
        return CheckResult(area, name, FAIL, str(exc), time.perf_counter() - start)
    except Exception as exc:  # noqa: BLE001 - an unexpected error is the backend's failure
        return CheckResult(area, name, FAIL, f"{type(exc).__name__}: {exc}",
                           time.perf_counter() - start)
    return CheckResult(area, name, PASS, "", time.perf_counter() - start)


def failures(results: list) -> list:
    """``"area / check: message"`` of every failed check."""
    return [f"{r.area} / {r.name}: {r.message}" for r in results if r.status == FAIL]


def summary_table(results: list, backend: str) -> str:
    """One line per area (checks passed, failed, skipped), then every failure and skip
    with its message."""
    areas: dict = {}
    for r in results:
        areas.setdefault(r.area, []).append(r)
    width = max([len(a) for a in areas] + [4])
    lines = [f"backend {backend}", f"{'area':<{width}}  pass  fail  skip  verdict"]
    for area, rs in areas.items():
        counts = {s: sum(r.status == s for r in rs) for s in (PASS, FAIL, SKIP)}
        verdict = "FAIL" if counts[FAIL] else ("pass" if counts[PASS] else "skipped")
        lines.append(f"{area:<{width}}  {counts[PASS]:>4}  {counts[FAIL]:>4}  "
                     f"{counts[SKIP]:>4}  {verdict}")
    for r in results:
        if r.status != PASS:
            lines.append(f"{r.status}: {r.area} / {r.name}: {r.message}")
    total = {s: sum(r.status == s for r in results) for s in (PASS, FAIL, SKIP)}
    lines.append(f"{total[PASS]} passed, {total[FAIL]} failed, {total[SKIP]} skipped")
    return "\n".join(lines) + "\n"


def expect(condition: bool, message: str) -> None:
    """Fails the check with ``message`` unless ``condition`` (asserts vanish under -O)."""
    if not condition:
        raise CheckFailed(message)


def expect_close(actual, expected, what: str, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """``actual`` equals ``expected`` in dtype and shape, and in value within tolerance."""
    import numpy as np
    actual, expected = np.asarray(actual), np.asarray(expected)
    expect(actual.dtype == expected.dtype and actual.shape == expected.shape,
           f"{what}: got {actual.dtype}{list(actual.shape)}, expected "
           f"{expected.dtype}{list(expected.shape)}")
    expect(bool(np.allclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)),
           f"{what}: got {actual.tolist()}, expected {expected.tolist()}")


def expect_raises(error: type, call: Callable, *, contains: str = "", what: str) -> Exception:
    """``call()`` raises ``error`` whose message contains ``contains``; returns it."""
    try:
        call()
    except error as exc:
        expect(contains in str(exc),
               f"{what}: {type(exc).__name__} {str(exc)!r} does not mention {contains!r}")
        return exc
    except Exception as exc:  # noqa: BLE001 - the wrong error is the failure reported
        raise CheckFailed(f"{what}: expected {error.__name__}, got {type(exc).__name__}: "
                          f"{exc}") from None
    raise CheckFailed(f"{what}: expected {error.__name__}, nothing was raised")
