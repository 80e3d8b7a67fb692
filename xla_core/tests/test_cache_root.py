"""xla_core.cache_root: one root for every OpenHLO cache, and the test session's is temporary
(the root conftest.py)."""
from __future__ import annotations

import os
import pathlib

from xla_core.cache_root import CACHE_DIR_ENV, cache_root, openhlo_cache_home
from xla_core.cost import calibrate


def test_the_session_cache_is_under_the_sessions_temporary_folder(tmp_path_factory):
    session = pathlib.Path(tmp_path_factory.getbasetemp()).resolve()
    root = pathlib.Path(os.environ[CACHE_DIR_ENV]).resolve()
    assert session in root.parents
    assert pathlib.Path(cache_root()).resolve() == root
    assert pathlib.Path(calibrate.cache_dir()).resolve() == root / "hardware"
    home = pathlib.Path(os.path.expanduser("~"), ".cache").resolve()
    assert home not in root.parents


def test_the_variable_moves_the_root(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "elsewhere"))
    assert cache_root("cpu_kernels") == str(tmp_path / "elsewhere" / "cpu_kernels")


def test_default_root_is_under_the_users_cache_home(monkeypatch, tmp_path):
    monkeypatch.delenv(CACHE_DIR_ENV, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_root("hardware") == str(tmp_path / ".cache" / "openhlo" / "hardware")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == openhlo_cache_home() == str(tmp_path / "xdg" / "openhlo")
    monkeypatch.setenv(CACHE_DIR_ENV, "")  # empty: unset
    assert cache_root() == str(tmp_path / "xdg" / "openhlo")
