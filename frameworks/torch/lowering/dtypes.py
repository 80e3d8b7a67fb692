"""torch dtypes <-> StableHLO element types, and torch tensors <-> numpy arrays.

bfloat16 has no numpy dtype of its own; it crosses as ``ml_dtypes.bfloat16`` through a
16-bit view, which copies nothing.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import torch

from stablehlo.ir.types import (BF16, F16, F32, F64, I1, I8, I16, I32, I64, UI8, UI16, UI32,
                                UI64, TensorType, Type, numpy_dtype)

from frameworks.torch.lowering.registry import Unsupported

# The element types torch programs lower to; torch names each dtype as numpy (ml_dtypes) does.
_ELEMENT_TYPES = {getattr(torch, numpy_dtype(t).name): t for t in (
    F32, F64, F16, BF16, I1, I8, I16, I32, I64, UI8, UI16, UI32, UI64)}
_TORCH_DTYPES = {str(v): k for k, v in _ELEMENT_TYPES.items()}


def element_type(dtype: torch.dtype) -> Type:
    try:
        return _ELEMENT_TYPES[dtype]
    except KeyError:
        raise Unsupported(f"dtype {dtype} has no StableHLO element type here") from None


def torch_dtype(t: Type) -> torch.dtype:
    """The torch dtype of a StableHLO element type (or of a tensor type's elements)."""
    if isinstance(t, TensorType):
        t = t.element_type
    return _TORCH_DTYPES[str(t)]


def to_numpy(t: torch.Tensor) -> np.ndarray:
    if t.requires_grad:  # a new tensor object per call: the hot path skips it when it can
        t = t.detach()
    t = t.contiguous()  # (np.ascontiguousarray would make 0-d arrays 1-d)
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def from_numpy(a: np.ndarray) -> torch.Tensor:
    a = np.asarray(a)
    if not a.flags.writeable or not a.flags.c_contiguous:  # torch warns on read-only memory
        a = a.copy()
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)
