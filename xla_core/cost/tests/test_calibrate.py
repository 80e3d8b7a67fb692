"""Calibration: measures, caches per machine, and reuses the cache."""
import json
import os

import pytest

from xla_core.cost import calibrate as calibrate_module
from xla_core.cost import hardware

# Small enough for a test; the first tiny matmul may pay thread start-up, so the plausibility
# range below is wide (the real calibration uses 32..1024 and reports about 2e11 here).
TINY = {"sizes": (32, 256), "nbytes": 1 << 20, "repeats": 3}


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
    # one rate per size (2 n^3 flops), the best of which is the peak
    assert [f for f, _ in first["matmul_curve"]] == [2.0 * 32 ** 3, 2.0 * 256 ** 3]
    assert max(r for _, r in first["matmul_curve"]) == first["peak_flops"]

    monkeypatch.setattr(calibrate_module, "measure_machine", _no_measuring)
    assert calibrate_module.calibrate(**TINY) == first
    cpu = hardware("cpu")  # the lazy registry entry reads the same cache
    assert (cpu.peak_flops, cpu.memory_bandwidth, cpu.cores) == \
        (first["peak_flops"], first["memory_bandwidth"], first["cores"])
    assert cpu.matmul_curve == tuple(tuple(p) for p in first["matmul_curve"])


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
    # a version-1 record (before matmul_curve) is stale too
    version_1 = {k: v for k, v in calibrate_module.calibrate(**TINY).items()
                 if k != "matmul_curve"} | {"version": 1}
    for broken in ("{not json", json.dumps({"version": 0}), json.dumps(version_1)):
        with open(path, "w") as f:
            f.write(broken)
        assert calibrate_module.calibrate(**TINY)["peak_flops"] > 0
    assert len(calls) == 4


def test_cache_is_keyed_by_machine(cache_root, monkeypatch):
    monkeypatch.setattr(calibrate_module, "host_key", lambda: "other-box|Some CPU|64")
    assert calibrate_module.cache_path() != calibrate_module.cache_path("vm|AMD EPYC|2")
    assert os.path.basename(calibrate_module.cache_path()).startswith("other-box-")


def test_default_location_without_env(monkeypatch, tmp_path):
    monkeypatch.delenv("OPENHLO_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert calibrate_module.cache_dir() == str(tmp_path / ".cache" / "openhlo" / "hardware")


@pytest.mark.parametrize("latency, bandwidth", [(20e-6, 4e9), (0.0, 1e9), (3e-3, 5e7)])
def test_fit_recovers_latency_and_bandwidth_from_exact_timings(latency, bandwidth):
    nbytes = [4096, 65536, 1 << 20, 4 << 20, 65536]
    seconds = [latency + b / bandwidth for b in nbytes]
    fit = calibrate_module.fit_latency_bandwidth(nbytes, seconds)
    assert (fit.latency, fit.bandwidth) == pytest.approx((latency, bandwidth), rel=1e-9,
                                                         abs=1e-15)


def test_fit_gives_each_kind_its_latency_and_one_bandwidth():
    # an all-gather with a 7 ms fixed cost, an all-reduce with 70 us, both at 2 GB/s; the
    # all-gather measured at one size only: its latency still follows from the shared slope
    reduce_sizes, gather_sizes = [4096, 1 << 20, 4 << 20], [1 << 20]
    nbytes = reduce_sizes + gather_sizes
    seconds = [70e-6 + b / 2e9 for b in reduce_sizes] + [7e-3 + b / 2e9 for b in gather_sizes]
    kinds = ["all_reduce"] * 3 + ["all_gather"]
    fit = calibrate_module.fit_latency_bandwidth(nbytes, seconds, kinds)
    assert fit.bandwidth == pytest.approx(2e9, rel=1e-9)
    assert fit.latencies == pytest.approx({"all_reduce": 70e-6, "all_gather": 7e-3}, rel=1e-9)
    assert fit.latency == pytest.approx((70e-6 + 7e-3) / 2, rel=1e-9)


def test_fit_clamps_a_negative_latency():
    # exact timings of 1 GB/s less 5 us: the intercept would be negative; through the origin,
    # the slope is the relative-error fit's sum((x/t)^2) / sum(x/t)
    nbytes = [1e5, 1e6, 1e7]
    seconds = [b / 1e9 - 5e-6 for b in nbytes]
    ratios = [b / t for b, t in zip(nbytes, seconds)]
    fit = calibrate_module.fit_latency_bandwidth(nbytes, seconds)
    assert fit.latency == 0.0
    assert fit.bandwidth == pytest.approx(sum(r * r for r in ratios) / sum(ratios), rel=1e-12)


@pytest.mark.parametrize("nbytes, seconds, message", [
    ([1e6, 1e6], [1e-3, 2e-3], "at least two sizes"),
    ([1e5, 1e6], [1e-3, -1e-3], "positive times"),
    ([1e5, 1e6], [2e-3, 1e-3], "do not grow"),
])
def test_fit_refuses_what_it_cannot_fit(nbytes, seconds, message):
    with pytest.raises(calibrate_module.CalibrationError, match=message):
        calibrate_module.fit_latency_bandwidth(nbytes, seconds)
