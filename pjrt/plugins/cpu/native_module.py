"""The native extension, imported once with its BLAS loaded and numpy dtypes installed."""
from __future__ import annotations

import atexit
import functools

import numpy as np

# The element types of native arrays, in the order of C++'s ``DType`` (generated into
# native/_generated/dtypes.h by codegen/headers.py): the StableHLO types stored natively,
# then raw bytes of each width ("b8".."b64"), which hold every other element type (f8 types,
# i4, quantized storage) for the data-movement kernels.
NATIVE_DTYPES = (
    ("PRED", "i1"), ("S8", "i8"), ("S16", "i16"), ("S32", "i32"), ("S64", "i64"),
    ("U8", "ui8"), ("U16", "ui16"), ("U32", "ui32"), ("U64", "ui64"),
    ("F16", "f16"), ("BF16", "bf16"), ("F32", "f32"), ("F64", "f64"),
    ("C64", "complex<f32>"), ("C128", "complex<f64>"),
    ("B8", "b8"), ("B16", "b16"), ("B32", "b32"), ("B64", "b64"))
RAW_STORAGE = frozenset(name for _, name in NATIVE_DTYPES if name[0] == "b" and name[1:].isdigit())
# Element types the native arrays store as themselves; others run on the interpreter.
NATIVE_ELEMENT_TYPES = frozenset(name for _, name in NATIVE_DTYPES) - RAW_STORAGE


def dtype_size(name: str) -> int:
    """Bytes of one element of native element type ``name``: stablehlo's ELEMENT_TYPES
    (the one table of element facts) for the typed ones, the width for raw bytes."""
    from stablehlo.ir.types import ELEMENT_TYPES
    if name in RAW_STORAGE:
        return int(name[1:]) // 8
    return ELEMENT_TYPES[name].host_bytes


@functools.lru_cache(maxsize=None)
def native():
    from pjrt.plugins.cpu.blas import load_openblas
    load_openblas()
    from pjrt.plugins.cpu import _native
    from stablehlo.ir.types import numpy_dtype, parse_element_type_name
    dtypes = {}
    for name in NATIVE_ELEMENT_TYPES:
        dtypes[name] = numpy_dtype(parse_element_type_name(name))
    for name in RAW_STORAGE:
        dtypes[name] = np.dtype(f"uint{name[1:]}")
    _native.set_numpy_dtypes(dtypes)
    from stablehlo.interpreter.values import TOKEN
    _native.set_token_object(TOKEN)
    # Before finalization starts: native worker threads must stop taking the GIL.
    atexit.register(_native.prepare_exit)
    return _native
