"""Tests of gather, dynamic_gather, scatter and torch_index_select.

References: the spec's examples (expected values copied from docs/spec.md and
the interpreter suite), and per-element loops that transcribe the spec's
index formulas literally (``gather_reference``, ``scatter_reference``).
Scatter's three ways of applying the region are compared with each other.
"""
import itertools

import ml_dtypes
import numpy as np
import pytest

import stablehlo.interpreter.indexing as indexing
from kernel_harness import (FakeCtx, binary_region, boolean, call, call1, force_slow_path,
                            gather_dims, i64, i64s, make_op, region, scatter_dims, ttype,
                            use_test_kernels)
from stablehlo.errors import InterpreterError

RNG = np.random.default_rng(1)

SPEC_OPERAND = np.arange(1, 49).reshape(2, 3, 4, 2)
SPEC_INDICES = np.array([[[[0, 0], [1, 0], [2, 1]], [[0, 1], [1, 1], [0, 9]]],
                         [[[0, 0], [2, 1], [2, 2]], [[1, 2], [0, 1], [1, 0]]]])


# ---------------------------------------------------------------------------
# references


def _index_vector(indices, batch_index, ivd):
    if ivd < indices.ndim:
        index = list(batch_index)
        index.insert(ivd, slice(None))
        return [int(v) for v in indices[tuple(index)]]
    return [int(indices[tuple(batch_index)])]


def gather_reference(operand, indices, dn, slice_sizes, result_shape):
    f = dict(dn.fields)
    result = np.zeros(result_shape, operand.dtype)
    batch_dims = [d for d in range(len(result_shape)) if d not in f["offset_dims"]]
    for result_index in itertools.product(*map(range, result_shape)):
        batch_index = [result_index[d] for d in batch_dims]
        start = _index_vector(indices, batch_index, f["index_vector_dim"])
        full_start = [0] * operand.ndim
        for k, d in enumerate(f["start_index_map"]):
            full_start[d] = min(max(start[k], 0), operand.shape[d] - slice_sizes[d])
        full_batching = [0] * operand.ndim
        for d, ds in zip(f["operand_batching_dims"], f["start_indices_batching_dims"]):
            full_batching[d] = batch_index[ds - (0 if ds < f["index_vector_dim"] else 1)]
        offset = [result_index[d] for d in f["offset_dims"]]
        full_offset = []
        for d in range(operand.ndim):
            skipped = d in f["collapsed_slice_dims"] or d in f["operand_batching_dims"]
            full_offset.append(0 if skipped else offset.pop(0))
        source = tuple(a + b + c for a, b, c in zip(full_start, full_batching, full_offset))
        result[result_index] = operand[source]
    return result


def scatter_reference(inputs, indices, updates, dn, combine):
    """Sequential scatter in row-major update order; ``combine(olds, news) -> news``."""
    f = dict(dn.fields)
    results = [x.copy() for x in inputs]
    ivd = f["index_vector_dim"]
    scatter_dims = [d for d in range(updates[0].ndim) if d not in f["update_window_dims"]]
    for update_index in itertools.product(*map(range, updates[0].shape)):
        scatter_index = [update_index[d] for d in scatter_dims]
        start = _index_vector(indices, scatter_index, ivd)
        full_start = [0] * inputs[0].ndim
        for k, d in enumerate(f["scatter_dims_to_operand_dims"]):
            full_start[d] = start[k]
        full_batching = [0] * inputs[0].ndim
        for d, ds in zip(f["input_batching_dims"], f["scatter_indices_batching_dims"]):
            full_batching[d] = scatter_index[ds - (0 if ds < ivd else 1)]
        window = [update_index[d] for d in f["update_window_dims"]]
        full_window = []
        for d in range(inputs[0].ndim):
            skipped = d in f["inserted_window_dims"] or d in f["input_batching_dims"]
            full_window.append(0 if skipped else window.pop(0))
        target = tuple(a + b + c for a, b, c in zip(full_start, full_batching, full_window))
        if all(0 <= t < s for t, s in zip(target, inputs[0].shape)):
            news = combine([r[target] for r in results], [u[update_index] for u in updates])
            for r, v in zip(results, news):
                r[target] = v
    return results


# ---------------------------------------------------------------------------
# gather


def gather_op(operand, indices, dn, slice_sizes, result_shape):
    return make_op("stablehlo.gather", [ttype(operand.shape, operand.dtype),
                                        ttype(indices.shape, indices.dtype)],
                   [ttype(result_shape, operand.dtype)],
                   {"dimension_numbers": dn, "slice_sizes": i64s(slice_sizes)})


SPEC_GATHER_DN = gather_dims(offset_dims=[3, 4], collapsed_slice_dims=[1],
                             operand_batching_dims=[0], start_indices_batching_dims=[1],
                             start_index_map=[2, 1], index_vector_dim=3)


def test_gather_spec_example():
    op = gather_op(SPEC_OPERAND, SPEC_INDICES, SPEC_GATHER_DN, [1, 1, 2, 2], (2, 2, 3, 2, 2))
    result = call1(op, SPEC_OPERAND, SPEC_INDICES)
    expected = [[[[[1, 2], [3, 4]], [[3, 4], [5, 6]], [[13, 14], [15, 16]]],
                 [[[33, 34], [35, 36]], [[35, 36], [37, 38]], [[41, 42], [43, 44]]]],
                [[[[1, 2], [3, 4]], [[13, 14], [15, 16]], [[21, 22], [23, 24]]],
                 [[[43, 44], [45, 46]], [[33, 34], [35, 36]], [[27, 28], [29, 30]]]]]
    np.testing.assert_array_equal(result, expected)


def test_dynamic_gather_spec_example():
    operand = np.arange(1, 25).reshape(3, 4, 2)
    indices = np.array([[[0, 0], [1, 0], [2, 1]], [[0, 1], [1, 1], [0, 2]]])
    dn = gather_dims(offset_dims=[2, 3], collapsed_slice_dims=[0], start_index_map=[1, 0],
                     index_vector_dim=2)
    op = make_op("stablehlo.dynamic_gather",
                 [ttype((3, 4, 2), np.int64), ttype((2, 3, 2), np.int64), ttype((3,), np.int64)],
                 [ttype((2, 3, 2, 2), np.int64)], {"dimension_numbers": dn})
    result = call1(op, operand, indices, np.array([1, 2, 2]))
    expected = [[[[1, 2], [3, 4]], [[3, 4], [5, 6]], [[13, 14], [15, 16]]],
                [[[9, 10], [11, 12]], [[11, 12], [13, 14]], [[17, 18], [19, 20]]]]
    np.testing.assert_array_equal(result, expected)


GATHER_CASES = [
    # (operand shape, indices shape, dims, slice sizes)
    ((5, 4), (3, 1), dict(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
                          index_vector_dim=1), [1, 4]),
    ((5, 4), (3,), dict(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
                        index_vector_dim=1), [1, 3]),
    ((6, 7, 3), (2, 4, 2), dict(offset_dims=[1, 3], collapsed_slice_dims=[1],
                                start_index_map=[0, 1], index_vector_dim=2), [2, 1, 3]),
    ((3, 4), (3, 1, 1), dict(collapsed_slice_dims=[1], operand_batching_dims=[0],
                             start_indices_batching_dims=[0], start_index_map=[1],
                             index_vector_dim=2), [1, 1]),
    ((4, 5, 6), (2, 4), dict(offset_dims=[2, 3], operand_batching_dims=[0],
                             start_indices_batching_dims=[1], start_index_map=[2],
                             index_vector_dim=2), [1, 5, 2]),
    ((5, 4), (0, 1), dict(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
                          index_vector_dim=1), [1, 4]),
    ((5, 4), (3, 0), dict(offset_dims=[1, 2], start_index_map=[], index_vector_dim=1), [2, 4]),
]


def gather_result_shape(indices_shape, f, slice_sizes):
    ivd = f.get("index_vector_dim", 0)
    batch = [s for d, s in enumerate(indices_shape) if d != ivd]
    offsets = [s for d, s in enumerate(slice_sizes)
               if d not in f.get("collapsed_slice_dims", ())
               and d not in f.get("operand_batching_dims", ())]
    rank = len(batch) + len(offsets)
    shape = []
    for d in range(rank):
        shape.append(offsets.pop(0) if d in f.get("offset_dims", ()) else batch.pop(0))
    return tuple(shape)


@pytest.mark.parametrize("case", range(len(GATHER_CASES)))
@pytest.mark.parametrize("index_dtype", [np.int32, np.uint8, np.int64])
def test_gather_matches_reference(case, index_dtype):
    operand_shape, indices_shape, f, slice_sizes = GATHER_CASES[case]
    operand = RNG.standard_normal(operand_shape).astype(np.float32)
    low = 0 if np.dtype(index_dtype).kind == "u" else -3
    indices = RNG.integers(low, 9, size=indices_shape).astype(index_dtype)
    dn = gather_dims(**f)
    shape = gather_result_shape(indices_shape, f, slice_sizes)
    result = call1(gather_op(operand, indices, dn, slice_sizes, shape), operand, indices)
    np.testing.assert_array_equal(result, gather_reference(operand, indices, dn, slice_sizes,
                                                           shape))


def test_gather_agrees_with_jax():
    lax = pytest.importorskip("jax.lax")
    operand = RNG.standard_normal((4, 5, 6)).astype(np.float32)
    indices = RNG.integers(-2, 7, size=(4, 3, 1)).astype(np.int32)
    jdn = lax.GatherDimensionNumbers(offset_dims=(2,), collapsed_slice_dims=(2,),
                                     start_index_map=(2,), operand_batching_dims=(0,),
                                     start_indices_batching_dims=(0,))
    expected = np.asarray(lax.gather(operand, indices, jdn, (1, 5, 1),
                                     mode=lax.GatherScatterMode.CLIP))
    dn = gather_dims(offset_dims=[2], collapsed_slice_dims=[2], operand_batching_dims=[0],
                     start_indices_batching_dims=[0], start_index_map=[2], index_vector_dim=2)
    result = call1(gather_op(operand, indices, dn, [1, 5, 1], expected.shape), operand, indices)
    np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize("dtype", [np.bool_, ml_dtypes.bfloat16, ml_dtypes.int4,
                                   np.complex128])
def test_gather_element_types(dtype):
    operand = (RNG.integers(-3, 4, size=(4, 3)) + 0).astype(dtype)
    indices = np.array([[2], [0], [7]])
    dn = gather_dims(offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
                     index_vector_dim=1)
    result = call1(gather_op(operand, indices, dn, [1, 3], (3, 3)), operand, indices)
    assert result.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(result, operand[[2, 0, 3]])


# ---------------------------------------------------------------------------
# torch_index_select


def test_torch_index_select_with_batch_dims():
    operand = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    index = RNG.integers(0, 4, size=(2, 6))
    op = make_op("stablehlo.torch_index_select",
                 [ttype(operand.shape, np.float32), ttype(index.shape, np.int64)],
                 [ttype((2, 3, 6, 5), np.float32)], {"dim": i64(2), "batch_dims": i64(1)})
    result = call1(op, operand, index)
    for b, o, i, p in itertools.product(range(2), range(3), range(6), range(5)):
        assert result[b, o, i, p] == operand[b, o, index[b, i], p]


def test_torch_index_select_no_batch_is_take():
    operand = np.arange(12).reshape(3, 4)
    index = np.array([[2, 0], [1, 1]], np.int32)
    op = make_op("stablehlo.torch_index_select",
                 [ttype((3, 4), np.int64), ttype((2, 2), np.int32)],
                 [ttype((3, 2, 2), np.int64)], {"dim": i64(1), "batch_dims": i64(0)})
    np.testing.assert_array_equal(call1(op, operand, index), np.take(operand, index, axis=1))


# ---------------------------------------------------------------------------
# scatter


def scatter_op(inputs, indices, updates, dn, update_region, result_dtypes=None):
    result_dtypes = result_dtypes or [x.dtype for x in inputs]
    types = ([ttype(x.shape, x.dtype) for x in inputs] + [ttype(indices.shape, indices.dtype)]
             + [ttype(u.shape, u.dtype) for u in updates])
    return make_op("stablehlo.scatter", types,
                   [ttype(inputs[0].shape, d) for d in result_dtypes],
                   {"scatter_dimension_numbers": dn, "indices_are_sorted": boolean(False),
                    "unique_indices": boolean(False)}, [update_region])


SPEC_SCATTER_DN = scatter_dims(update_window_dims=[3, 4], inserted_window_dims=[1],
                               input_batching_dims=[0], scatter_indices_batching_dims=[1],
                               scatter_dims_to_operand_dims=[2, 1], index_vector_dim=3)


def test_scatter_batching_example_and_inputs_untouched(monkeypatch):
    use_test_kernels(monkeypatch)
    inputs = SPEC_OPERAND.copy()
    updates = np.ones((2, 2, 3, 2, 2), np.int64)
    op = scatter_op([inputs], SPEC_INDICES, [updates], SPEC_SCATTER_DN,
                    binary_region("stablehlo.add", np.int64))
    ctx = FakeCtx()
    (result,) = call(op, inputs, SPEC_INDICES, updates, ctx=ctx)
    expected = [[[[3, 4], [6, 7], [6, 7], [7, 8]], [[9, 10], [11, 12], [15, 16], [17, 18]],
                 [[17, 18], [19, 20], [22, 23], [24, 25]]],
                [[[25, 26], [28, 29], [30, 31], [31, 32]], [[35, 36], [38, 39], [38, 39],
                                                            [39, 40]],
                 [[41, 42], [44, 45], [46, 47], [47, 48]]]]
    np.testing.assert_array_equal(result, expected)
    np.testing.assert_array_equal(inputs, SPEC_OPERAND)


SCATTER_CASES = [
    # (input shape, indices shape, updates shape, dims)
    ((5, 3), (7, 1), (7, 3), dict(update_window_dims=[1], inserted_window_dims=[0],
                                  scatter_dims_to_operand_dims=[0], index_vector_dim=1)),
    ((6,), (9,), (9,), dict(inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                            index_vector_dim=1)),
    ((4, 5, 6), (3, 2), (3, 2, 5, 3), dict(update_window_dims=[1, 2, 3],
                                           scatter_dims_to_operand_dims=[0, 2],
                                           index_vector_dim=1)),
    ((3, 4, 2), (2, 3, 2), (2, 3, 2, 2), dict(update_window_dims=[2, 3],
                                              inserted_window_dims=[0],
                                              scatter_dims_to_operand_dims=[1, 0],
                                              index_vector_dim=2)),
    ((3, 5), (3, 4, 1), (3, 4), dict(inserted_window_dims=[1], input_batching_dims=[0],
                                     scatter_indices_batching_dims=[0],
                                     scatter_dims_to_operand_dims=[1], index_vector_dim=2)),
    ((2, 3), (0, 1), (0, 3), dict(update_window_dims=[1], inserted_window_dims=[0],
                                  scatter_dims_to_operand_dims=[0], index_vector_dim=1)),
]


def _random_scatter(case, dtype):
    input_shape, indices_shape, updates_shape, f = SCATTER_CASES[case]
    inputs = RNG.integers(-4, 5, size=input_shape).astype(dtype)
    indices = RNG.integers(-1, 5, size=indices_shape).astype(np.int32)
    updates = RNG.integers(-4, 5, size=updates_shape).astype(dtype)
    return inputs, indices, updates, scatter_dims(**f)


COMBINERS = {
    "stablehlo.add": lambda o, n: [o[0] + n[0]],
    "stablehlo.maximum": lambda o, n: [max(o[0], n[0])],
    "stablehlo.minimum": lambda o, n: [min(o[0], n[0])],
    "stablehlo.multiply": lambda o, n: [o[0] * n[0]],
}


@pytest.mark.parametrize("case", range(len(SCATTER_CASES)))
@pytest.mark.parametrize("name", sorted(COMBINERS))
@pytest.mark.parametrize("slow", [False, True])
def test_scatter_matches_reference(case, name, slow, monkeypatch):
    use_test_kernels(monkeypatch)
    if slow:
        force_slow_path(monkeypatch, indexing)
    inputs, indices, updates, dn = _random_scatter(case, np.int64)
    ctx = FakeCtx()
    op = scatter_op([inputs], indices, [updates], dn, binary_region(name, np.int64))
    (result,) = call(op, inputs, indices, updates, ctx=ctx)
    (expected,) = scatter_reference([inputs], indices, [updates], dn, COMBINERS[name])
    np.testing.assert_array_equal(result, expected)
    if not slow:
        assert ctx.region_calls == 0


@pytest.mark.parametrize("case", range(len(SCATTER_CASES)))
def test_scatter_replace_last_write_wins(case):
    inputs, indices, updates, dn = _random_scatter(case, np.float32)
    replace = region([np.float32, np.float32], lambda b, old, new: new)
    ctx = FakeCtx()
    (result,) = call(scatter_op([inputs], indices, [updates], dn, replace), inputs, indices,
                     updates, ctx=ctx)
    (expected,) = scatter_reference([inputs], indices, [updates], dn, lambda o, n: n)
    np.testing.assert_array_equal(result, expected)
    assert ctx.region_calls == 0


def _float_argmax_region(b, old_value, old_index, new_value, new_index):
    # keep the larger value; on ties keep the smaller index (a two-output region)
    greater = b.compare("GT", new_value, old_value, "FLOAT")
    equal = b.compare("EQ", new_value, old_value, "FLOAT")
    smaller = b.compare("LT", new_index, old_index, "SIGNED")
    take = b.op("stablehlo.or", [greater, b.op("stablehlo.and", [equal, smaller], np.bool_)],
                np.bool_)
    return [b.op("stablehlo.select", [take, new_value, old_value], np.float32),
            b.op("stablehlo.select", [take, new_index, old_index], np.int32)]


@pytest.mark.parametrize("slow", [False, True])
def test_variadic_scatter_with_multi_op_region(slow, monkeypatch):
    use_test_kernels(monkeypatch)
    if slow:
        force_slow_path(monkeypatch, indexing)
    values = RNG.standard_normal(6).astype(np.float32)
    positions = np.zeros(6, np.int32)
    indices = RNG.integers(-1, 7, size=(40, 1)).astype(np.int64)
    new_values = np.round(RNG.standard_normal(40), 1).astype(np.float32)
    new_positions = RNG.integers(0, 9, size=40).astype(np.int32)
    dn = scatter_dims(inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                      index_vector_dim=1)
    argmax = region([np.float32, np.int32, np.float32, np.int32], _float_argmax_region)
    op = scatter_op([values, positions], indices, [new_values, new_positions], dn, argmax)
    ctx = FakeCtx()
    results = call(op, values, positions, indices, new_values, new_positions, ctx=ctx)

    def combine(olds, news):
        take = news[0] > olds[0] or (news[0] == olds[0] and news[1] < olds[1])
        return news if take else olds

    expected = scatter_reference([values, positions], indices, [new_values, new_positions], dn,
                                 combine)
    for r, e in zip(results, expected):
        np.testing.assert_array_equal(r, e)
    assert (ctx.region_calls > 0) == slow


def test_scatter_promotes_to_region_type(monkeypatch):
    # i8 inputs, an i32 accumulator region and i32 results (is_promotable)
    use_test_kernels(monkeypatch)
    inputs = np.full(3, 100, np.int8)
    indices = np.array([[0], [0], [2]])
    updates = np.array([100, 100, 1], np.int8)
    dn = scatter_dims(inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                      index_vector_dim=1)
    op = scatter_op([inputs], indices, [updates], dn, binary_region("stablehlo.add", np.int32),
                    result_dtypes=[np.int32])
    (result,) = call(op, inputs, indices, updates)
    assert result.dtype == np.int32
    np.testing.assert_array_equal(result, [300, 100, 101])


@pytest.mark.parametrize("dtype", [np.bool_, ml_dtypes.bfloat16, np.complex64, ml_dtypes.int4])
def test_scatter_element_types_fast_equals_slow(dtype, monkeypatch):
    use_test_kernels(monkeypatch)
    name = "stablehlo.or" if dtype == np.bool_ else "stablehlo.add"
    inputs, indices, updates, dn = _random_scatter(0, dtype)
    op = scatter_op([inputs], indices, [updates], dn, binary_region(name, dtype))
    (fast,) = call(op, inputs, indices, updates)
    force_slow_path(monkeypatch, indexing)
    (slow,) = call(op, inputs, indices, updates)
    assert fast.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(fast, slow)


def test_scatter_rejects_bad_dimension_numbers():
    inputs, indices, updates, _ = _random_scatter(0, np.float32)
    dn = scatter_dims(update_window_dims=[1], inserted_window_dims=[0, 1],
                      scatter_dims_to_operand_dims=[0], index_vector_dim=1)
    op = scatter_op([inputs], indices, [updates], dn, binary_region("stablehlo.add",
                                                                    np.float32))
    with pytest.raises(InterpreterError, match="stablehlo.scatter"):
        call(op, inputs, indices, updates)


# -- real parser, evaluator and elementwise kernels: rounds == one region call per update

ARGMAX_SCATTER = """
func.func @main(%values: tensor<7xf32>, %positions: tensor<7xi32>, %indices: tensor<60x1xi64>,
                %new_values: tensor<60xf32>, %new_positions: tensor<60xi32>)
    -> (tensor<7xf32>, tensor<7xi32>) {
  %0:2 = "stablehlo.scatter"(%values, %positions, %indices, %new_values, %new_positions) <{
      scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0],
        scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}> ({
  ^bb0(%v: tensor<f32>, %p: tensor<i32>, %nv: tensor<f32>, %np: tensor<i32>):
    %gt = stablehlo.compare GT, %nv, %v, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %eq = stablehlo.compare EQ, %nv, %v, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %lt = stablehlo.compare LT, %np, %p, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    %tie = stablehlo.and %eq, %lt : tensor<i1>
    %take = stablehlo.or %gt, %tie : tensor<i1>
    %rv = stablehlo.select %take, %nv, %v : tensor<i1>, tensor<f32>
    %rp = stablehlo.select %take, %np, %p : tensor<i1>, tensor<i32>
    stablehlo.return %rv, %rp : tensor<f32>, tensor<i32>
  }) : (tensor<7xf32>, tensor<7xi32>, tensor<60x1xi64>, tensor<60xf32>, tensor<60xi32>)
      -> (tensor<7xf32>, tensor<7xi32>)
  return %0#0, %0#1 : tensor<7xf32>, tensor<7xi32>
}
"""


def test_scatter_rounds_equal_one_by_one_with_real_kernels(monkeypatch):
    interpreter = pytest.importorskip("stablehlo.interpreter")
    from stablehlo.text import parse_module
    values = RNG.standard_normal(7).astype(np.float32)
    positions = np.zeros(7, np.int32)
    indices = RNG.integers(-1, 8, size=(60, 1))
    new_values = np.round(RNG.standard_normal(60), 1).astype(np.float32)
    new_positions = RNG.integers(0, 9, size=60).astype(np.int32)
    args = [values, positions, indices, new_values, new_positions]
    with monkeypatch.context() as patch:  # the lane-wise rounds must do it alone
        patch.setattr(indexing, "_apply_one_by_one", None)
        fast = interpreter.evaluate(parse_module(ARGMAX_SCATTER), args)
    force_slow_path(monkeypatch, indexing)
    slow = interpreter.evaluate(parse_module(ARGMAX_SCATTER), args)

    def combine(olds, news):
        take = news[0] > olds[0] or (news[0] == olds[0] and news[1] < olds[1])
        return news if take else olds

    dn = scatter_dims(inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                      index_vector_dim=1)
    expected = scatter_reference([values, positions], indices, [new_values, new_positions], dn,
                                 combine)
    for f, s, e in zip(fast, slow, expected):
        np.testing.assert_array_equal(f, e)
        np.testing.assert_array_equal(s, e)


BINARY_SCATTER = """
func.func @main(%input: tensor<5x3x{t}>, %indices: tensor<40x1xi32>, %updates: tensor<40x3x{t}>)
    -> tensor<5x3x{t}> {{
  %0 = "stablehlo.scatter"(%input, %indices, %updates) <{{
      scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1],
        inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}}> ({{
  ^bb0(%a: tensor<{t}>, %b: tensor<{t}>):
    %1 = stablehlo.{op} %a, %b : tensor<{t}>
    stablehlo.return %1 : tensor<{t}>
  }}) : (tensor<5x3x{t}>, tensor<40x1xi32>, tensor<40x3x{t}>) -> tensor<5x3x{t}>
  return %0 : tensor<5x3x{t}>
}}
"""


@pytest.mark.parametrize("op,t,dtype", [("add", "bf16", ml_dtypes.bfloat16),
                                        ("multiply", "i8", np.int8),
                                        ("maximum", "f16", np.float16),
                                        ("or", "i1", np.bool_),
                                        ("add", "complex<f32>", np.complex64)])
def test_binary_scatter_rounds_equal_one_by_one_with_real_kernels(op, t, dtype, monkeypatch):
    interpreter = pytest.importorskip("stablehlo.interpreter")
    from stablehlo.text import parse_module
    text = BINARY_SCATTER.format(t=t, op=op)
    values = lambda shape: (RNG.standard_normal(shape) * 3).astype(dtype)  # noqa: E731
    args = [values((5, 3)), RNG.integers(-1, 6, size=(40, 1)).astype(np.int32),
            values((40, 3))]
    with monkeypatch.context() as patch:
        patch.setattr(indexing, "_apply_one_by_one", None)
        (fast,) = interpreter.evaluate(parse_module(text), args)
    force_slow_path(monkeypatch, indexing)
    (slow,) = interpreter.evaluate(parse_module(text), args)
    assert fast.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(fast, slow)


def test_returned_arguments_recogniser():
    from stablehlo.interpreter.region_patterns import returned_arguments
    assert returned_arguments(region([np.float32] * 2, lambda b, old, new: new)) == [1]
    assert returned_arguments(region([np.float32] * 4, lambda b, a, c, d, e: [d, e])) == [2, 3]
    assert returned_arguments(binary_region("stablehlo.add", np.float32)) is None
