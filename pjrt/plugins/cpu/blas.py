"""Loads the OpenBLAS of the scipy-openblas32 wheel, which the native extension links.

The extension records only the library's soname; loading the installed wheel's copy
globally first lets the dynamic loader resolve it, wherever pip put the wheel.
"""
from __future__ import annotations

import ctypes
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
