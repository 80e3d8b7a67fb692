"""Tests of stablehlo.reduce.

References: the spec's example, plain Python folds over ``sorted`` slices
(integers wrap by explicit modular arithmetic), numpy's argmax, and the
three evaluation strategies (ufunc fast path, lane-wise tree, one region run
per lane) compared with each other.
"""
import ml_dtypes
import numpy as np
import pytest

import stablehlo.interpreter.reducer as reducer_module
import stablehlo.interpreter.reductions  # noqa: F401  (registers the kernel)
from kernel_harness import (FakeCtx, binary_region, call, call1, i64s, make_op, region,
                            ttype, use_test_kernels)
from stablehlo.errors import InterpreterError

RNG = np.random.default_rng(7)


def reduce_op(inputs, inits, body, dims, result_dtypes=None):
    kept = [d for d in range(inputs[0].ndim) if d not in dims]
    shape = [inputs[0].shape[d] for d in kept]
    result_dtypes = result_dtypes or [x.dtype for x in inputs]
    types = [ttype(x.shape, x.dtype) for x in inputs] + [ttype((), v.dtype) for v in inits]
    return make_op("stablehlo.reduce", types, [ttype(shape, d) for d in result_dtypes],
                   {"dimensions": i64s(dims)}, [body])


def python_fold(x, dims, init, fn):
    """Reference: fold fn over the reduced elements of each output, in index order."""
    kept = [d for d in range(x.ndim) if d not in dims]
    out_shape = tuple(x.shape[d] for d in kept)
    out = np.empty(out_shape, dtype=object)
    for index in np.ndindex(*out_shape):
        acc = init
        for inner in np.ndindex(*[x.shape[d] for d in sorted(dims)]):
            full = [0] * x.ndim
            for d, i in zip(kept, index):
                full[d] = i
            for d, i in zip(sorted(dims), inner):
                full[d] = i
            acc = fn(acc, x[tuple(full)])
        out[index] = acc
    return out


def wrap(value, bits, signed):
    value %= 1 << bits
    return value - (1 << bits) if signed and value >= 1 << (bits - 1) else value


def test_spec_example():
    x = np.array([[0, 1, 2, 3, 4, 5]], dtype=np.int64)
    op = reduce_op([x], [np.int64(0)], binary_region("stablehlo.add", np.int64), [1])
    np.testing.assert_array_equal(call1(op, x, np.array(0)), [15])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.uint64])
@pytest.mark.parametrize("name,fn", [
    ("add", lambda a, b: a + b), ("multiply", lambda a, b: a * b),
    ("maximum", max), ("minimum", min), ("and", lambda a, b: a & b),
    ("or", lambda a, b: a | b), ("xor", lambda a, b: a ^ b)])
def test_integer_bodies_wrap_like_modular_arithmetic(dtype, name, fn):
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max, size=(3, 4, 5), dtype=dtype, endpoint=True)
    init = np.array(RNG.integers(info.min, info.max, dtype=dtype, endpoint=True))
    op = reduce_op([x], [init], binary_region(f"stablehlo.{name}", dtype), [0, 2])
    got = call1(op, x, init)
    bits, signed = info.bits, info.min < 0
    expected = python_fold(x.astype(object), [0, 2], int(init),
                           lambda a, b: wrap(fn(int(a), int(b)), bits, signed))
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, expected.astype(dtype))


@pytest.mark.parametrize("name,fn", [("add", np.logical_or), ("multiply", np.logical_and),
                                     ("maximum", np.logical_or), ("minimum", np.logical_and),
                                     ("xor", np.logical_xor)])
def test_boolean_bodies(name, fn):
    x = RNG.integers(0, 2, size=(4, 3)).astype(bool)
    op = reduce_op([x], [np.bool_(False)], binary_region(f"stablehlo.{name}", np.bool_), [0])
    init = np.bool_(name in ("multiply", "minimum"))
    expected = python_fold(x, [0], init, lambda a, b: bool(fn(a, b)))
    np.testing.assert_array_equal(call1(op, x, np.array(init)), expected.astype(bool))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, ml_dtypes.bfloat16, np.float16])
def test_float_sum_folds_in_index_order_rounding_in_the_body_type(dtype):
    """XLA's order (init first, then elements in index order, each sum rounded)."""
    x = RNG.standard_normal((6, 50)).astype(dtype)
    init = np.asarray(0.5, dtype)
    op = reduce_op([x], [init], binary_region("stablehlo.add", dtype), [1])
    got = call1(op, x, init)
    # Each step: the f64 sum of two values of the type is exact here (same
    # magnitudes), then one rounding to the type (via f32, exact for f16/bf16).
    expected = python_fold(x, [1], init, lambda a, b: np.asarray(
        np.float32(np.float64(a) + np.float64(b)) if np.dtype(dtype).itemsize < 8 else
        np.float64(a) + np.float64(b)).astype(dtype))
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, expected.astype(dtype))


def test_general_float_body_folds_in_index_order(monkeypatch):
    """A body the fast path does not recognise (acc - (-x)) folds like XLA's loop."""
    use_test_kernels(monkeypatch)
    body = region([np.float32, np.float32], lambda b, acc, x: b.op(
        "stablehlo.subtract", [acc, b.op("stablehlo.negate", [x], np.float32)], np.float32))
    x = (RNG.standard_normal((5, 40)) * 10.0 ** RNG.integers(-3, 4, (5, 40))).astype(np.float32)
    init = np.float32(0.25)
    got = call1(reduce_op([x], [init], body, [1]), x, init, ctx=FakeCtx())
    expected = python_fold(x, [1], init, lambda a, b: np.float32(a + b))
    np.testing.assert_array_equal(got, expected.astype(np.float32))


def test_long_float_sums_use_an_accurate_tree():
    x = RNG.standard_normal((3, 5000)).astype(ml_dtypes.bfloat16)
    init = np.asarray(0, ml_dtypes.bfloat16)
    op = reduce_op([x], [init], binary_region("stablehlo.add", ml_dtypes.bfloat16), [1])
    got = call1(op, x, init).astype(np.float64)
    exact = x.astype(np.float64).sum(axis=1)
    # A sequential bf16 fold of 5000 terms would be off by whole units.
    np.testing.assert_allclose(got, exact, atol=1.0)


def test_float_max_propagates_nan_and_complex_sum():
    x = np.array([[1.0, np.nan], [3.0, -1.0]], dtype=np.float32)
    op = reduce_op([x], [np.float32(-np.inf)], binary_region("stablehlo.maximum", np.float32),
                   [1])
    got = call1(op, x, np.array(-np.inf, np.float32))
    assert np.isnan(got[0]) and got[1] == 3.0
    z = (RNG.standard_normal((3, 4)) + 1j * RNG.standard_normal((3, 4))).astype(np.complex64)
    op = reduce_op([z], [np.complex64(0)], binary_region("stablehlo.add", np.complex64), [0])
    np.testing.assert_allclose(call1(op, z, np.complex64(1j)), z.sum(axis=0) + 1j, rtol=1e-6)


def test_promotable_body_widens_before_reducing():
    x = np.full((10,), 100, dtype=np.int8)
    op = reduce_op([x], [np.int8(0)], binary_region("stablehlo.add", np.int32), [0],
                   result_dtypes=[np.int32])
    got = call1(op, x, np.int8(0))
    assert got.dtype == np.int32 and int(got) == 1000


def argmax_body(value_dtype, index_dtype):
    """The variadic argmax body JAX emits: larger value wins, ties keep the lower index."""
    def recipe(b, acc_v, acc_i, x_v, x_i):
        gt = b.compare("GT", acc_v, x_v)
        eq = b.compare("EQ", acc_v, x_v)
        lower = b.compare("LT", acc_i, x_i)
        tie = b.op("stablehlo.and", [eq, lower], np.bool_)
        pick = b.op("stablehlo.or", [gt, tie], np.bool_)
        value = b.op("stablehlo.select", [pick, acc_v, x_v], value_dtype)
        index = b.op("stablehlo.select", [pick, acc_i, x_i], index_dtype)
        return [value, index]
    return region([value_dtype, index_dtype, value_dtype, index_dtype], recipe)


@pytest.mark.parametrize("lane_wise", [True, False])
def test_variadic_argmax_matches_numpy(monkeypatch, lane_wise):
    use_test_kernels(monkeypatch)
    if not lane_wise:
        monkeypatch.setattr(reducer_module.LaneBody, "__init__",
                            lambda self, ctx, region: setattr(self, "accepts", False))
    x = RNG.integers(0, 5, size=(4, 37)).astype(np.float32)  # many ties
    idx = np.broadcast_to(np.arange(37, dtype=np.int32), x.shape).copy()
    op = reduce_op([x, idx], [np.float32(-np.inf), np.int32(0)],
                   argmax_body(np.float32, np.int32), [1])
    ctx = FakeCtx()
    values, indices = call(op, x, idx, np.float32(-np.inf), np.int32(0), ctx=ctx)
    np.testing.assert_array_equal(indices, np.argmax(x, axis=1))
    np.testing.assert_array_equal(values, x.max(axis=1))
    if lane_wise:
        assert ctx.region_calls == 0  # every level ran on arrays, never per lane
    else:
        assert ctx.region_calls == 4 * 37  # K - 1 merges plus the init, per lane


def test_independent_variadic_body_uses_each_pair():
    """reducer(%a0, %b0) (%a1, %b1): result i combines only pair i (spec pairing)."""
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    y = RNG.integers(-50, 50, size=(4, 6)).astype(np.int32)

    def recipe(b, acc0, acc1, x0, x1):
        return [b.op("stablehlo.maximum", [acc0, x0], np.float32),
                b.op("stablehlo.minimum", [acc1, x1], np.int32)]
    body = region([np.float32, np.int32, np.float32, np.int32], recipe)
    op = reduce_op([x, y], [np.float32(-np.inf), np.int32(2 ** 31 - 1)], body, [0])
    got_x, got_y = call(op, x, y, np.float32(-np.inf), np.int32(2 ** 31 - 1))
    np.testing.assert_array_equal(got_x, x.max(axis=0))
    np.testing.assert_array_equal(got_y, y.min(axis=0))


def test_empty_reduction_gives_init_and_odd_sizes_keep_order(monkeypatch):
    use_test_kernels(monkeypatch)
    x = np.zeros((3, 0), dtype=np.float32)
    op = reduce_op([x], [np.float32(7)], binary_region("stablehlo.add", np.float32), [1])
    np.testing.assert_array_equal(call1(op, x, np.float32(7)), [7, 7, 7])
    # A body returning its right argument yields the rightmost leaf of the
    # schedule: the last element, since the in-order traversal keeps input
    # order (spec); one returning its left argument yields the init value.
    take_right = region([np.int64, np.int64], lambda b, a, c: c)
    take_left = region([np.int64, np.int64], lambda b, a, c: a)
    for size in (1, 2, 3, 5, 8, 13):
        x = RNG.integers(0, 1000, size=(2, size)).astype(np.int64)
        got = call1(reduce_op([x], [np.int64(-1)], take_right, [1]), x, np.int64(-1))
        np.testing.assert_array_equal(got, x[:, -1])
        got = call1(reduce_op([x], [np.int64(-1)], take_left, [1]), x, np.int64(-1))
        np.testing.assert_array_equal(got, [-1, -1])


def test_bad_dimensions_name_the_op():
    x = np.zeros((2, 3), dtype=np.float32)
    op = reduce_op([x], [np.float32(0)], binary_region("stablehlo.add", np.float32), [0])
    op.attributes["dimensions"] = i64s([2])
    with pytest.raises(InterpreterError, match="stablehlo.reduce"):
        call(op, x, np.float32(0))
