"""Calibration: ranges per method, observing values of a running program, input files."""
from __future__ import annotations

import numpy as np
import pytest

from xla_core.quantization import QuantizationError
from xla_core.quantization.calibration import choose_range, load_input_sets, observe
from xla_core.quantization.tests.programs import random_mlp
from xla_core.quantization.units import find_units


def _heavy_tailed():
    rng = np.random.default_rng(0)
    values = rng.standard_normal(20000).astype(np.float32)
    values[:5] = [40.0, -35.0, 30.0, 38.0, -32.0]   # a few outliers
    return values


def test_minmax_percentile_and_mse_ranges():
    values = _heavy_tailed()
    assert choose_range([values], "minmax", 99.99) == (-35.0, 40.0)
    low, high = choose_range([values], "percentile", 99.9)
    assert (low, high) == pytest.approx((np.percentile(values, 0.1),
                                         np.percentile(values, 99.9)))
    assert high < 5
    mse_low, mse_high = choose_range([values], "mse", 99.99)
    assert mse_high < 40.0   # clipping the outliers costs less than the coarse step

    def mse(lo, hi):
        scale = (hi - lo) / 255
        zp = np.round(-128 - lo / scale)
        q = np.clip(np.round(values / scale) + zp, -128, 127)
        return np.mean(((q - zp) * scale - values) ** 2)
    assert mse(mse_low, mse_high) < mse(-35.0, 40.0)


def test_observe_returns_the_values_of_each_set():
    program, weights = random_mlp(0)
    sets = [[np.random.default_rng(i).standard_normal((4, 16)).astype(np.float32)]
            for i in range(2)]

    def hidden(func):   # the lhs of the second dot: relu(x W0 + b0)
        return [find_units(func)[1].op.operands[0]]
    observed = observe(program, "main", hidden, sets)
    for (x,), (value,) in zip(sets, observed):
        expected = np.maximum(x @ weights[0][0] + weights[0][1], 0)
        np.testing.assert_allclose(value, expected, rtol=1e-5, atol=1e-6)


def test_input_sets_from_npz_files(tmp_path):
    program, _ = random_mlp(0)
    func = program.lookup("main")
    one = tmp_path / "one.npz"
    np.savez(one, arg0=np.zeros((4, 16), np.float32))
    stacked = tmp_path / "stacked.npz"
    np.savez(stacked, arg0=np.ones((3, 4, 16), np.float32))
    sets = load_input_sets([str(one), str(stacked)], func)
    assert len(sets) == 4 and all(s[0].shape == (4, 16) for s in sets)
    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, x=np.zeros((4, 16), np.float32))
    with pytest.raises(QuantizationError, match="wrong.npz: has x, @main takes arg0"):
        load_input_sets([str(wrong)], func)
