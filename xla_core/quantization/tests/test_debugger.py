"""The numeric debugger finds the layer that causes an accuracy cliff, and only that one."""
from __future__ import annotations

import json

import numpy as np

from xla_core.quantization import debug_numerics
from xla_core.quantization.tests.programs import mlp

SIZES = (16, 32, 32, 8)


def _weights(seed: int):
    rng = np.random.default_rng(seed)
    return [((rng.standard_normal((m, n)) / np.sqrt(m)).astype(np.float32),
             (0.1 * rng.standard_normal(n)).astype(np.float32))
            for m, n in zip(SIZES[:-1], SIZES[1:])]


def _sets(count: int = 3):
    rng = np.random.default_rng(1)
    return [[rng.standard_normal((8, SIZES[0])).astype(np.float32)] for _ in range(count)]


def test_outlier_weight_channel_under_per_tensor_scales_is_flagged():
    weights = _weights(0)
    weights[1][0][:, 3] *= 300.0   # one output channel of layer 1 dwarfs the others
    program = mlp(weights, 8)
    per_tensor = debug_numerics(program, "weight-int8", _sets(), granularity="per-tensor")
    assert "dot_general#1" in per_tensor.flagged
    worst = {layer["id"]: layer["isolated"]["worst_channel_sqnr_db"]
             for layer in per_tensor.layers}
    assert worst["dot_general#1"] < min(worst["dot_general#0"], worst["dot_general#2"]) - 15
    bad = per_tensor.layer("dot_general#1")["isolated"]
    # the whole layer's SQNR, dominated by the large channel, looks fine; the small
    # channels' weights all round to a few steps, which the worst channel shows
    assert bad["sqnr_db"] > 30 and bad["worst_channel_sqnr_db"] < 10
    per_channel = debug_numerics(program, "weight-int8", _sets(), granularity="per-channel")
    assert per_channel.flagged == []


def test_outlier_activation_channel_is_flagged_in_the_layer_that_reads_it():
    weights = _weights(0)
    weights[0][1][5] = 200.0        # layer 0 output channel 5 is huge ...
    weights[1][0][5, :] = 1e-4      # ... and layer 1 hardly uses it: a per-tensor x scale
    program = mlp(weights, 8)       # of ~200/255 wipes out layer 1's other inputs
    report = debug_numerics(program, "static-int8", _sets())
    assert report.flagged == ["dot_general#1"]
    layer2 = report.layer("dot_general#2")
    # isolated, the last layer is fine; cumulative, it inherits layer 1's error
    assert layer2["isolated"]["sqnr_db"] > 30 > 20 > layer2["cumulative"]["sqnr_db"]
    assert report.outputs[0]["sqnr_db"] < 20
    data = json.loads(report.to_json())
    assert data["flagged"] == ["dot_general#1"]
    assert "below threshold" in report.format_table()


def test_clean_program_is_not_flagged_and_errors_are_small():
    report = debug_numerics(mlp(_weights(2), 8), "static-int8", _sets())
    assert report.flagged == []
    for layer in report.layers:
        assert layer["isolated"]["relative"] < 0.03
        assert layer["isolated"]["max_abs"] > 0
