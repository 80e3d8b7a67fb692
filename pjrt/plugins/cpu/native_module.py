"""The native extension, imported once with its BLAS loaded and numpy dtypes installed."""
from __future__ import annotations

import atexit
import functools

import numpy as np

# Element types the native arrays store (array.h); others run on the interpreter.
NATIVE_ELEMENT_TYPES = frozenset({
    "i1", "i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64", "f16", "bf16", "f32",
    "f64", "complex<f32>", "complex<f64>"})


@functools.lru_cache(maxsize=None)
def native():
    from pjrt.plugins.cpu.blas import load_openblas
    load_openblas()
    from pjrt.plugins.cpu import _native
    from stablehlo.ir.types import numpy_dtype, parse_element_type_name
    dtypes = {}
    for name in NATIVE_ELEMENT_TYPES:
        dtypes[name] = numpy_dtype(parse_element_type_name(name))
    for bits in (8, 16, 32, 64):
        dtypes[f"b{bits}"] = np.dtype(f"uint{bits}")
    _native.set_numpy_dtypes(dtypes)
    from stablehlo.interpreter.values import TOKEN
    _native.set_token_object(TOKEN)
    # Before finalization starts: native worker threads must stop taking the GIL.
    atexit.register(_native.prepare_exit)
    return _native
