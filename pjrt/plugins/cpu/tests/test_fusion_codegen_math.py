"""The generated kernels' own math (xla_core/codegen/cpp_mathlib.py) against numpy/scipy, in ULP."""
from __future__ import annotations

import ctypes
import math

import numpy as np
import pytest

from pjrt.plugins.cpu.codegen import abi, build
from xla_core.codegen import cpp_mathlib as mathlib

scipy_special = pytest.importorskip("scipy.special")

_FUNCS = ["exp", "expm1", "log", "log1p", "tanh", "logistic", "erf", "erfc", "sin", "cos", "tan"]
_REFERENCE = {
    "exp": np.exp, "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "tanh": np.tanh,
    "logistic": scipy_special.expit, "erf": scipy_special.erf,
    "sin": np.sin, "cos": np.cos, "tan": np.tan,
    # scipy's erfc flushes results below ~1e-308 to 0; Python's (the C library's) does not
    "erfc": np.vectorize(math.erfc, otypes=[np.float64]),
}


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    if build.find_compiler() is None:
        pytest.skip("no C++ compiler")
    lines = [abi.PRELUDE, mathlib.source(_FUNCS)]
    for name in _FUNCS:
        for ctype in ("float", "double"):
            lines.append(f'extern "C" void t_{name}_{ctype}(const {ctype}* x, {ctype}* y, int64_t n) '
                         f"{{ for (int64_t i = 0; i < n; ++i) y[i] = ohm_{name}(x[i]); }}")
    path = build.compile_source("\n".join(lines))
    assert path is not None
    return ctypes.CDLL(path)


def _inputs(dtype):
    info = np.finfo(dtype)
    rng = np.random.default_rng(0)
    wide = rng.uniform(-1, 1, 20000) * 10.0 ** rng.uniform(-40 if dtype == np.float32 else -300,
                                                          2.5, 20000)
    near = rng.uniform(-30, 30, 20000)
    tiny = np.array([info.smallest_subnormal, info.tiny, info.tiny * 0.5, 1e-30, 1e-8, 0.0,
                     -0.0, info.max, -info.max, np.inf, -np.inf, np.nan, 0.3465, 0.3466,
                     88.72, 88.73, 89.5, -103.9, -104.5, 709.7, 709.8, -745.0, -745.2, 1.0,
                     -1.0, 0.9999, 1.0001, 3.999, 4.001, 5.9, 6.1, -0.9999999, 20.0, 21.0])
    return np.concatenate([wide, near, tiny]).astype(dtype)


def _ulp_error(got, want, dtype):
    with np.errstate(over="ignore"):  # a float64 reference past float32's range is inf
        want = want.astype(dtype)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    spacing = np.abs(np.spacing(want.astype(dtype)))
    spacing = np.maximum(spacing, np.finfo(dtype).smallest_subnormal)
    with np.errstate(invalid="ignore"):
        err = np.where(same, 0.0, np.abs(got.astype(np.float64) - want.astype(np.float64))
                       / spacing.astype(np.float64))
    return np.nan_to_num(err, nan=np.inf)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", _FUNCS)
def test_math_against_numpy(library, name, dtype):
    ctype = "float" if dtype == np.float32 else "double"
    x = _inputs(dtype)
    if name in ("log", "log1p"):
        with np.errstate(over="ignore"):  # the largest inputs become inf: tested too
            x = np.concatenate([x, np.abs(x) * 1e3, np.abs(x) * 1e-3,
                                np.float64(-0.5)[None]]).astype(dtype)
    y = np.empty_like(x)
    ptr = ctypes.POINTER(ctypes.c_float if dtype == np.float32 else ctypes.c_double)
    getattr(library, f"t_{name}_{ctype}")(x.ctypes.data_as(ptr), y.ctypes.data_as(ptr),
                                          ctypes.c_int64(x.size))
    with np.errstate(all="ignore"):
        # float32 references are computed in float64 and rounded once.
        want = _REFERENCE[name](x.astype(np.float64) if dtype == np.float32 else x)
    err = _ulp_error(y, want, dtype)
    worst = int(np.argmax(err))
    assert err[worst] <= 4, (name, x[worst], y[worst], want[worst], err[worst])


@pytest.mark.parametrize("name,bound", [("sin", 1), ("cos", 1), ("tan", 1), ("tanh", 2)])
def test_float_math_dense_sweep(library, name, bound):
    """Every 4099th float bit pattern of either sign (all exponents, denormals and the largest
    arguments, where sin/cos/tan need all of their range reduction) and the specials."""
    bits = np.arange(0, 0x7F800000, 4099, dtype=np.uint32)
    x = np.concatenate([bits.view(np.float32), -bits.view(np.float32),
                        np.array([np.inf, -np.inf, np.nan, np.finfo(np.float32).max,
                                  -np.finfo(np.float32).max, 0.0, -0.0], np.float32)])
    y = np.empty_like(x)
    ptr = ctypes.POINTER(ctypes.c_float)
    getattr(library, f"t_{name}_float")(x.ctypes.data_as(ptr), y.ctypes.data_as(ptr),
                                        ctypes.c_int64(x.size))
    with np.errstate(all="ignore"):
        want = _REFERENCE[name](x.astype(np.float64))
    err = _ulp_error(y, want, np.float32)
    worst = int(np.argmax(err))
    assert err[worst] <= bound, (name, x[worst], y[worst], want[worst], err[worst])
    assert np.signbit(y[x == 0]).tolist() == np.signbit(want[x == 0]).tolist()  # odd, even
