"""Calibration: measures, caches per machine, and reuses the cache."""
import json
import os

import pytest

from xla_core.cost import calibrate as calibrate_module
from xla_core.cost import hardware

# Small enough for a test; the first tiny matmul may pay thread start-up, so the plausibility
# range below is wide (the real calibration uses 512..1024 and reports about 2e11 here).
TINY = {"sizes": (256,), "nbytes": 1 << 20, "repeats": 3}


@pytest.fixture
def cache_root(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENHLO_CACHE_DIR", str(tmp_path))
    return tmp_path


def _no_measuring(*args, **kwargs):
    raise AssertionError("measured although the cache should have answered")


def test_measures_writes_cache_and_reuses_it(cache_root, monkeypatch):
    first = calibrate_module.calibrate(**TINY)
    path = calibrate_module.cache_path()
    assert path.startswith(str(cache_root / "hardware"))
    assert os.path.isfile(path)
    with open(path) as f:
        assert json.load(f) == first
    assert 1e8 <= first["peak_flops"] <= 1e14
    assert 1e8 <= first["memory_bandwidth"] <= 1e13
    assert first["cores"] >= 1 and first["host_key"] == calibrate_module.host_key()

    monkeypatch.setattr(calibrate_module, "measure_machine", _no_measuring)
    assert calibrate_module.calibrate(**TINY) == first
    cpu = hardware("cpu")  # the lazy registry entry reads the same cache
    assert (cpu.peak_flops, cpu.memory_bandwidth, cpu.cores) == \
        (first["peak_flops"], first["memory_bandwidth"], first["cores"])


def test_refresh_and_stale_cache_measure_again(cache_root, monkeypatch):
    calibrate_module.calibrate(**TINY)
    path = calibrate_module.cache_path()
    calls = []
    real = calibrate_module.measure_machine

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(calibrate_module, "measure_machine", counting)
    calibrate_module.calibrate(refresh=True, **TINY)
    assert len(calls) == 1
    for broken in ("{not json", json.dumps({"version": 0})):
        with open(path, "w") as f:
            f.write(broken)
        assert calibrate_module.calibrate(**TINY)["peak_flops"] > 0
    assert len(calls) == 3


def test_cache_is_keyed_by_machine(cache_root, monkeypatch):
    monkeypatch.setattr(calibrate_module, "host_key", lambda: "other-box|Some CPU|64")
    assert calibrate_module.cache_path() != calibrate_module.cache_path("vm|AMD EPYC|2")
    assert os.path.basename(calibrate_module.cache_path()).startswith("other-box-")


def test_default_location_without_env(monkeypatch, tmp_path):
    monkeypatch.delenv("OPENHLO_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert calibrate_module.cache_dir() == str(tmp_path / ".cache" / "openhlo" / "hardware")
