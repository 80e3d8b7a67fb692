"""Tests of sort and map.

References: the spec's and interpreter suite's examples, Python's stable
``sorted`` with a key that encodes the comparator's order, and the three sort
strategies (numpy argsort, lane-wise merge sort, one region call per
comparison) compared with each other on random data with many ties.
"""
import functools

import ml_dtypes
import numpy as np
import pytest

import stablehlo.interpreter.sort as sort_module
from kernel_harness import (FakeCtx, binary_region, boolean, call, call1, force_slow_path,
                            i64, i64s, make_op, region, ttype, use_test_kernels)
from stablehlo.errors import InterpreterError

RNG = np.random.default_rng(2)


def sort_op(inputs, comparator, dimension=0, is_stable=True):
    types = [ttype(x.shape, x.dtype) for x in inputs]
    return make_op("stablehlo.sort", types, types,
                   {"dimension": i64(dimension), "is_stable": boolean(is_stable)}, [comparator])


def compare_region(direction, dtypes, compare_type=None, swapped=False):
    def recipe(b, *args):
        lhs, rhs = (args[1], args[0]) if swapped else (args[0], args[1])
        return b.compare(direction, lhs, rhs, compare_type)
    return region([d for d in dtypes for _ in range(2)], recipe)


def jax_total_order_region(dtype):
    """The comparator jax.lax.sort emits for floats: -0 -> +0, NaN -> canonical NaN."""
    def canonical(b, x):
        zero = b.constant(0, dtype)
        is_zero = b.compare("EQ", x, zero, "FLOAT")
        x = b.op("stablehlo.select", [is_zero, b.constant(0, dtype), x], dtype)
        is_nan = b.compare("NE", x, x, "FLOAT")
        return b.op("stablehlo.select", [is_nan, b.constant(np.nan, dtype), x], dtype)

    def recipe(b, lhs, rhs, *rest):
        return b.compare("LT", canonical(b, lhs), canonical(b, rhs), "TOTALORDER")
    return recipe


def reference_sort(columns, key):
    """Stable sort of equal-length 1-d columns by ``key(column0 value)``."""
    order = sorted(range(len(columns[0])), key=lambda i: key(columns[0][i]))
    return [np.asarray(c)[order] for c in columns]


# -- examples


def test_sort_spec_example_descending_by_first_operand():
    a = np.array([[1, 2, 3], [3, 2, 1]])
    b = np.array([[3, 2, 1], [1, 2, 3]])
    r0, r1 = call(sort_op([a, b], compare_region("GT", [np.int64, np.int64])), a, b)
    np.testing.assert_array_equal(r0, [[3, 2, 3], [1, 2, 1]])
    np.testing.assert_array_equal(r1, [[1, 2, 1], [3, 2, 3]])


def test_sort_interpreter_suite_issue_2440():
    x = np.array([[0, 1, 1, -3, -3, -2, 0], [4, -1, 3, 0, 4, 0, -3], [1, 0, 0, 0, 0, 2, 3],
                  [-3, -4, -4, -2, 0, 3, 3], [0, 5, 2, -2, 0, -2, 0]])
    (r,) = call(sort_op([x], compare_region("LT", [np.int64], "SIGNED"), is_stable=False), x)
    np.testing.assert_array_equal(r, np.sort(x, axis=0))


# -- strategies agree


def _ties(n, dtype):
    return RNG.integers(-3, 4, size=n).astype(dtype)


@pytest.mark.parametrize("strategy", ["argsort", "lanes", "python"])
@pytest.mark.parametrize("direction", ["LT", "GT"])
@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.float32, ml_dtypes.bfloat16,
                                   np.bool_, ml_dtypes.int4])
def test_single_key_sort_is_stable(strategy, direction, dtype, monkeypatch):
    use_test_kernels(monkeypatch)
    keys = _ties(37, dtype)
    payload = np.arange(37, dtype=np.int32)
    comparator = compare_region(direction, [dtype, np.int32])
    if strategy == "lanes":  # a no-op select defeats the single-compare recogniser
        comparator = region([dtype, dtype, np.int32, np.int32], lambda b, x, y, p, q: b.op(
            "stablehlo.select", [b.compare(direction, x, y), b.compare(direction, x, y),
                                 b.compare(direction, x, y)], np.bool_))
    if strategy == "python":
        force_slow_path(monkeypatch, sort_module)
    ctx = FakeCtx()
    r_keys, r_payload = call(sort_op([keys, payload], comparator), keys, payload, ctx=ctx)
    sign = 1 if direction == "LT" else -1
    e_keys, e_payload = reference_sort([keys, payload], lambda k: sign * float(k))
    np.testing.assert_array_equal(r_keys, e_keys)
    np.testing.assert_array_equal(r_payload, e_payload)
    assert (ctx.region_calls > 0) == (strategy == "python")


def _total_order_key(x):
    x = float(x)
    if np.isnan(x):
        return (2 if not np.signbit(x) else 0, 0.0, 0)
    return (1, x, 0 if np.signbit(x) else 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("strategy", ["argsort", "python"])
def test_total_order_single_compare(dtype, strategy, monkeypatch):
    use_test_kernels(monkeypatch)
    values = np.array([np.nan, -np.nan, -0.0, 0.0, np.inf, -np.inf, 1.5, -1.5, 0.0, -0.0,
                       np.nan, 2.0], dtype=dtype)
    payload = np.arange(len(values), dtype=np.int64)
    if strategy == "python":
        force_slow_path(monkeypatch, sort_module)
    comparator = compare_region("LT", [dtype, np.int64], "TOTALORDER")
    r_values, r_payload = call(sort_op([values, payload], comparator), values, payload,
                               ctx=FakeCtx())
    _, e_payload = reference_sort([values, payload], _total_order_key)
    np.testing.assert_array_equal(r_payload, e_payload)


@pytest.mark.parametrize("strategy", ["lanes", "python"])
def test_jax_float_comparator_2d(strategy, monkeypatch):
    use_test_kernels(monkeypatch)
    x = RNG.integers(-2, 3, size=(5, 7)).astype(np.float32)
    x[1, 2], x[3, 4], x[0, 0] = np.nan, -0.0, -np.nan
    if strategy == "python":
        force_slow_path(monkeypatch, sort_module)
    comparator = region([np.float32, np.float32], jax_total_order_region(np.float32))
    ctx = FakeCtx()
    (r,) = call(sort_op([x], comparator, dimension=0), x, ctx=ctx)
    canon = lambda v: 0.0 if v == 0 else (np.nan if np.isnan(v) else v)  # noqa: E731
    for col in range(7):
        (expected,) = reference_sort([x[:, col]], lambda v: _total_order_key(canon(v)))
        np.testing.assert_array_equal(r[:, col], expected)
    assert (ctx.region_calls > 0) == (strategy == "python")


@pytest.mark.parametrize("dimension", [0, 1, -1, 2])
def test_sort_along_each_dimension_lanes_vs_argsort(dimension, monkeypatch):
    use_test_kernels(monkeypatch)
    x = RNG.integers(0, 5, size=(3, 4, 6)).astype(np.int16)
    (fast,) = call(sort_op([x], compare_region("LT", [np.int16]), dimension), x)
    lanes_cmp = region([np.int16, np.int16], lambda b, p, q: b.compare(
        "GT", q, b.op("stablehlo.add", [p, b.constant(0, np.int16)], np.int16)))
    (lanes,) = call(sort_op([x], lanes_cmp, dimension), x)
    np.testing.assert_array_equal(fast, np.sort(x, axis=dimension, kind="stable"))
    np.testing.assert_array_equal(lanes, fast)


def test_multi_key_lexicographic_sort_lanes_vs_python(monkeypatch):
    use_test_kernels(monkeypatch)
    a = RNG.integers(0, 3, size=50).astype(np.int32)
    b = RNG.integers(0, 3, size=50).astype(np.float64)
    c = np.arange(50, dtype=np.int64)

    def lexicographic(bld, a0, a1, b0, b1, c0, c1):
        a_lt = bld.compare("LT", a0, a1)
        a_eq = bld.compare("EQ", a0, a1)
        b_gt = bld.compare("GT", b0, b1)
        tie_break = bld.op("stablehlo.and", [a_eq, b_gt], np.bool_)
        return bld.op("stablehlo.or", [a_lt, tie_break], np.bool_)

    comparator = region([np.int32] * 2 + [np.float64] * 2 + [np.int64] * 2, lexicographic)
    op = sort_op([a, b, c], comparator)
    fast = call(op, a, b, c, ctx=FakeCtx())
    force_slow_path(monkeypatch, sort_module)
    slow = call(op, a, b, c, ctx=FakeCtx())
    order = sorted(range(50), key=lambda i: (a[i], -b[i]))
    for f, s, col in zip(fast, slow, (a, b, c)):
        np.testing.assert_array_equal(f, col[order])
        np.testing.assert_array_equal(s, col[order])


def test_inconsistent_comparator_falls_back_and_returns_permutation(monkeypatch):
    # LE is not a strict weak order; any order is acceptable but values must be kept
    use_test_kernels(monkeypatch)
    x = RNG.integers(0, 3, size=20).astype(np.int32)
    comparator = region([np.int32, np.int32], lambda b, p, q: b.op(
        "stablehlo.or", [b.compare("LT", p, q), b.compare("EQ", p, q)], np.bool_))
    (r,) = call(sort_op([x], comparator), x, ctx=FakeCtx())
    np.testing.assert_array_equal(np.sort(r), np.sort(x))
    assert np.all(np.diff(r.astype(np.int64)) >= 0)


def test_merge_sort_gives_a_permutation_or_refuses():
    # comparators that are no strict weak order: never a non-permutation
    refused = 0
    for seed in range(20):
        table = np.random.default_rng(seed).random((40, 40)) < 0.5
        perm = sort_module._merge_sort(lambda lhs, rhs: table[lhs, rhs], 2, 20)
        if perm is None:
            refused += 1
        else:
            assert all(sorted(row) == list(range(20)) for row in perm)
    assert refused > 0


def test_sort_rejects_bad_dimension():
    x = np.zeros((2, 3), np.int32)
    with pytest.raises(InterpreterError, match="stablehlo.sort.*dimension"):
        call(sort_op([x], compare_region("LT", [np.int32]), dimension=2), x)


# -- map


@pytest.mark.parametrize("slow", [False, True])
def test_map_spec_example(slow, monkeypatch):
    use_test_kernels(monkeypatch)
    if slow:
        force_slow_path(monkeypatch, sort_module)
    a, b = np.array([[0, 1], [2, 3]]), np.array([[4, 5], [6, 7]])
    op = make_op("stablehlo.map", [ttype((2, 2), np.int64)] * 2, [ttype((2, 2), np.int64)],
                 {"dimensions": i64s([0, 1])}, [binary_region("stablehlo.multiply", np.int64)])
    ctx = FakeCtx()
    np.testing.assert_array_equal(call1(op, a, b, ctx=ctx), [[0, 5], [12, 21]])
    assert ctx.region_calls == (4 if slow else 0)


def test_map_constant_region_broadcasts(monkeypatch):
    use_test_kernels(monkeypatch)
    use_region = region([np.float32], lambda b, x: b.constant(2.5, np.float32))
    op = make_op("stablehlo.map", [ttype((3,), np.float32)], [ttype((3,), np.float32)],
                 {"dimensions": i64s([0])}, [use_region])
    ctx = FakeCtx()
    result = call1(op, np.zeros(3, np.float32), ctx=ctx)
    np.testing.assert_array_equal(result, [2.5, 2.5, 2.5])


# -- real parser, evaluator and elementwise kernels: lane-wise path == per-pair path

JAX_SORT = """
func.func @main(%keys: tensor<6x9xbf16>, %payload: tensor<6x9xi32>)
    -> (tensor<6x9xbf16>, tensor<6x9xi32>) {
  %0:2 = "stablehlo.sort"(%keys, %payload) <{dimension = 1 : i64, is_stable = true}> ({
  ^bb0(%a: tensor<bf16>, %b: tensor<bf16>, %c: tensor<i32>, %d: tensor<i32>):
    %zero = stablehlo.constant dense<0.000000e+00> : tensor<bf16>
    %nan = stablehlo.constant dense<0x7FC0> : tensor<bf16>
    %1 = stablehlo.compare EQ, %a, %zero, FLOAT : (tensor<bf16>, tensor<bf16>) -> tensor<i1>
    %2 = stablehlo.select %1, %zero, %a : tensor<i1>, tensor<bf16>
    %3 = stablehlo.compare NE, %a, %a, FLOAT : (tensor<bf16>, tensor<bf16>) -> tensor<i1>
    %4 = stablehlo.select %3, %nan, %2 : tensor<i1>, tensor<bf16>
    %5 = stablehlo.compare EQ, %b, %zero, FLOAT : (tensor<bf16>, tensor<bf16>) -> tensor<i1>
    %6 = stablehlo.select %5, %zero, %b : tensor<i1>, tensor<bf16>
    %7 = stablehlo.compare NE, %b, %b, FLOAT : (tensor<bf16>, tensor<bf16>) -> tensor<i1>
    %8 = stablehlo.select %7, %nan, %6 : tensor<i1>, tensor<bf16>
    %9 = stablehlo.compare GT, %4, %8, TOTALORDER : (tensor<bf16>, tensor<bf16>) -> tensor<i1>
    stablehlo.return %9 : tensor<i1>
  }) : (tensor<6x9xbf16>, tensor<6x9xi32>) -> (tensor<6x9xbf16>, tensor<6x9xi32>)
  return %0#0, %0#1 : tensor<6x9xbf16>, tensor<6x9xi32>
}
"""


def test_jax_comparator_lanes_equal_per_pair_with_real_kernels(monkeypatch):
    interpreter = pytest.importorskip("stablehlo.interpreter")
    from stablehlo.text import parse_module
    keys = RNG.integers(-2, 3, size=(6, 9)).astype(ml_dtypes.bfloat16)
    keys[0, :3] = [np.nan, -0.0, 0.0]
    keys[2, 4] = -np.nan
    payload = np.arange(54, dtype=np.int32).reshape(6, 9)
    with monkeypatch.context() as patch:  # the lane-wise merge sort must do it alone
        patch.setattr(sort_module, "_python_sort", None)
        fast = interpreter.evaluate(parse_module(JAX_SORT), [keys, payload])
    force_slow_path(monkeypatch, sort_module)
    slow = interpreter.evaluate(parse_module(JAX_SORT), [keys, payload])
    canon = lambda v: 0.0 if v == 0 else (np.nan if np.isnan(v) else v)  # noqa: E731
    for row in range(6):
        key = [_total_order_key(canon(float(k))) for k in keys[row]]
        descending = functools.cmp_to_key(lambda i, j: (key[j] > key[i]) - (key[i] > key[j]))
        expected = sorted(range(9), key=descending)
        np.testing.assert_array_equal(fast[1][row], payload[row, expected])
    np.testing.assert_array_equal(fast[0].view(np.uint16), slow[0].view(np.uint16))
    np.testing.assert_array_equal(fast[1], slow[1])


def test_single_compare_recogniser():
    from stablehlo.interpreter.region_patterns import single_compare
    assert single_compare(compare_region("LT", [np.int32], "SIGNED")) == ("LT", "SIGNED")
    assert single_compare(compare_region("LT", [np.int32], swapped=True)) == ("GT", None)
    # a compare of the second operand's pair is not a sort on the first operand
    other = region([np.int32] * 4, lambda b, p, q, r, s: b.compare("LT", r, s))
    assert single_compare(other) is None
    assert single_compare(jax_total_order_region_as_region(np.float32)) is None


def jax_total_order_region_as_region(dtype):
    return region([dtype, dtype], jax_total_order_region(dtype))


def test_single_compare_fast_path_skips_region_evaluation(monkeypatch):
    monkeypatch.setattr(sort_module, "LaneBody", None)  # must not be reached
    x = np.array([3, 1, 2, 1], np.int64)
    (r,) = call(sort_op([x], compare_region("LT", [np.int64])), x, ctx=FakeCtx())
    np.testing.assert_array_equal(r, [1, 1, 2, 3])
