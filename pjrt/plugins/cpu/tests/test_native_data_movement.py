"""Native data-movement kernels of the cpu backend against the reference interpreter.

iota, broadcast_in_dim, broadcast, reshape, transpose, reverse, slice, concatenate and pad
(native/kernels_data_movement.cc) on every kind of element type, rank 0, zero-size
dimensions, negative and interior padding, and inputs large enough to take the tiled and
multi-threaded paths. Every case runs one op natively and on the interpreter
(kernel_check.check_op).
"""
from __future__ import annotations

import numpy as np
import pytest

from pjrt.plugins.cpu.tests.kernel_check import DTYPES, check_op, i64s, one_op, rand, ttype

def check_unary(op, operand_shape, result_shape, dtype, attrs=""):
    text = one_op(op, [ttype(operand_shape, dtype)], [ttype(result_shape, dtype)], attrs)
    return check_op(text, [rand(operand_shape, dtype)])


# -- iota


@pytest.mark.parametrize("dtype", [d for d in DTYPES if d != "i1"] + ["f16", "ui64", "i8"])
@pytest.mark.parametrize("shape,dim", [((5,), 0), ((2, 3), 1), ((3, 4, 2), 0), ((3, 4, 2), 2),
                                       ((0, 3), 1), ((300,), 0)])
def test_iota(dtype, shape, dim):
    text = one_op("stablehlo.iota", [], [ttype(shape, dtype)], f"iota_dimension = {dim} : i64")
    check_op(text, [])


def test_iota_wraps_like_the_interpreter():
    # 300 values do not fit ui8 (they wrap) nor bf16 (they round)
    for dtype in ("ui8", "bf16", "f16"):
        check_op(one_op("stablehlo.iota", [], [ttype((300,), dtype)], "iota_dimension = 0 : i64"),
                 [])


# -- broadcasts


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("operand,result,dims", [
    ((3,), (2, 3), [1]),
    ((3,), (3, 2), [0]),
    ((1, 3), (4, 3), [0, 1]),
    ((3, 1), (2, 3, 5), [1, 2]),
    ((), (2, 2), []),
    ((2, 3), (3, 2), [1, 0]),          # unsorted dims transpose
    ((2, 1, 3), (2, 4, 3), [0, 1, 2]),
    ((2, 3), (2, 3), [0, 1]),          # identity: shares the operand's storage
    ((0, 3), (2, 0, 3), [1, 2]),
])
def test_broadcast_in_dim(dtype, operand, result, dims):
    check_unary("stablehlo.broadcast_in_dim", operand, result, dtype,
                f"broadcast_dimensions = {i64s(dims)}")


@pytest.mark.parametrize("dtype", ["f32", "i1", "complex<f64>"])
def test_broadcast(dtype):
    check_unary("stablehlo.broadcast", (3, 2), (4, 3, 2), dtype,
                f"broadcast_sizes = {i64s([4])}")


# -- reshape, transpose, reverse


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("operand,result", [((2, 3), (3, 2)), ((6,), (1, 6, 1)), ((), (1, 1)),
                                            ((1, 1), ()), ((0, 3), (3, 0))])
def test_reshape(dtype, operand, result):
    check_unary("stablehlo.reshape", operand, result, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,perm", [((2, 3), [1, 0]), ((2, 3, 4), [2, 0, 1]),
                                        ((2, 3, 4), [1, 2, 0]), ((2, 3, 4), [0, 2, 1]),
                                        ((2, 3, 4), [0, 1, 2]), ((), []), ((0, 5), [1, 0]),
                                        ((1, 7, 1), [2, 1, 0])])
def test_transpose(dtype, shape, perm):
    result = tuple(shape[p] for p in perm)
    check_unary("stablehlo.transpose", shape, result, dtype, f"permutation = {i64s(perm)}")


@pytest.mark.parametrize("dtype", ["f32", "ui8", "bf16", "complex<f64>"])
@pytest.mark.parametrize("shape,perm", [((517, 300), [1, 0]), ((3, 130, 70), [2, 1, 0]),
                                        ((40, 64, 33), [0, 2, 1])])
def test_transpose_large_is_tiled(dtype, shape, perm):
    result = tuple(shape[p] for p in perm)
    check_unary("stablehlo.transpose", shape, result, dtype, f"permutation = {i64s(perm)}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,dims", [((5,), [0]), ((2, 3), [1]), ((2, 3, 4), [0, 2]),
                                        ((2, 3), []), ((1, 4), [0]), ((0, 3), [0, 1]),
                                        ((), [])])
def test_reverse(dtype, shape, dims):
    check_unary("stablehlo.reverse", shape, shape, dtype, f"dimensions = {i64s(dims)}")


def test_reverse_large():
    check_unary("stablehlo.reverse", (300, 400), (300, 400), "f32", f"dimensions = {i64s([0, 1])}")


# -- slice, concatenate


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,starts,limits,strides", [
    ((7,), [1], [6], [2]),
    ((4, 5), [1, 0], [3, 5], [1, 1]),
    ((4, 5), [0, 1], [4, 5], [3, 2]),
    ((4, 5), [2, 2], [2, 4], [1, 1]),   # empty
    ((4, 5), [0, 0], [4, 5], [1, 1]),   # full: shares the storage
    ((2, 3, 4), [1, 0, 1], [2, 3, 4], [1, 2, 1]),
    ((), [], [], []),
])
def test_slice(dtype, shape, starts, limits, strides):
    result = tuple(-(-(hi - lo) // st) for lo, hi, st in zip(starts, limits, strides))
    attrs = (f"start_indices = {i64s(starts)}, limit_indices = {i64s(limits)}, "
             f"strides = {i64s(strides)}")
    check_unary("stablehlo.slice", shape, result, dtype, attrs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes,dim", [([(2, 3), (4, 3)], 0), ([(2, 3), (2, 1), (2, 5)], 1),
                                        ([(2, 0), (2, 3)], 1), ([(3,)], 0),
                                        ([(2, 3, 4), (2, 2, 4)], 1)])
def test_concatenate(dtype, shapes, dim):
    result = list(shapes[0])
    result[dim] = sum(s[dim] for s in shapes)
    text = one_op("stablehlo.concatenate", [ttype(s, dtype) for s in shapes],
                  [ttype(result, dtype)], f"dimension = {dim} : i64")
    check_op(text, [rand(s, dtype) for s in shapes])


def test_concatenate_large():
    shapes = [(300, 200), (300, 57)]
    text = one_op("stablehlo.concatenate", [ttype(s, "f32") for s in shapes],
                  [ttype((300, 257), "f32")], "dimension = 1 : i64")
    check_op(text, [rand(s, "f32") for s in shapes])


# -- pad


def pad_shape(shape, low, high, interior):
    return tuple(lo + n + max(n - 1, 0) * i + hi
                 for n, lo, hi, i in zip(shape, low, high, interior))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,low,high,interior", [
    ((2, 3), [1, 0], [0, 2], [0, 0]),
    ((2, 3), [1, 1], [1, 1], [1, 2]),
    ((2, 3), [-1, 0], [0, -2], [0, 0]),      # negative edge padding crops
    ((3, 4), [-2, -3], [1, -1], [1, 1]),    # cropping into interior padding
    ((4,), [-3], [-2], [1]),
    ((2, 3), [-2, 0], [1, 0], [0, 0]),       # the operand cropped away entirely
    ((0, 3), [1, 0], [1, 1], [2, 0]),
    ((), [], [], []),
])
def test_pad(dtype, shape, low, high, interior):
    result = pad_shape(shape, low, high, interior)
    attrs = (f"edge_padding_low = {i64s(low)}, edge_padding_high = {i64s(high)}, "
             f"interior_padding = {i64s(interior)}")
    text = one_op("stablehlo.pad", [ttype(shape, dtype), ttype((), dtype)],
                  [ttype(result, dtype)], attrs)
    check_op(text, [rand(shape, dtype), rand((), dtype)])


def test_pad_large():
    shape, low, high, interior = (250, 300), [3, -5], [-7, 2], [1, 0]
    attrs = (f"edge_padding_low = {i64s(low)}, edge_padding_high = {i64s(high)}, "
             f"interior_padding = {i64s(interior)}")
    result = pad_shape(shape, low, high, interior)
    text = one_op("stablehlo.pad", [ttype(shape, "f32"), ttype((), "f32")],
                  [ttype(result, "f32")], attrs)
    check_op(text, [rand(shape, "f32"), np.float32(7)])


def test_large_broadcast():
    check_unary("stablehlo.broadcast_in_dim", (1, 700), (600, 700), "f64",
                f"broadcast_dimensions = {i64s([0, 1])}")
    check_unary("stablehlo.broadcast_in_dim", (600,), (600, 700), "i32",
                f"broadcast_dimensions = {i64s([0])}")
