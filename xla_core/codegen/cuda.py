"""The CUDA C renderer: how the scalar-op protocol (scalar.py) is spelled in CUDA C.

Kernels compute f32 and f64 natively and hold f16 and bf16 as the CUDA headers' ``__half``
and ``__nv_bfloat16`` (cuda_fp16.h, cuda_bf16.h), computed in f32 op by op (``NARROW``) and
rounded back to nearest even, as the reference interpreter (ml_dtypes) rounds. Float math is
the CUDA device library's (``expf``, ``log1p``, ...: the same names for every kernel, so no
math library travels with the source); the few functions it lacks (``logistic``) and the
NaN-propagating max/min are ``HELPERS``, which the backend puts at the top of its
translation unit. Integer types are the <cstdint> names the templates spell (``int64_t``).
The memory functions of cpp.py (``alloc``/``copy``: the while template's) are not for
device code; the cuda backend generates no while kernels.
"""
from __future__ import annotations

import numpy as np

from xla_core.codegen.cpp import CppRenderer

# Float functions that are not the device library's name with an ``f`` suffix for f32.
_HELPER_FUNCTIONS = frozenset({"logistic"})


class CudaRenderer(CppRenderer):
    """CUDA C is C++: the literals of C++ (cpp.py) but for the narrow floats, the device
    library's math and the CUDA headers' narrow types."""
    TYPES = {"f32": "float", "f64": "double", "f16": "__half", "bf16": "__nv_bfloat16",
             "i1": "bool", "i8": "int8_t", "i16": "int16_t", "i32": "int32_t",
             "i64": "int64_t", "ui8": "uint8_t", "ui16": "uint16_t", "ui32": "uint32_t",
             "ui64": "uint64_t"}
    FLOATS = frozenset({"f32", "f64", "f16", "bf16"})
    NARROW = {"f16": "f32", "bf16": "f32"}
    SHIFTS = True  # checked against the interpreter (pjrt/plugins/cuda/tests)
    # Device functions every kernel may call: the headers of the narrow types, the
    # NaN-propagating max/min (``extremum``; fmaxf would drop a NaN) and logistic.
    HELPERS = (
        "#include <cuda_fp16.h>\n"
        "#include <cuda_bf16.h>\n"
        "template <class T> __device__ __forceinline__ T ohc_max(T a, T b) "
        "{ return a != a ? a : (b != b ? b : (a > b ? a : b)); }\n"
        "template <class T> __device__ __forceinline__ T ohc_min(T a, T b) "
        "{ return a != a ? a : (b != b ? b : (a < b ? a : b)); }\n"
        "__device__ __forceinline__ float ohc_logistic(float x) "
        "{ return 1.0f / (1.0f + expf(-x)); }\n"
        "__device__ __forceinline__ double ohc_logistic(double x) "
        "{ return 1.0 / (1.0 + exp(-x)); }\n")
    _TO_WIDE = {"f16": "__half2float", "bf16": "__bfloat162float"}
    _TO_NARROW = {"f16": "__float2half_rn", "bf16": "__float2bfloat16_rn"}

    def literal(self, value, elem: str) -> str:
        if elem in self.NARROW:
            # The bits, rounded to nearest even by numpy/ml_dtypes: a constant initializer,
            # where the headers' conversion functions are not constexpr.
            bits = int(np.asarray(value, dtype=_numpy_dtype(elem)).view(np.uint16))
            return f"{self.TYPES[elem]}({self.TYPES[elem]}_raw{{{bits:#06x}}})"
        return super().literal(value, elem)

    def call(self, function: str, elem: str, args: list[str], math: set) -> str:
        if function in _HELPER_FUNCTIONS:
            return f"ohc_{function}({', '.join(args)})"
        suffix = "f" if elem == "f32" else ""
        return f"{function}{suffix}({', '.join(args)})"

    def extremum(self, which: str, ctype: str, a: str, b: str) -> str:
        return f"ohc_{which}<{ctype}>({a}, {b})"

    def widen(self, arg: str, elem: str) -> str:
        return f"{self._TO_WIDE[elem]}({arg})"

    def narrow(self, expr: str, elem: str) -> str:
        return f"{self._TO_NARROW[elem]}({expr})"


def _numpy_dtype(elem: str):
    if elem == "f16":
        return np.float16
    import ml_dtypes
    return ml_dtypes.bfloat16


CUDA = CudaRenderer()
