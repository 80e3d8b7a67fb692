"""Native chlo.erf and chlo.erfc (exact GELU: PyTorch lowers it with erf, jax.nn.gelu with
erfc) against float64 references from Python's math module, over the whole range: tiny and
subnormal inputs, the region around 1, the tails where erf rounds to +-1 and erfc underflows
through the subnormals to 0, infinities, signed zeros and NaN.

Bounds, and why: f32 erf uses the generated kernels' vectorized polynomial (cpp_mathlib.py),
within 4 ULP of the correctly rounded value (as tests/test_fusion_codegen_math.py checks
for the generated tier); f32 erfc, f64 and the 16-bit floats are the C library's double
function rounded once, so within 1 ULP for f32/f64 and exactly the rounded reference for
bf16 and f16 (every one of their values is tried).
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import stablehlo
from stablehlo.interpreter import evaluate

from pjrt.plugins.cpu.tests.kernel_check import run_native, single_op, ttype

_REFERENCE = {"erf": np.vectorize(math.erf, otypes=[np.float64]),
              "erfc": np.vectorize(math.erfc, otypes=[np.float64])}
_NUMPY = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16,
          "f16": np.float16}


def _run(op: str, dtype: str, x: np.ndarray) -> np.ndarray:
    t = ttype(x.shape, dtype)
    text = (f"func.func @main(%x: {t}) -> {t} {{\n  %y = chlo.{op} %x : {t} -> {t}\n"
            f"  return %y : {t}\n}}\n")
    module = stablehlo.parse(text)
    (got,) = run_native(single_op(module), [x])
    (want,) = evaluate(module, [x])
    nan = np.isnan(want.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float64)), nan)
    if dtype != "f32" or op == "erfc":  # the same double function rounded once: same bits
        bits = f"u{got.dtype.itemsize}"  # (NaN payloads aside)
        np.testing.assert_array_equal(got.view(bits)[~nan], want.view(bits)[~nan])
    return got


def _inputs(dtype: str) -> np.ndarray:
    np_type = _NUMPY[dtype]
    if dtype in ("bf16", "f16"):
        return np.arange(1 << 16, dtype=np.uint16).view(np_type)  # every value
    info = np.finfo(np_type)
    rng = np.random.default_rng(5)
    dense = np.linspace(-12, 12, 40001)  # erfc(x) underflows near x = 10 (f32), 27 (f64)
    far = np.linspace(-30, 30, 6001)
    scales = 10.0 ** rng.uniform(-45 if dtype == "f32" else -320, 2, 20000)
    wide = rng.choice([-1, 1], 20000) * scales
    edges = [0.0, -0.0, info.tiny, -info.tiny, info.smallest_subnormal, 1.0, -1.0, info.max,
             -info.max, np.inf, -np.inf, np.nan, 4.0, 3.9999, 9.19, 10.05, 10.06, 26.5, 27.3]
    with np.errstate(over="ignore", under="ignore"):
        return np.concatenate([dense, far, wide, edges]).astype(np_type)


def _ulps(got: np.ndarray, want64: np.ndarray, np_type) -> np.ndarray:
    """|got - want| in units of the spacing of the rounded reference (0 where both are the
    same value or both NaN)."""
    with np.errstate(over="ignore", under="ignore"):
        want = want64.astype(np_type)
    got64 = got.astype(np.float64)
    same = (got64 == want.astype(np.float64)) | (np.isnan(got64) & np.isnan(want64))
    spacing = np.maximum(np.abs(np.spacing(want.astype(np.float32 if np_type in (
        ml_dtypes.bfloat16, np.float16) else np_type))).astype(np.float64),
        float(np.finfo(np_type).smallest_subnormal))
    with np.errstate(invalid="ignore"):
        err = np.where(same, 0.0, np.abs(got64 - want64) / spacing)
    return np.nan_to_num(err, nan=np.inf)


@pytest.mark.parametrize("op", ["erf", "erfc"])
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_erf_erfc_wide_types_within_ulps(op, dtype):
    x = _inputs(dtype)
    got = _run(op, dtype, x)
    err = _ulps(got, _REFERENCE[op](x.astype(np.float64)), _NUMPY[dtype])
    bound = 4 if (op, dtype) == ("erf", "f32") else 1
    worst = int(np.argmax(err))
    assert err[worst] <= bound, (op, dtype, x[worst], got[worst], err[worst])


@pytest.mark.parametrize("op", ["erf", "erfc"])
@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_erf_erfc_16_bit_floats_are_the_rounded_reference(op, dtype):
    x = _inputs(dtype)
    got = _run(op, dtype, x)
    want = _REFERENCE[op](x.astype(np.float64)).astype(_NUMPY[dtype])
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))
    numbers = ~np.isnan(want.astype(np.float64))
    np.testing.assert_array_equal(np.signbit(got.astype(np.float32))[numbers],
                                  np.signbit(want.astype(np.float32))[numbers])
