"""Each mode on a small MLP and CNN: upstream MLIR verifies the output, the lowered integer
program runs alike on the interpreter and the cpu backend and agrees with the interpreter's
quantized semantics, and the error against float stays within a bound set by the scales."""
from __future__ import annotations

import numpy as np
import pytest

from stablehlo.builder import Builder
from stablehlo.ir.types import F32, tensor
from stablehlo.text import print_module
from xla_core.quantization import MODES, QuantizationError, quantize
from xla_core.quantization.tests.helpers import (assert_upstream_verifies, interpret,
                                                 lowered, run_cpu)
from xla_core.quantization.tests.programs import random_cnn, random_mlp

RNG = np.random.default_rng(7)
MLP_INPUT = RNG.standard_normal((4, 16)).astype(np.float32)
CNN_INPUT = RNG.standard_normal((2, 6, 6, 3)).astype(np.float32)


def _programs():
    return {"mlp": (random_mlp(0)[0], MLP_INPUT), "cnn": (random_cnn(1), CNN_INPUT)}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_mode_verifies_lowers_and_runs_alike(mode, name):
    program, x = _programs()[name]
    quantized, report = quantize(program, mode, calibration=[[x]], group_size=4)
    assert len(report.quantized) == len(report.entries) > 0
    assert "!quant.uniform" in print_module(quantized)
    assert_upstream_verifies(quantized)
    integer = lowered(quantized)
    assert "quant" not in print_module(integer)
    on_interpreter = interpret(integer, x)
    on_cpu = run_cpu(integer, x)
    semantics = interpret(quantized, x)
    if mode in ("dynamic-int8", "static-int8"):
        # integer dots and IEEE elementwise ops only: bit for bit
        np.testing.assert_array_equal(on_cpu, on_interpreter)
    else:
        # float dots on dequantized weights: BLAS and numpy sum in different orders
        np.testing.assert_allclose(on_cpu, on_interpreter, rtol=1e-5, atol=1e-6)
    # The interpreter's quantized ops compute in f32; the lowering's integer sums are exact
    # and its quantize/dequantize steps are the interpreter's own f32 operations.
    np.testing.assert_allclose(on_interpreter, semantics, rtol=1e-5, atol=1e-6)
    float_result = interpret(program, x)
    scale = np.abs(float_result).max()
    assert np.abs(semantics - float_result).max() < 0.25 * scale   # coarse; bounds below


def _dense_program(weight: np.ndarray, batch: int):
    b = Builder()
    with b.function("main", [tensor((batch, weight.shape[0]), F32)]) as (_, (x,)):
        b.return_(b.dot_general(x, b.constant(weight), contracting=((1,), (0,))))
    return b.module


def _int8_weight_steps(report, weight):
    """The per-(row, column) int8 weight step the report's choice implies (``max|w| / 127``
    per output column), shape of ``weight``."""
    assert report.entries[0]["weight"]["granularity"] == "per-channel"
    return np.broadcast_to(np.abs(weight.astype(np.float64)).max(axis=0) / 127, weight.shape)


def _int4_group_error_norms(weight, group_size):
    """Per (group, output column), the 2-norm of the rounding error of ``max|w| / 7``
    symmetric int4 over the group's ``group_size`` rows of ``weight`` (the least-error scale
    the quantizer searches is never worse); shape ``[K / group_size, N]``."""
    groups = weight.astype(np.float64).reshape(-1, group_size, weight.shape[1])
    step = np.abs(groups).max(axis=1, keepdims=True) / 7
    error = np.clip(np.rint(groups / step), -8, 7) * step - groups
    return np.sqrt(np.square(error).sum(axis=1))


@pytest.mark.parametrize("mode", MODES)
def test_dense_error_within_the_rounding_bound(mode):
    """|y_q - y| <= sum_k |x_k| dw_kn/2 + |w_kn| dx/2 + dx dw_kn/4 (each weight and
    activation off by at most half its step; dx = 0 for weight-only), plus f32 slack. int4
    clips: per group g, |x_g . e_g| <= |x_g| |e_g| (Cauchy-Schwarz), and the group's error
    norm |e_g| is at most that of rounding with ``max|w| / 7``."""
    rng = np.random.default_rng(3)
    weight = rng.standard_normal((64, 8)).astype(np.float32)
    x = rng.standard_normal((5, 64)).astype(np.float32)
    program = _dense_program(weight, 5)
    quantized, report = quantize(program, mode, calibration=[[x]], group_size=16)
    result = interpret(quantized, x).astype(np.float64)
    exact = x.astype(np.float64) @ weight.astype(np.float64)
    ax, aw = np.abs(x.astype(np.float64)), np.abs(weight.astype(np.float64))
    if mode == "weight-int4":
        x_norms = np.sqrt(np.square(x.astype(np.float64)).reshape(5, -1, 16).sum(axis=2))
        bound = x_norms @ _int4_group_error_norms(weight, 16) * (1 + 1e-6)
    else:
        dw = _int8_weight_steps(report, weight)
        dx = 0.0
        if mode == "dynamic-int8":
            dx = np.abs(x).max() / 127
        elif mode == "static-int8":
            dx = report.entries[0]["activation"]["scale"]
        bound = ax @ dw / 2 + dx / 2 * aw.sum(axis=0) + dx * dw.sum(axis=0) / 4
    slack = 1e-5 * (ax @ aw)
    assert np.all(np.abs(result - exact) <= bound + slack)
    assert np.abs(result - exact).max() > 0   # it did quantize


def test_int4_is_group_wise_and_int8_per_channel():
    weight = np.random.default_rng(0).standard_normal((64, 8)).astype(np.float32)
    program = _dense_program(weight, 2)
    _, int4 = quantize(program, "weight-int4", group_size=16)
    assert int4.entries[0]["weight"] == {**int4.entries[0]["weight"], "bits": 4,
                                         "granularity": "group-wise", "group_size": 16,
                                         "scales": 4 * 8}
    _, int8 = quantize(program, "weight-int8", granularity="per-tensor")
    assert int8.entries[0]["weight"]["granularity"] == "per-tensor"
    assert int8.entries[0]["weight"]["scales"] == 1


def test_skip_list_and_report():
    program, x = _programs()["cnn"]
    quantized, report = quantize(program, "static-int8", calibration=[[x]],
                                 skip=["convolution#1", "programs.py:999", "dot_general"])
    by_id = {e["id"]: e for e in report.entries}
    assert by_id["convolution#0"]["quantized"]
    for skipped in ("convolution#1", "dot_general#0"):
        assert not by_id[skipped]["quantized"]
        assert by_id[skipped]["reason"] == "in the skip list"
    assert report.notes == ["skip entry 'programs.py:999' names no dot_general or convolution"]
    # the skipped ops are float in the output: exactly one quantized convolution
    text = print_module(quantized)
    assert text.count("stablehlo.convolution") == 2
    assert text.count("stablehlo.uniform_quantize") == 1
    assert "dot_general %" in text and "xf32>) -> tensor<2x3xf32>" in text
    assert "convolution#0" in report.format_table()


def test_non_constant_weights_are_reported_not_quantized():
    b = Builder()
    with b.function("main", [tensor((2, 4), F32), tensor((4, 3), F32)]) as (_, (x, w)):
        b.return_(b.dot_general(x, w, contracting=((1,), (0,))))
    quantized, report = quantize(b.module, "weight-int8")
    assert report.entries[0]["reason"] == "the rhs (weight) is not a constant"
    assert "quant" not in print_module(quantized)


def test_static_needs_calibration_and_bad_options_name_themselves():
    program, _ = _programs()["mlp"]
    with pytest.raises(QuantizationError, match="static-int8 needs calibration inputs"):
        quantize(program, "static-int8")
    with pytest.raises(QuantizationError, match="unknown mode 'int3'"):
        quantize(program, "int3")
    with pytest.raises(QuantizationError, match="unknown method 'kl'"):
        quantize(program, "static-int8", method="kl")


def test_the_callers_module_is_left_alone():
    program, x = _programs()["mlp"]
    before = print_module(program)
    quantize(program, "static-int8", calibration=[[x]])
    assert print_module(program) == before
