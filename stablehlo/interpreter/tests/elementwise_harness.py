"""Helpers for the elementwise/CHLO kernel tests.

``apply(name, *arrays, result=dtype)`` builds the op with tensor types
derived from the numpy dtypes and runs its registered kernel, without the
parser or the evaluator. ``xla`` runs the same computation through JAX's XLA
CPU backend, the independent oracle the conformance expectations come from.
``ulp_distance`` measures results the way ``check.expect_close`` does.
"""
from __future__ import annotations

import numpy as np

import stablehlo.interpreter  # noqa: F401  (registers every kernel)
from stablehlo.interpreter.kernels import KERNELS
from stablehlo.ir.attributes import EnumAttr, IntegerAttr
from stablehlo.ir.core import Block, Operation
from stablehlo.ir.types import I64, TensorType, Type, element_type_for_dtype


def tensor_type(shape, dtype) -> TensorType:
    return TensorType(tuple(shape), element_type_for_dtype(np.dtype(dtype)))


def make_op(name: str, operand_types, result_types, attributes=None) -> Operation:
    holder = Block(list(operand_types))
    return Operation(name, holder.arguments, list(result_types), attributes or {})


def apply(name: str, *arrays, result=None, attributes=None, result_types=None):
    """Run the kernel of ``name``; one result unless ``result_types`` has several."""
    arrays = [np.asarray(a) for a in arrays]
    if result_types is None:
        dtype = np.dtype(result) if result is not None else arrays[-1].dtype
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        result_types = [tensor_type(shape, dtype)]
    operand_types = [tensor_type(a.shape, a.dtype) for a in arrays]
    op = make_op(name, operand_types, result_types, attributes)
    outs = KERNELS.get(name)(None, op, *arrays)
    return outs[0] if len(result_types) == 1 else outs


def apply_typed(name: str, operands: list, operand_types: list[Type], result_types: list[Type],
                attributes=None):
    """Run a kernel with explicit IR types (quantized types, for instance)."""
    op = make_op(name, operand_types, result_types, attributes)
    return KERNELS.get(name)(None, op, *operands)


def direction(value: str) -> EnumAttr:
    return EnumAttr("comparison_direction", value)


def compare_type(value: str) -> EnumAttr:
    return EnumAttr("comparison_type", value)


def i64_attr(value: int) -> IntegerAttr:
    return IntegerAttr(int(value), I64)


def assert_same(actual, expected):
    """Same dtype, shape and bits (NaNs compare equal to NaNs)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if actual.dtype.kind == "c":
        assert_same(actual.real, expected.real)
        assert_same(actual.imag, expected.imag)
        return
    a, e = actual.astype(np.float64), expected.astype(np.float64)
    if actual.dtype.kind in "biu":
        np.testing.assert_array_equal(actual, expected)
        return
    both_nan = np.isnan(a) & np.isnan(e)
    same = (a == e) & (np.signbit(a) == np.signbit(e))
    bad = ~(both_nan | same)
    assert not bad.any(), f"mismatch at {np.argwhere(bad)[:5].tolist()}: " \
                          f"{actual[bad][:5]} vs {expected[bad][:5]}"


def ulp_distance(a, b) -> np.ndarray:
    """ULP distance per element as check.expect_close measures it (max over parts)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "c":
        return np.maximum(ulp_distance(a.real, b.real), ulp_distance(a.imag, b.imag))
    size = a.dtype.itemsize
    unsigned = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[size]
    sign = np.uint64(1 << (size * 8 - 1))
    abits = np.ascontiguousarray(a).view(unsigned).astype(np.uint64)
    bbits = np.ascontiguousarray(b).view(unsigned).astype(np.uint64)
    ma, mb = abits & ~sign, bbits & ~sign
    same_sign = (abits & sign) == (bbits & sign)
    diff = np.where(same_sign, np.maximum(ma, mb) - np.minimum(ma, mb), ma + mb)
    af, bf = a.astype(np.float64), b.astype(np.float64)
    result = diff.astype(np.float64)
    result = np.where(abits == bbits, 0.0, result)
    result = np.where(np.isnan(af) & np.isnan(bf), 0.0, result)
    other_special = (~np.isfinite(af) | ~np.isfinite(bf)) & ~(abits == bbits) \
        & ~(np.isnan(af) & np.isnan(bf))
    return np.where(other_special, np.inf, result)


class Xla:
    """Evaluate jax.lax functions on XLA CPU with 64-bit types enabled."""

    def __init__(self):
        import jax
        self.jax = jax
        self.lax = jax.lax

    def __call__(self, fn, *arrays):
        with self.jax.enable_x64(True):
            out = self.jax.jit(fn)(*arrays)
        if isinstance(out, (tuple, list)):
            return [np.asarray(o) for o in out]
        return np.asarray(out)
