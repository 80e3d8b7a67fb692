"""Native indexing kernels of the cpu backend against the reference interpreter.

dynamic_slice, dynamic_update_slice, gather, scatter and sort
(native/kernels_indexing.cc): clamped and saturated start indices of every integer type,
gather/scatter dimension numbers with batching dims and interleaved window dims,
out-of-bounds scatter updates, every scatter combiner, stable sorts with ties, -0 and NaN,
large inputs, and the regions the kernels refuse (the op then falls back to the
interpreter). Results are compared with the interpreter (kernel_check.check_op, or bit for
bit where signed zeros and NaNs matter); NaN keys under compare_type FLOAT have no defined
stable order, so they are checked against an independent numpy statement of the kernel's
documented rule (Note [FLOAT keys with NaN]).
"""
from __future__ import annotations

import numpy as np
import pytest

import stablehlo
from pjrt.plugins.cpu.native_module import native
from pjrt.plugins.cpu.tests.kernel_check import (
    DTYPES, check_op, i64s, one_op, rand, run_native, single_op, ttype)
from stablehlo.interpreter import evaluate

RNG = np.random.default_rng(1)


def check_bits(text, inputs):
    """Native == interpreter bit for bit (signed zeros and NaN payloads included)."""
    module = stablehlo.parse(text)
    got = run_native(single_op(module), inputs)
    want = evaluate(module, inputs)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.view(np.uint8), np.ascontiguousarray(w).view(np.uint8))
    return got


def refuses(text):
    with pytest.raises(native().Unsupported):
        run_native(single_op(stablehlo.parse(text)), [])


# -- dynamic_slice, dynamic_update_slice


def index_scalars(values, dtype):
    np_dtype = rand((), dtype).dtype
    return [np.array(v).astype(np_dtype) for v in values]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("starts", [[1, 2], [-5, 9], [3, -1], [0, 0]])
def test_dynamic_slice(dtype, starts):
    text = one_op("stablehlo.dynamic_slice",
                  [ttype((5, 6), dtype), ttype((), "i32"), ttype((), "i32")],
                  [ttype((3, 4), dtype)], f"slice_sizes = {i64s([3, 4])}")
    check_op(text, [rand((5, 6), dtype)] + index_scalars(starts, "i32"))


@pytest.mark.parametrize("index_dtype,starts", [
    ("i8", [-128, 127]), ("ui8", [255, 1]), ("i64", [-(2 ** 62), 2 ** 62]),
    ("ui64", [2 ** 64 - 1, 2 ** 63 + 5]), ("ui16", [2, 3]), ("i16", [-1, 2])])
def test_dynamic_slice_index_types_saturate_and_clamp(index_dtype, starts):
    text = one_op("stablehlo.dynamic_slice",
                  [ttype((4, 7), "f32"), ttype((), index_dtype), ttype((), index_dtype)],
                  [ttype((2, 3), "f32")], f"slice_sizes = {i64s([2, 3])}")
    check_op(text, [rand((4, 7), "f32")] + index_scalars(starts, index_dtype))


@pytest.mark.parametrize("shape,sizes", [((), []), ((3, 4), [3, 4]), ((3, 4), [0, 2]),
                                         ((200, 300), [150, 299])])
def test_dynamic_slice_edge_shapes(shape, sizes):
    types = [ttype(shape, "ui8")] + [ttype((), "i64")] * len(shape)
    text = one_op("stablehlo.dynamic_slice", types, [ttype(sizes, "ui8")],
                  f"slice_sizes = {i64s(sizes)}")
    check_op(text, [rand(shape, "ui8")] + index_scalars([7] * len(shape), "i64"))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("update,starts", [((2, 3), [1, 1]), ((2, 3), [-4, 10]),
                                           ((4, 5), [2, 2]), ((0, 3), [1, 1]),
                                           ((1, 5), [3, -2])])
def test_dynamic_update_slice(dtype, update, starts):
    text = one_op("stablehlo.dynamic_update_slice",
                  [ttype((4, 5), dtype), ttype(update, dtype), ttype((), "ui32"),
                   ttype((), "ui32")], [ttype((4, 5), dtype)])
    starts = [s % 2 ** 32 for s in starts]  # negative starts become huge unsigned ones
    check_op(text, [rand((4, 5), dtype), rand(update, dtype)] + index_scalars(starts, "ui32"))


def test_dynamic_update_slice_rank0_and_large():
    text = one_op("stablehlo.dynamic_update_slice", [ttype((), "f64"), ttype((), "f64")],
                  [ttype((), "f64")])
    check_op(text, [rand((), "f64"), rand((), "f64")])
    text = one_op("stablehlo.dynamic_update_slice",
                  [ttype((300, 400), "f32"), ttype((100, 399), "f32"), ttype((), "i32"),
                   ttype((), "i32")], [ttype((300, 400), "f32")])
    check_op(text, [rand((300, 400), "f32"), rand((100, 399), "f32")]
             + index_scalars([250, 3], "i32"))


# -- gather


def gather_attrs(offset, collapsed, start_map, ivd, sizes, operand_batching=(),
                 indices_batching=()):
    batching = (f"operand_batching_dims = {list(operand_batching)}, "
                f"start_indices_batching_dims = {list(indices_batching)}, "
                if operand_batching else "")
    return (f"dimension_numbers = #stablehlo.gather<offset_dims = {list(offset)}, "
            f"collapsed_slice_dims = {list(collapsed)}, {batching}"
            f"start_index_map = {list(start_map)}, index_vector_dim = {ivd}>, "
            f"slice_sizes = {i64s(sizes)}")


GATHERS = [
    # operand, indices, result, attrs (offset, collapsed, start_index_map, ivd, sizes, ...)
    ((5, 4), (3, 1), (3, 4), ([1], [0], [0], 1, [1, 4])),
    ((5, 4), (3, 1), (4, 3), ([0], [0], [0], 1, [1, 4])),           # offset dim first
    ((5, 4), (3,), (3, 4), ([1], [0], [0], 1, [1, 4])),             # implicit index vector
    ((3, 4, 2), (2, 3, 2), (2, 3, 2, 2), ([2, 3], [0], [1, 0], 2, [1, 2, 2])),  # spec example
    ((3, 4, 2), (2, 2, 3), (2, 3, 2, 2), ([2, 3], [0], [1, 0], 1, [1, 2, 2])),  # ivd inside
    ((2, 5, 3), (2, 4, 1), (2, 4, 3), ([2], [1], [1], 2, [1, 1, 3], [0], [0])),  # batching
    ((4, 2, 5), (3, 2, 1), (3, 2, 2), ([2], [0], [0], 2, [1, 1, 2], [1], [1])),
    ((6, 7), (2, 3, 2), (2, 3, 6, 7), ([2, 3], [], [0, 1], 2, [6, 7])),  # whole operand
    ((5, 4), (0, 1), (0, 4), ([1], [0], [0], 1, [1, 4])),
    ((5, 4), (3, 1), (3, 0), ([1], [0], [0], 1, [1, 0])),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("operand,indices,result,attrs", GATHERS)
def test_gather(dtype, operand, indices, result, attrs):
    text = one_op("stablehlo.gather", [ttype(operand, dtype), ttype(indices, "i32")],
                  [ttype(result, dtype)], gather_attrs(*attrs))
    # Out-of-range starts (negative, past the end) clamp.
    starts = RNG.integers(-3, max(operand) + 3, indices).astype(np.int32)
    check_op(text, [rand(operand, dtype), starts])


@pytest.mark.parametrize("index_dtype", ["i8", "ui8", "i64", "ui64", "ui16"])
def test_gather_index_types(index_dtype):
    text = one_op("stablehlo.gather", [ttype((5, 4), "f32"), ttype((4, 2), index_dtype)],
                  [ttype((4, 2, 2), "f32")], gather_attrs([1, 2], [], [0, 1], 1, [2, 2]))
    starts = np.array([[-1, 2], [100, 1], [3, 255], [2, 2]])
    if index_dtype.startswith("ui"):
        starts = np.where(starts < 0, np.iinfo(np.uint64).max, starts)
    check_op(text, [rand((5, 4), "f32"), starts.astype(rand((), index_dtype).dtype)])


@pytest.mark.parametrize("operand,sizes", [((3, 4), [0, 4]), ((0, 4), [0, 4])])
def test_gather_zero_slice_on_collapsed_dim_is_zeros(operand, sizes):
    """An empty slice collapsed away leaves result elements nothing is gathered into: XLA's
    cpu backend (jax's compile_and_load of this text) returns zeros, for any start."""
    text = one_op("stablehlo.gather", [ttype(operand, "f32"), ttype((3, 1), "i32")],
                  [ttype((3, 4), "f32")], gather_attrs([1], [0], [0], 1, sizes))
    inputs = [rand(operand, "f32") + 1, np.array([[0], [2], [7]], np.int32)]
    want = np.zeros((3, 4), np.float32)
    np.testing.assert_array_equal(evaluate(stablehlo.parse(text), inputs)[0], want)
    np.testing.assert_array_equal(check_op(text, inputs)[0], want)


def test_gather_large_embedding_lookup():
    text = one_op("stablehlo.gather", [ttype((1000, 64), "f32"), ttype((5000, 1), "i64")],
                  [ttype((5000, 64), "f32")], gather_attrs([1], [0], [0], 1, [1, 64]))
    check_op(text, [rand((1000, 64), "f32"), RNG.integers(-5, 1005, (5000, 1))])


# -- scatter


def binary_region(op, dtypes):
    """^bb0(lhs.., rhs..): op(lhs_i, rhs_i) per operand pair; ``dtypes`` one per pair."""
    dtypes = [dtypes] if isinstance(dtypes, str) else dtypes
    args = [f"%x{i}: tensor<{d}>" for i, d in enumerate(dtypes)]
    args += [f"%y{i}: tensor<{d}>" for i, d in enumerate(dtypes)]
    body = [f"    %r{i} = {op} %x{i}, %y{i} : tensor<{d}>" for i, d in enumerate(dtypes)]
    ret = ", ".join(f"%r{i}" for i in range(len(dtypes)))
    types = ", ".join(f"tensor<{d}>" for d in dtypes)
    return "\n".join([f"  ^bb0({', '.join(args)}):"] + body
                     + [f"    stablehlo.return {ret} : {types}"])


def replace_region(dtype):
    return (f"  ^bb0(%x: tensor<{dtype}>, %y: tensor<{dtype}>):\n"
            f"    stablehlo.return %y : tensor<{dtype}>")


def scatter_attrs(window, inserted, to_operand, ivd, input_batching=(), indices_batching=()):
    batching = (f"input_batching_dims = {list(input_batching)}, "
                f"scatter_indices_batching_dims = {list(indices_batching)}, "
                if input_batching else "")
    return (f"scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = "
            f"{list(window)}, inserted_window_dims = {list(inserted)}, {batching}"
            f"scatter_dims_to_operand_dims = {list(to_operand)}, index_vector_dim = {ivd}>")


def scatter_text(inputs, indices, updates, dtypes, index_dtype, attrs, region):
    operand_types = ([ttype(inputs, d) for d in dtypes] + [ttype(indices, index_dtype)]
                     + [ttype(updates, d) for d in dtypes])
    return one_op("stablehlo.scatter", operand_types, [ttype(inputs, d) for d in dtypes],
                  scatter_attrs(*attrs), region)


SCATTERS = [
    # input, indices, updates, attrs (window, inserted, to_operand, ivd, batching...)
    ((5, 4), (6, 1), (6, 4), ([1], [0], [0], 1)),                  # rows, trailing window
    ((5, 4), (6, 1), (4, 6), ([0], [0], [0], 1)),                  # window dim first
    ((6, 5), (4, 1), (4, 3, 5), ([1, 2], [], [0], 1)),             # windows past the edge
    ((6, 5), (4, 2), (3, 4, 2), ([0, 2], [], [0, 1], 1)),          # interleaved windows
    ((12,), (30, 1), (30,), ([], [0], [0], 1)),                    # scalar updates
    ((12,), (30,), (30,), ([], [0], [0], 1)),                      # implicit index vector
    ((2, 5, 3), (2, 4, 1), (2, 4, 3), ([2], [1], [1], 2, [0], [0])),  # batching dims
    ((3, 4), (0, 1), (0, 4), ([1], [0], [0], 1)),
    ((), (5, 0), (5,), ([], [], [], 1)),                           # rank-0 input
]


def scatter_inputs(inputs, indices, updates, dtype, index_dtype="i32"):
    # Indices from -3 to past the end: out-of-bounds update elements are skipped, and the
    # narrow range makes duplicate targets likely (their order matters).
    bound = max(inputs, default=1) + 3
    idx = RNG.integers(-3, bound, indices).astype(rand((), index_dtype).dtype)
    return [rand(inputs, dtype), idx, rand(updates, dtype)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("inputs,indices,updates,attrs", SCATTERS)
def test_scatter_replace(dtype, inputs, indices, updates, attrs):
    text = scatter_text(inputs, indices, updates, [dtype], "i32", attrs, replace_region(dtype))
    check_op(text, scatter_inputs(inputs, indices, updates, dtype))


COMBINERS = [("stablehlo.add", d) for d in ("f32", "i32", "i8", "ui8", "i1", "f64", "ui64")] + [
    ("stablehlo.multiply", d) for d in ("f32", "i16", "ui8", "i1")] + [
    ("stablehlo.maximum", d) for d in ("f32", "i32", "ui16", "i1", "f64")] + [
    ("stablehlo.minimum", d) for d in ("f32", "i64", "ui8", "i1")] + [
    (op, d) for op in ("stablehlo.and", "stablehlo.or", "stablehlo.xor")
    for d in ("i32", "ui8", "i1")]


@pytest.mark.parametrize("combiner,dtype", COMBINERS)
@pytest.mark.parametrize("inputs,indices,updates,attrs", SCATTERS[:5] + SCATTERS[6:7])
def test_scatter_combiner(combiner, dtype, inputs, indices, updates, attrs):
    text = scatter_text(inputs, indices, updates, [dtype], "i64", attrs,
                        binary_region(combiner, dtype))
    args = scatter_inputs(inputs, indices, updates, dtype, "i64")
    if dtype in ("f32", "f64"):  # NaN and signed zeros for maximum/minimum
        args[2].flat[::7] = np.nan
        args[0].flat[1::5] = -0.0
        args[2].flat[2::5] = 0.0
    if dtype in ("i8", "ui8", "i16"):  # wrap-around
        info = np.iinfo(args[0].dtype)
        args[2].flat[::3] = info.max
    check_op(text, args)


def test_scatter_two_operands_and_index_types():
    attrs = ([1], [0], [0], 1)
    for index_dtype in ("ui8", "i16", "ui64"):
        text = scatter_text((5, 4), (6, 1), (6, 4), ["f32", "i32"], index_dtype, attrs,
                            binary_region("stablehlo.add", ["f32", "i32"]))
        idx = RNG.integers(0, 8, (6, 1)).astype(rand((), index_dtype).dtype)
        check_op(text, [rand((5, 4), "f32"), rand((5, 4), "i32"), idx, rand((6, 4), "f32"),
                        rand((6, 4), "i32")])


def test_scatter_large():
    text = scatter_text((1000,), (100000, 1), (100000,), ["f32"], "i32", ([], [0], [0], 1),
                        binary_region("stablehlo.add", "f32"))
    check_op(text, [rand((1000,), "f32"), RNG.integers(-10, 1010, (100000, 1)).astype(np.int32),
                    rand((100000,), "f32")], rtol=0)
    text = scatter_text((3000, 64), (2000, 1), (2000, 64), ["bf16"], "i32", ([1], [0], [0], 1),
                        replace_region("bf16"))
    check_op(text, [rand((3000, 64), "bf16"), RNG.integers(0, 3000, (2000, 1)).astype(np.int32),
                    rand((2000, 64), "bf16")])


@pytest.mark.parametrize("dtype,region", [
    ("f32", binary_region("stablehlo.subtract", "f32")),       # not a combiner
    ("bf16", binary_region("stablehlo.add", "bf16")),          # no native arithmetic
    ("complex<f32>", binary_region("stablehlo.add", "complex<f32>")),
    ("f32", "  ^bb0(%x: tensor<f32>, %y: tensor<f32>):\n    stablehlo.return %x : tensor<f32>"),
])
def test_scatter_refuses_other_regions(dtype, region):
    refuses(scatter_text((5, 4), (6, 1), (6, 4), [dtype], "i32", ([1], [0], [0], 1), region))


# -- sort


def compare_region(direction, dtypes, compare_type=None, swapped=False):
    args = [f"%x{i}: tensor<{d}>, %y{i}: tensor<{d}>" for i, d in enumerate(dtypes)]
    lhs, rhs = ("%y0", "%x0") if swapped else ("%x0", "%y0")
    ctype = f", {compare_type}" if compare_type else ""
    return (f"  ^bb0({', '.join(args)}):\n"
            f"    %c = stablehlo.compare {direction}, {lhs}, {rhs}{ctype} : "
            f"(tensor<{dtypes[0]}>, tensor<{dtypes[0]}>) -> tensor<i1>\n"
            f"    stablehlo.return %c : tensor<i1>")


def sort_text(shape, dtypes, dimension, region):
    types = [ttype(shape, d) for d in dtypes]
    return one_op("stablehlo.sort", types, types,
                  f"dimension = {dimension} : i64, is_stable = true", region)


def with_ties(shape, dtype):
    """Keys with many ties (small range), as the operand-0 sort keys."""
    values = RNG.integers(0, 4, shape)
    return values.astype(np.bool_) if dtype == "i1" else values.astype(rand((), dtype).dtype)


SORT_KEYS = ["f32", "i32", "ui8", "i1", "bf16", "f16", "f64", "ui64", "i64", "i8"]


@pytest.mark.parametrize("key", SORT_KEYS)
@pytest.mark.parametrize("direction", ["LT", "GT"])
@pytest.mark.parametrize("shape,dimension", [((17,), 0), ((3, 9), 1), ((6, 5, 4), 0),
                                             ((6, 5, 4), 1), ((4, 0), 1)])
def test_sort_stable_with_ties(key, direction, shape, dimension):
    # The payload records the original positions: ties must keep them in order.
    payload = np.arange(int(np.prod(shape))).reshape(shape).astype(np.int32)
    text = sort_text(shape, [key, "i32", "complex<f32>"], dimension,
                     compare_region(direction, [key, "i32", "complex<f32>"]))
    check_op(text, [with_ties(shape, key), payload, rand(shape, "complex<f32>")])


@pytest.mark.parametrize("key", ["f32", "f64", "bf16", "f16"])
@pytest.mark.parametrize("direction", ["LT", "GT"])
@pytest.mark.parametrize("swapped", [False, True])
def test_sort_totalorder_nan_and_signed_zeros(key, direction, swapped):
    keys = np.array([np.nan, -np.nan, -0.0, 0.0, np.inf, -np.inf, 1.5, -1.5, 0.0, -0.0, np.nan,
                     2.0, -2.0, 1.5]).astype(rand((), key).dtype)
    payload = np.arange(len(keys)).astype(np.int16)
    text = sort_text(keys.shape, [key, "i16"], 0,
                     compare_region(direction, [key, "i16"], "TOTALORDER", swapped))
    check_bits(text, [keys, payload])


@pytest.mark.parametrize("key", ["f32", "bf16", "f64"])
@pytest.mark.parametrize("compare_type", [None, "FLOAT"])
@pytest.mark.parametrize("direction", ["LT", "GT"])
def test_sort_float_compare_signed_zeros_tie(key, compare_type, direction):
    # FLOAT: -0 == +0, so zeros keep their order (the interpreter's stable order)
    keys = np.array([0.0, -0.0, 1.0, -0.0, 0.0, -1.0, np.inf, -np.inf]).astype(
        rand((), key).dtype)
    text = sort_text(keys.shape, [key, "i32"], 0,
                     compare_region(direction, [key, "i32"], compare_type))
    check_bits(text, [keys, np.arange(8, dtype=np.int32)])


def nan_stays_reference(keys, payload, descending):
    """Note [FLOAT keys with NaN] in numpy: NaN keys keep their slots, the rest sort stably."""
    keys, payload = keys.copy(), payload.copy()
    for row_keys, row_payload in zip(keys, payload):
        slots = np.flatnonzero(~np.isnan(row_keys))
        order = sorted(slots, key=lambda i: -row_keys[i] if descending else row_keys[i])
        row_keys[slots], row_payload[slots] = row_keys[order], row_payload[order]
    return keys, payload


@pytest.mark.parametrize("direction", ["LT", "GT"])
def test_sort_float_compare_with_nan_keys(direction):
    keys = RNG.integers(0, 5, (4, 30)).astype(np.float32)
    keys[RNG.random(keys.shape) < 0.2] = np.nan
    keys[2] = np.nan
    payload = np.arange(keys.size, dtype=np.int32).reshape(keys.shape)
    text = sort_text(keys.shape, ["f32", "i32"], 1,
                     compare_region(direction, ["f32", "i32"], "FLOAT"))
    got_keys, got_payload = run_native(single_op(stablehlo.parse(text)), [keys, payload])
    want_keys, want_payload = nan_stays_reference(keys, payload, direction == "GT")
    np.testing.assert_array_equal(got_keys, want_keys)
    np.testing.assert_array_equal(got_payload, want_payload)


@pytest.mark.parametrize("dimension", [0, 1])
def test_sort_large(dimension):
    text = sort_text((300, 500), ["f32", "i32"], dimension,
                     compare_region("LT", ["f32", "i32"], "TOTALORDER"))
    keys = rand((300, 500), "f32")
    keys[::3] = np.round(keys[::3])  # ties
    check_op(text, [keys, rand((300, 500), "i32")])


def jax_style_region():
    """A comparator with more than one op (jax canonicalizes NaN first): refused."""
    return ("  ^bb0(%x: tensor<f32>, %y: tensor<f32>):\n"
            "    %n = stablehlo.negate %x : tensor<f32>\n"
            "    %c = stablehlo.compare LT, %n, %y, TOTALORDER : "
            "(tensor<f32>, tensor<f32>) -> tensor<i1>\n"
            "    stablehlo.return %c : tensor<i1>")


@pytest.mark.parametrize("key,region", [
    ("f32", compare_region("LE", ["f32"])),
    ("i32", compare_region("EQ", ["i32"])),
    ("ui8", compare_region("GE", ["ui8"], "UNSIGNED")),
    ("complex<f32>", compare_region("LT", ["complex<f32>"], "FLOAT")),
    ("f32", jax_style_region()),
])
def test_sort_refuses_other_comparators(key, region):
    refuses(sort_text((5,), [key], 0, region))
