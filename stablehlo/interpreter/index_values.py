"""Index operands and result shapes for the data-movement kernels.

Index tensors of any integer dtype (i2 .. ui64) are converted to int64 here,
saturating so that huge unsigned values stay huge instead of wrapping.
Result types are read with errors that name the op (attributes, including
gather/scatter dimension numbers: see opattrs.py).
"""
from __future__ import annotations

import numpy as np

from stablehlo.interpreter.opattrs import fail
from stablehlo.ir.types import TensorType, numpy_dtype

# Index arithmetic is done in int64; values are first saturated to this bound
# so that start + offset cannot overflow (anything this large is out of range
# for every tensor anyway).
_INDEX_BOUND = 1 << 48


def index_array(values) -> np.ndarray:
    """Integer indices of any dtype as int64, saturated to +-2**48."""
    values = np.asarray(values)
    if values.dtype == np.bool_:
        return values.astype(np.int64)
    if values.dtype == np.uint64:
        values = np.minimum(values, np.uint64(_INDEX_BOUND))
    values = values.astype(np.int64)
    return np.clip(values, -_INDEX_BOUND, _INDEX_BOUND)


def index_scalars(op, values) -> list[int]:
    """Scalar index operands (``dynamic_slice``'s start indices) as Python ints."""
    out = []
    for i, value in enumerate(values):
        value = np.asarray(value)
        if value.size != 1:
            raise fail(op, f"index operand #{i} must be a scalar, got shape {value.shape}")
        out.append(int(index_array(value).reshape(())))
    return out


def index_vector(op, value, what: str) -> list[int]:
    """A 1-d integer tensor operand (a dynamic shape or padding) as Python ints."""
    value = np.asarray(value)
    if value.ndim != 1:
        raise fail(op, f"{what} must be a 1-d tensor, got shape {value.shape}")
    return [int(v) for v in index_array(value)]


def result_dtype(op, index: int = 0) -> np.dtype:
    """The numpy dtype of result ``index``."""
    return numpy_dtype(result_tensor_type(op, index).element_type)


def result_tensor_type(op, index: int = 0) -> TensorType:
    rtype = op.result_types[index]
    if not isinstance(rtype, TensorType):
        raise fail(op, f"result #{index} must be a tensor, got {rtype}")
    return rtype


def static_result_shape(op, index: int = 0):
    """The result shape when it is fully static, else None."""
    rtype = result_tensor_type(op, index)
    return tuple(rtype.shape) if rtype.is_static else None


def check_shape(op, shape, index: int = 0) -> tuple:
    """Check a computed result shape against the (possibly dynamic) result type."""
    shape = tuple(int(d) for d in shape)
    declared = result_tensor_type(op, index).shape
    if len(declared) != len(shape) or any(
            d is not None and d != s for d, s in zip(declared, shape)):
        raise fail(op, f"computed result shape {shape} does not match the result type "
                   f"{op.result_types[index]}")
    return shape
