"""Tests of reduce_window and select_and_scatter.

References: the spec's and interpreter suite's examples, XLA through JAX
(``lax.reduce_window``; the gradient of max pooling, which XLA computes with
select_and_scatter), and explicit Python loops over windows.
"""
import numpy as np
import pytest

import stablehlo.interpreter.windows  # noqa: F401  (registers the kernels)
from kernel_harness import (FakeCtx, binary_region, call, call1, i64s, make_op, region,
                            ttype, use_test_kernels)
from stablehlo.errors import InterpreterError
from stablehlo.ir.attributes import DenseElementsAttr
from stablehlo.ir.types import I64, TensorType

RNG = np.random.default_rng(11)


def padding_attr(pairs):
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    return DenseElementsAttr(TensorType(pairs.shape, I64), pairs)


def window_op(name, operand_types, result_types, regions, window, strides=None, padding=None,
              base=None, dilations=None):
    attrs = {"window_dimensions": i64s(window)}
    if strides is not None:
        attrs["window_strides"] = i64s(strides)
    if padding is not None:
        attrs["padding"] = padding_attr(padding)
    if base is not None:
        attrs["base_dilations"] = i64s(base)
    if dilations is not None:
        attrs["window_dilations"] = i64s(dilations)
    return make_op(name, operand_types, result_types, attrs, regions)


def reduce_window_op(x, init, body, result_shape, **kw):
    return window_op("stablehlo.reduce_window", [ttype(x.shape, x.dtype), ttype((), init.dtype)],
                     [ttype(result_shape, init.dtype)], [body], **kw)


def test_spec_example():
    x = np.array([[1, 2], [3, 4], [5, 6]], dtype=np.int64)
    op = reduce_window_op(x, np.int64(0), binary_region("stablehlo.add", np.int64), (2, 2),
                          window=[2, 1], strides=[4, 1], padding=[[2, 1], [0, 0]],
                          base=[2, 1], dilations=[3, 1])
    np.testing.assert_array_equal(call1(op, x, np.int64(0)), [[0, 0], [3, 4]])


def test_interpreter_suite_issue_1662():
    x = np.array([[1, 2], [3, 4], [5, 6]], dtype=np.int64)
    op = reduce_window_op(x, np.int64(0), binary_region("stablehlo.add", np.int64), (1, 2),
                          window=[3, 1], strides=[4, 1], padding=[[2, 1], [0, 0]],
                          base=[2, 1], dilations=[3, 1])
    np.testing.assert_array_equal(call1(op, x, np.int64(0)), [[5, 6]])


def random_window_config(rank):
    window = [int(v) for v in RNG.integers(1, 4, rank)]
    strides = [int(v) for v in RNG.integers(1, 3, rank)]
    base = [int(v) for v in RNG.integers(1, 3, rank)]
    dilations = [int(v) for v in RNG.integers(1, 3, rank)]
    padding = [[int(a), int(b)] for a, b in RNG.integers(0, 3, (rank, 2))]
    return window, strides, base, dilations, padding


@pytest.mark.parametrize("seed", range(12))
def test_reduce_window_matches_xla(seed):
    from jax import lax
    rank = 1 + seed % 3
    window, strides, base, dilations, padding = random_window_config(rank)
    x = RNG.integers(-20, 20, size=RNG.integers(1, 6, rank)).astype(np.float32)
    for name, computation, init in (("maximum", lax.max, -np.inf), ("add", lax.add, 0.0)):
        expected = np.asarray(lax.reduce_window(
            x, np.float32(init), computation, window, strides,
            [tuple(p) for p in padding], base, dilations))
        init = np.float32(init)
        op = reduce_window_op(x, init, binary_region(f"stablehlo.{name}", np.float32),
                              expected.shape, window=window, strides=strides,
                              padding=padding, base=base, dilations=dilations)
        np.testing.assert_array_equal(call1(op, x, init), expected)


def test_general_body_runs_lane_wise_and_matches_fast_path(monkeypatch):
    use_test_kernels(monkeypatch)
    x = RNG.standard_normal((7, 9)).astype(np.float32)
    init = np.float32(-np.inf)

    def max_by_select(b, acc, v):
        return b.op("stablehlo.select", [b.compare("GT", acc, v), acc, v], np.float32)
    kw = dict(window=[3, 2], strides=[2, 1], padding=[[1, 1], [0, 1]])
    slow = reduce_window_op(x, init, region([np.float32] * 2, max_by_select), (4, 9), **kw)
    fast = reduce_window_op(x, init, binary_region("stablehlo.maximum", np.float32), (4, 9),
                            **kw)
    ctx = FakeCtx()
    np.testing.assert_array_equal(call1(slow, x, init, ctx=ctx), call1(fast, x, init))
    assert ctx.region_calls == 0


def test_cumulative_sum_layout_and_defaults():
    """JAX's cumsum: window N, padding N-1 in front, strides/dilations omitted."""
    x = RNG.integers(-100, 100, size=(8, 9)).astype(np.int16)
    op = reduce_window_op(x, np.int16(0), binary_region("stablehlo.add", np.int16), (8, 9),
                          window=[8, 1], padding=[[7, 0], [0, 0]])
    np.testing.assert_array_equal(call1(op, x, np.int16(0)), np.cumsum(x, axis=0, dtype=np.int16))


def test_negative_padding_crops():
    x = np.arange(6, dtype=np.int32)
    # padding -1 drops x[0]; windows of 2 over [1, 2, 3, 4, 5]
    op = reduce_window_op(x, np.int32(0), binary_region("stablehlo.add", np.int32), (4,),
                          window=[2], padding=[[-1, 0]])
    np.testing.assert_array_equal(call1(op, x, np.int32(0)), [3, 5, 7, 9])


def select_and_scatter_op(operand, source, init, select, scatter, **kw):
    types = [ttype(operand.shape, operand.dtype), ttype(source.shape, source.dtype),
             ttype((), init.dtype)]
    return window_op("stablehlo.select_and_scatter", types,
                     [ttype(operand.shape, init.dtype)], [select, scatter], **kw)


def ge_region(dtype):
    return region([dtype, dtype], lambda b, x, y: b.compare("GE", x, y))


def test_select_and_scatter_spec_example():
    operand = np.array([[1, 5], [2, 5], [3, 6], [4, 4]], dtype=np.int64)
    source = np.array([[5, 6], [7, 8]], dtype=np.int64)
    op = select_and_scatter_op(operand, source, np.int64(0), ge_region(np.int64),
                               binary_region("stablehlo.add", np.int64), window=[3, 1],
                               strides=[2, 1], padding=[[0, 1], [0, 0]])
    np.testing.assert_array_equal(call1(op, operand, source, np.int64(0)),
                                  [[0, 0], [0, 0], [5, 14], [7, 0]])


@pytest.mark.parametrize("seed", range(8))
def test_select_and_scatter_matches_xla_max_pool_gradient(seed):
    import jax
    from jax import lax
    rank = 1 + seed % 3
    window = [int(v) for v in RNG.integers(1, 4, rank)]
    strides = [int(v) for v in RNG.integers(1, 3, rank)]
    padding = [(int(a), int(b)) for a, b in RNG.integers(0, 2, (rank, 2))]
    # Distinct values, so the selected element does not depend on tie-breaking.
    size = RNG.integers(2, 7, rank)
    x = RNG.permutation(int(np.prod(size))).reshape(size).astype(np.float32)

    def pool(v):
        return lax.reduce_window(v, -np.inf, lax.max, window, strides, padding)
    out, vjp = jax.vjp(pool, x)
    source = RNG.standard_normal(out.shape).astype(np.float32)
    (expected,) = vjp(source)
    op = select_and_scatter_op(x, source, np.float32(0), ge_region(np.float32),
                               binary_region("stablehlo.add", np.float32), window=window,
                               strides=strides, padding=[list(p) for p in padding])
    np.testing.assert_allclose(call1(op, x, source, np.float32(0)), np.asarray(expected),
                               rtol=1e-6, atol=1e-6)


def test_select_and_scatter_general_scatter_body_folds_in_source_order(monkeypatch):
    """Overlapping windows send several source values to one element; a body that
    keeps the larger value reveals every contribution is folded with the init."""
    use_test_kernels(monkeypatch)
    operand = np.array([1, 9, 2, 3, 0], dtype=np.int32)
    source = np.array([4, 7, 5, 1], dtype=np.int32)  # windows of 2, stride 1
    scatter_max = region([np.int32, np.int32], lambda b, acc, v: b.op(
        "stablehlo.select", [b.compare("GT", acc, v), acc, v], np.int32))
    op = select_and_scatter_op(operand, source, np.int32(-1), ge_region(np.int32), scatter_max,
                               window=[2], strides=[1])
    # windows: [1,9]->1, [9,2]->1, [2,3]->3, [3,0]->3
    np.testing.assert_array_equal(call1(op, operand, source, np.int32(-1), ctx=FakeCtx()),
                                  [-1, 7, -1, 5, -1])


def test_missing_window_dimensions_is_a_clear_error():
    x = np.zeros((3,), dtype=np.float32)
    op = reduce_window_op(x, np.float32(0), binary_region("stablehlo.add", np.float32), (3,),
                          window=[1])
    del op.attributes["window_dimensions"]
    with pytest.raises(InterpreterError, match="window_dimensions"):
        call(op, x, np.float32(0))
