"""Loads the OpenBLAS of the scipy-openblas32 wheel, which the native extension links.

The extension records only the library's soname; loading the installed wheel's copy
globally first lets the dynamic loader resolve it, wherever pip put the wheel.
"""
from __future__ import annotations

import ctypes
import functools
import os

_HANDLE = None


def load_openblas() -> ctypes.CDLL:
    global _HANDLE
    if _HANDLE is None:
        import scipy_openblas32
        path = os.path.join(scipy_openblas32.get_lib_dir(),
                            scipy_openblas32.get_library(fullname=True))
        _HANDLE = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        # Kernels split GEMMs over the backend's own thread pool and call BLAS from its
        # threads (kernels_linalg.cc); OpenBLAS threads beside them would only spin.
        _HANDLE.scipy_openblas_set_num_threads(1)
    return _HANDLE


@functools.lru_cache(maxsize=1)
def gemm_bits_depend_on_panels() -> bool:
    """Whether this BLAS rounds a GEMM's elements otherwise when the GEMM is cut into row
    panels. The cpu backend cuts one dot differently in different places (the executor's dot
    into a panel per pool thread, a generated output fusion into its tiles, a recomputed
    value under a memory limit in another fusion), so those agree bit for bit only where
    every element is summed in one order whatever the panel. OpenBLAS's AVX-512 kernels do;
    its AVX2 kernels on an AMD EPYC do not (770 to 1,380 of 34 x 96 elements change when the
    rows are cut in two). Probed once: a [34,192] x [192,96] product whole and by halves."""
    import numpy as np
    sgemm = load_openblas().scipy_cblas_sgemm
    rng = np.random.default_rng(0)
    x = rng.standard_normal((34, 192)).astype(np.float32)
    w = rng.standard_normal((192, 96)).astype(np.float32)

    def product(rows: np.ndarray) -> np.ndarray:
        out = np.zeros((rows.shape[0], 96), np.float32)
        pointer = lambda a: a.ctypes.data_as(ctypes.c_void_p)  # noqa: E731
        # row-major (101), no transposes (111): out = rows @ w
        sgemm(101, 111, 111, rows.shape[0], 96, 192, ctypes.c_float(1.0), pointer(rows), 192,
              pointer(w), 96, ctypes.c_float(0.0), pointer(out), 96)
        return out
    whole = product(x)
    halves = np.vstack([product(np.ascontiguousarray(x[:17])),
                        product(np.ascontiguousarray(x[17:]))])
    np.testing.assert_allclose(whole, x.astype(np.float64) @ w, rtol=1e-4, atol=1e-3)
    return whole.tobytes() != halves.tobytes()
