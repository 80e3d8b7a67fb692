"""Test-session settings for every test folder: the session's caches live in a temporary
folder, never in the user's ``~/.cache/openhlo``, and a user's ``OPENHLO_HARDWARE`` does not
change what the cost model reads."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session", autouse=True)
def _session_cache_root(tmp_path_factory):
    """Points ``OPENHLO_CACHE_DIR`` (the root of every OpenHLO cache, xla_core.cache_root) at
    a fresh folder for the session, so the tests neither write into the user's real cache
    nor read programs and kernels a previous run left there; subprocesses inherit it. Tests
    that need a cache of their own still set the variable themselves."""
    from xla_core.cache_root import CACHE_DIR_ENV
    from xla_core.cost.hardware import HARDWARE_ENV
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_DIR_ENV, str(tmp_path_factory.mktemp("openhlo-cache")))
        patch.delenv(HARDWARE_ENV, raising=False)
        yield


@pytest.fixture(autouse=True)
def _cpu_opt_level_restored(monkeypatch):
    """``openhlo run/opt --opt-level`` set ``OPENHLO_CPU_OPT_LEVEL`` in the calling process,
    which CLI tests share with every later test: teardown restores the variable as it was
    (setenv records its state; delenv alone records nothing when it is unset)."""
    monkeypatch.setenv("OPENHLO_CPU_OPT_LEVEL", "1")
    monkeypatch.delenv("OPENHLO_CPU_OPT_LEVEL")
