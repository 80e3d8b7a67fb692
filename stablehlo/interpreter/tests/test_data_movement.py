"""Tests of the data-movement kernels against independent references.

References are the spec's examples (expected values copied from docs/spec.md)
and element-by-element loops that follow the spec's index formulas literally.
"""
import itertools

import ml_dtypes
import numpy as np
import pytest

from kernel_harness import call1, i64, i64s, make_op, ttype
from stablehlo.errors import InterpreterError
from stablehlo.ir.attributes import DenseElementsAttr
from stablehlo.ir.types import I32, I64, TensorType, TupleType

RNG = np.random.default_rng(0)
DTYPES = [np.float32, np.int8, np.bool_, np.complex64, ml_dtypes.bfloat16, ml_dtypes.int4,
          np.uint64]


def rand(shape, dtype=np.int64):
    values = RNG.integers(-5, 6, size=shape)
    if np.dtype(dtype) == np.bool_:
        return values > 0
    if np.dtype(dtype) == np.uint64:
        return np.abs(values).astype(dtype)
    return values.astype(dtype)


def unary(name, operand, result_shape, **attrs):
    op = make_op(name, [ttype(operand.shape, operand.dtype)],
                 [ttype(result_shape, operand.dtype)], attrs)
    return call1(op, operand)


# -- constant, iota


def test_constant_is_read_only_view_of_value():
    array = np.arange(6, dtype=np.int32).reshape(2, 3)
    attr = DenseElementsAttr(ttype((2, 3), np.int32), array)
    op = make_op("stablehlo.constant", [], [ttype((2, 3), np.int32)], {"value": attr})
    result = call1(op)
    np.testing.assert_array_equal(result, array)
    with pytest.raises(ValueError):
        result[0, 0] = 7


@pytest.mark.parametrize("dtype", [np.int64, np.float16, np.complex128, ml_dtypes.bfloat16,
                                   ml_dtypes.int4, np.uint64])
@pytest.mark.parametrize("dim", [0, 1])
def test_iota(dtype, dim):
    op = make_op("stablehlo.iota", [], [ttype((3, 4), dtype)], {"iota_dimension": i64(dim)})
    result = call1(op)
    expected = [[(i, j)[dim] for j in range(4)] for i in range(3)]
    assert result.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(result.astype(np.complex128), np.array(expected, np.complex128))


def test_dynamic_iota_takes_shape_from_operand():
    op = make_op("stablehlo.dynamic_iota", [ttype((2,), np.int64)],
                 [TensorType((None, 4), I64)], {"iota_dimension": i64(0)})
    result = call1(op, np.array([3, 4]))
    np.testing.assert_array_equal(result, [[0] * 4, [1] * 4, [2] * 4])


# -- broadcasts, reshape, transpose, reverse, concatenate


def test_broadcast_in_dim_spec_example():
    operand = np.array([[1, 2, 3]])
    result = unary("stablehlo.broadcast_in_dim", operand, (2, 3, 2),
                   broadcast_dimensions=i64s([2, 1]))
    np.testing.assert_array_equal(result, [[[1, 1], [2, 2], [3, 3]], [[1, 1], [2, 2], [3, 3]]])


@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast_in_dim_matches_loop(dtype):
    operand = rand((3, 1, 4), dtype)
    dims = [3, 0, 1]
    shape = (2, 4, 5, 3)
    result = unary("stablehlo.broadcast_in_dim", operand, shape, broadcast_dimensions=i64s(dims))
    for index in itertools.product(*map(range, shape)):
        source = tuple(0 if operand.shape[i] == 1 else index[d] for i, d in enumerate(dims))
        assert result[index] == operand[source]


def test_dynamic_broadcast_in_dim():
    op = make_op("stablehlo.dynamic_broadcast_in_dim",
                 [ttype((1, 3), np.int64), ttype((3,), np.int64)],
                 [ttype((2, 3, 2), np.int64)], {"broadcast_dimensions": i64s([2, 1])})
    result = call1(op, np.array([[1, 2, 3]]), np.array([2, 3, 2]))
    np.testing.assert_array_equal(result[1, :, 0], [1, 2, 3])
    with pytest.raises(InterpreterError, match="does not match"):
        call1(op, np.array([[1, 2, 3]]), np.array([2, 3, 5]))


def test_broadcast_deprecated_prepends_sizes():
    operand = np.array([1, 2], dtype=np.int32)
    result = unary("stablehlo.broadcast", operand, (3, 2), broadcast_sizes=i64s([3]))
    np.testing.assert_array_equal(result, [[1, 2]] * 3)


@pytest.mark.parametrize("dtype", DTYPES)
def test_reshape_is_row_major(dtype):
    operand = rand((2, 3), dtype)
    result = unary("stablehlo.reshape", operand, (3, 2))
    flat = [operand[i, j] for i in range(2) for j in range(3)]
    assert [result[i, j] for i in range(3) for j in range(2)] == flat


def test_dynamic_reshape_rejects_wrong_size():
    op = make_op("stablehlo.dynamic_reshape", [ttype((2, 3), np.int64), ttype((2,), np.int64)],
                 [TensorType((None, None), I64)])
    result = call1(op, np.arange(6).reshape(2, 3), np.array([3, 2]))
    assert result.shape == (3, 2)
    with pytest.raises(InterpreterError, match="cannot reshape"):
        call1(op, np.arange(6).reshape(2, 3), np.array([4, 2]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose_matches_loop(dtype):
    operand = rand((2, 3, 4), dtype)
    perm = [2, 0, 1]
    result = unary("stablehlo.transpose", operand, (4, 2, 3), permutation=i64s(perm))
    for index in itertools.product(*map(range, result.shape)):
        source = [0] * 3
        for d, p in enumerate(perm):
            source[p] = index[d]
        assert result[index] == operand[tuple(source)]


def test_reverse_spec_example():
    operand = np.array([[1, 2], [3, 4], [5, 6]])
    result = unary("stablehlo.reverse", operand, (3, 2), dimensions=i64s([1, 0]))
    np.testing.assert_array_equal(result, [[6, 5], [4, 3], [2, 1]])


def test_concatenate_spec_example():
    a, b = np.array([[1, 2], [3, 4], [5, 6]]), np.array([[7, 8]])
    op = make_op("stablehlo.concatenate", [ttype(a.shape, a.dtype), ttype(b.shape, b.dtype)],
                 [ttype((4, 2), a.dtype)], {"dimension": i64(0)})
    np.testing.assert_array_equal(call1(op, a, b), [[1, 2], [3, 4], [5, 6], [7, 8]])


# -- pad


def pad_reference(operand, value, low, high, interior):
    """result[r] = operand[i] where r = low + i * (interior + 1), else value."""
    shape = [lo + n + max(n - 1, 0) * it + hi
             for n, lo, hi, it in zip(operand.shape, low, high, interior)]
    result = np.full(shape, value, dtype=operand.dtype)
    for index in itertools.product(*map(range, operand.shape)):
        target = tuple(lo + i * (it + 1) for i, lo, it in zip(index, low, interior))
        if all(0 <= t < s for t, s in zip(target, shape)):
            result[target] = operand[index]
    return result


def test_pad_spec_example():
    operand = np.array([[1, 2, 3], [4, 5, 6]])
    op = make_op("stablehlo.pad", [ttype((2, 3), np.int64), ttype((), np.int64)],
                 [ttype((5, 9), np.int64)],
                 {"edge_padding_low": i64s([0, 1]), "edge_padding_high": i64s([2, 1]),
                  "interior_padding": i64s([1, 2])})
    expected = [[0, 1, 0, 0, 2, 0, 0, 3, 0], [0] * 9, [0, 4, 0, 0, 5, 0, 0, 6, 0], [0] * 9,
                [0] * 9]
    np.testing.assert_array_equal(call1(op, operand, np.array(0)), expected)


@pytest.mark.parametrize("low,high,interior", [
    ([1, -1], [1, -1], [0, 1]), ([-2, 0], [0, -3], [2, 0]), ([0, 0], [0, 0], [0, 0]),
    ([3, -4], [-5, 2], [1, 1]), ([-1, 2], [0, 1], [3, 0])])
def test_pad_matches_reference(low, high, interior):
    operand = rand((4, 5), np.float32)
    expected = pad_reference(operand, -1.5, low, high, interior)
    op = make_op("stablehlo.pad", [ttype((4, 5), np.float32), ttype((), np.float32)],
                 [ttype(expected.shape, np.float32)],
                 {"edge_padding_low": i64s(low), "edge_padding_high": i64s(high),
                  "interior_padding": i64s(interior)})
    np.testing.assert_array_equal(call1(op, operand, np.float32(-1.5)), expected)


def test_dynamic_pad_interpreter_suite_case():
    operand = np.array([[0, 0, 0, 0], [0, 1, 2, 0], [0, 3, 4, 0], [0, 5, 6, 0], [0, 0, 0, 0]])
    op = make_op("stablehlo.dynamic_pad", [ttype((5, 4), np.int64), ttype((), np.int64)]
                 + [ttype((2,), np.int64)] * 3, [ttype((7, 5), np.int64)])
    result = call1(op, operand, np.array(-1), np.array([1, -1]), np.array([1, -1]),
                   np.array([0, 1]))
    np.testing.assert_array_equal(result, pad_reference(operand, -1, [1, -1], [1, -1], [0, 1]))


# -- slices


def test_slice_with_strides():
    operand = np.arange(24).reshape(4, 6)
    op = make_op("stablehlo.slice", [ttype((4, 6), np.int64)], [ttype((2, 2), np.int64)],
                 {"start_indices": i64s([1, 0]), "limit_indices": i64s([4, 5]),
                  "strides": i64s([2, 3])})
    np.testing.assert_array_equal(call1(op, operand), [[6, 9], [18, 21]])


def test_real_dynamic_slice():
    operand = np.arange(24).reshape(4, 6)
    op = make_op("stablehlo.real_dynamic_slice", [ttype((4, 6), np.int64)]
                 + [ttype((2,), np.int64)] * 3, [TensorType((None, None), I64)])
    result = call1(op, operand, np.array([1, 0]), np.array([4, 5]), np.array([2, 3]))
    np.testing.assert_array_equal(result, [[6, 9], [18, 21]])


@pytest.mark.parametrize("index_dtype", [np.int64, np.int8, np.uint32, np.uint64,
                                         ml_dtypes.int4])
def test_dynamic_slice_spec_example_clamps(index_dtype):
    operand = np.array([[0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 0, 0], [0, 0, 0, 0]], np.int32)
    op = make_op("stablehlo.dynamic_slice",
                 [ttype((4, 4), np.int32), ttype((), index_dtype), ttype((), index_dtype)],
                 [ttype((2, 2), np.int32)], {"slice_sizes": i64s([2, 2])})
    start0 = np.array(0 if np.dtype(index_dtype).kind == "u" else -1).astype(index_dtype)
    result = call1(op, operand, start0, np.array(3).astype(index_dtype))
    np.testing.assert_array_equal(result, [[1, 1], [1, 1]])


def test_dynamic_slice_huge_unsigned_index_clamps_high():
    operand = np.arange(5)
    op = make_op("stablehlo.dynamic_slice", [ttype((5,), np.int64), ttype((), np.uint64)],
                 [ttype((2,), np.int64)], {"slice_sizes": i64s([2])})
    np.testing.assert_array_equal(call1(op, operand, np.uint64(2**64 - 1)), [3, 4])


def test_dynamic_update_slice_spec_example_and_no_mutation():
    operand = np.array([[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1]])
    original = operand.copy()
    update = np.array([[1, 1], [1, 1]])
    op = make_op("stablehlo.dynamic_update_slice",
                 [ttype((4, 4), np.int64), ttype((2, 2), np.int64), ttype((), np.int64),
                  ttype((), np.int64)], [ttype((4, 4), np.int64)])
    result = call1(op, operand, update, np.array(-1), np.array(3))
    np.testing.assert_array_equal(result, np.ones((4, 4)))
    np.testing.assert_array_equal(operand, original)


# -- tuples and dimension sizes


def test_tuple_and_get_tuple_element():
    a, b = np.array(1.0, np.float32), np.array([2, 3], np.int32)
    ttypes = [ttype((), np.float32), ttype((2,), np.int32)]
    make = make_op("stablehlo.tuple", ttypes, [TupleType(tuple(ttypes))])
    value = call1(make, a, b)
    get = make_op("stablehlo.get_tuple_element", [TupleType(tuple(ttypes))], [ttypes[1]],
                  {"index": i64(1)})
    np.testing.assert_array_equal(call1(get, value), b)
    bad = make_op("stablehlo.get_tuple_element", [TupleType(tuple(ttypes))], [ttypes[1]],
                  {"index": i64(2)})
    with pytest.raises(InterpreterError, match="out of range"):
        call1(bad, value)


def test_get_dimension_size_is_i32():
    op = make_op("stablehlo.get_dimension_size", [ttype((2, 3), np.int64)],
                 [TensorType((), I32)], {"dimension": i64(1)})
    result = call1(op, np.zeros((2, 3), np.int64))
    assert result.dtype == np.int32 and result == 3


def test_set_dimension_size_static_passes_through():
    op = make_op("stablehlo.set_dimension_size", [ttype((2, 3), np.int64), ttype((), np.int32)],
                 [ttype((2, 3), np.int64)], {"dimension": i64(1)})
    operand = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(call1(op, operand, np.int32(2)), operand)


def test_errors_name_the_op():
    op = make_op("stablehlo.transpose", [ttype((2, 3), np.int64)], [ttype((3, 2), np.int64)],
                 {"permutation": i64s([0, 0])})
    with pytest.raises(InterpreterError, match="stablehlo.transpose.*permutation"):
        call1(op, np.zeros((2, 3), np.int64))


@pytest.mark.parametrize("name,attrs", [
    ("stablehlo.broadcast_in_dim", {"broadcast_dimensions": i64s([])}),
    ("stablehlo.transpose", {"permutation": i64s([])}),
    ("stablehlo.reverse", {"dimensions": i64s([])}),
    ("stablehlo.reshape", {}),
    ("stablehlo.slice", {"start_indices": i64s([]), "limit_indices": i64s([]),
                         "strides": i64s([])}),
])
def test_scalars_stay_scalars(name, attrs):
    result = unary(name, np.array(7, np.int16), (), **attrs)
    assert result.shape == () and result.dtype == np.int16 and result == 7


def test_pad_of_empty_operand():
    op = make_op("stablehlo.pad", [ttype((0, 2), np.int8), ttype((), np.int8)],
                 [ttype((2, 4), np.int8)],
                 {"edge_padding_low": i64s([1, 0]), "edge_padding_high": i64s([1, 1]),
                  "interior_padding": i64s([3, 1])})
    np.testing.assert_array_equal(call1(op, np.zeros((0, 2), np.int8), np.int8(4)),
                                  np.full((2, 4), 4))
