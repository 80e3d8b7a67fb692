"""Every tier of a program gives the same bits (issue 14).

A program compiled with a cold kernel cache runs op by op on the native kernels until its
generated kernels are compiled (tiering.py); the results must not change when they swap in.
This runs a representative slice of programs on both tiers and compares the bits
(``python -m tools.tier_bits`` runs the whole set: the fused programs and every testdata file).
"""
import os

import numpy as np
import pytest

from pjrt.plugins.cpu.blas import gemm_bits_depend_on_panels
from pjrt.plugins.cpu.codegen import mathlib
from pjrt.plugins.cpu.tests import tier_bits
from xla_core.testing.conformance import conformance_dir

FUSED_SLICE = [
    f"{name}_{T}"
    for T in ("f32", "f64")
    for name in ("exp_log", "tanh_logistic", "erf_chain", "erfc_chain", "sqrt_rsqrt", "sin_cos",
                 "row_sum", "column_sum", "row_max", "column_max", "softmax", "layer_norm_gelu",
                 "dot_bias_act", "linear_bias_act")
]  # f16/bf16 values are not fused on the cpu (codegen/hook.py): they have one tier only

# Testdata programs the cpu pipeline fuses (most single-op programs have no fusion, so one
# tier only).
TESTDATA_SLICE = [
    "igamma_float32_20_20_float32_20_20_chlo.mlir",
    "igammac_float64_20_20_float64_20_20_chlo.large.mlir",
    "random_gamma_float32_3_chlo.mlir", "random_categorical_float32_8.mlir",
    "regularized_incomplete_beta_float32_9_float32_9_float32_9_chlo.mlir",
    "pow_float32_4_1_6_float32_4_5_6.mlir", "logistic_float64_20_20.mlir",
    "max_float32_1_20_float32_20_20.mlir", "mul_float32_20_20_float32_1_20.mlir",
    "rem_float32_2_4_3_float32_2_1_3.mlir",
    "tridiagonal_solve_float64_3_float64_3_float64_3_float64_3_1.mlir",
    "select_n_int32_18_float32_18_float32_18_float32_18.mlir",
]


@pytest.fixture
def cold_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENHLO_CACHE_DIR", str(tmp_path))


def _assert_same(first, optimized):
    for i, (a, b) in enumerate(zip(first, optimized)):
        assert tier_bits.same_bits(a, b), (
            f"result #{i} differs between the tiers by up to {tier_bits.max_ulps(a, b)} ulp")


def test_native_kernels_use_the_current_mathlib():
    path = os.path.join(os.path.dirname(mathlib.__file__), "..", "native", "_generated",
                        "mathlib.h")
    with open(path) as f:
        assert f.read() == mathlib.header(), (
            "native/_generated/mathlib.h is stale: run python -m pjrt.plugins.cpu.codegen.mathlib"
            " and rebuild the native library")


@pytest.mark.parametrize("name", FUSED_SLICE)
def test_fused_program_gives_the_same_bits_on_both_tiers(name, cold_cache):
    text = tier_bits.FUSED[name]
    first, optimized, generated = tier_bits.run_tiers(text, tier_bits.fused_inputs(text))
    assert generated >= 1
    if "dot_general" in text and gemm_bits_depend_on_panels():
        # The tiers cut the GEMM into other panels, and this BLAS sums by panel
        # (pjrt/plugins/cpu/blas.py): the same products, rounded in another order, so
        # the dots differ by rounding of sums of _D products of unit normals (a few eps
        # x _D) and the activations after them (slopes <= 1) by no more.
        for a, b in zip(first, optimized, strict=True):
            np.testing.assert_allclose(a, b, rtol=0,
                                       atol=4 * np.finfo(b.dtype).eps * tier_bits._D)
        return
    _assert_same(first, optimized)


@pytest.mark.parametrize("file", TESTDATA_SLICE)
def test_testdata_program_gives_the_same_bits_on_both_tiers(file, cold_cache):
    folder = conformance_dir("testdata")
    if folder is None or not (folder / file).exists():
        pytest.skip(f"no conformance file {file}")
    case = tier_bits.conformance_case((folder / file).read_text())
    assert case is not None
    try:
        first, optimized, _ = tier_bits.run_tiers(*case)
    except tier_bits.NoFirstTier:
        pytest.skip("nothing of this program is generated")
    _assert_same(first, optimized)
