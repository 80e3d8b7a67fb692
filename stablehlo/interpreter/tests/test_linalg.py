"""Tests of the contraction, convolution, transform and factorization kernels.

References: the spec's and interpreter suite's examples; numpy einsum in
exact (object or float64) arithmetic; XLA through JAX (``lax.dot_general``,
``lax.conv_general_dilated``, ``lax.rng_bit_generator``, autodiff of batch
normalisation); numpy.linalg and products that undo a solve.
"""
import ml_dtypes
import numpy as np
import pytest

import stablehlo.interpreter.linalg  # noqa: F401  (registers the kernels)
from kernel_harness import boolean, call, call1, i64, i64s, make_op, ttype
from stablehlo.errors import InterpreterError
from stablehlo.ir.attributes import (ConvDimensionNumbersAttr, DenseElementsAttr, EnumAttr,
                                     FloatAttr, StringAttr, StructAttr, bool_array)
from stablehlo.ir.types import F32, I64, TensorType

RNG = np.random.default_rng(5)


def dot_dims(lb=(), rb=(), lc=(), rc=()):
    return StructAttr("dot", (("lhs_batching_dimensions", tuple(lb)),
                              ("rhs_batching_dimensions", tuple(rb)),
                              ("lhs_contracting_dimensions", tuple(lc)),
                              ("rhs_contracting_dimensions", tuple(rc))))


def dot_general_op(lhs, rhs, out_shape, out_dtype, **dims):
    return make_op("stablehlo.dot_general", [ttype(lhs.shape, lhs.dtype),
                                             ttype(rhs.shape, rhs.dtype)],
                   [ttype(out_shape, out_dtype)], {"dot_dimension_numbers": dot_dims(**dims)})


def einsum_reference(lhs, rhs, lb, rb, lc, rc):
    """Exact dot_general with Python integers / floats via an einsum spec."""
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    lhs_sub = [None] * lhs.ndim
    rhs_sub = [None] * rhs.ndim
    for a, b in zip(lb, rb):
        lhs_sub[a] = rhs_sub[b] = next(letters)
    for a, b in zip(lc, rc):
        lhs_sub[a] = rhs_sub[b] = next(letters)
    for subs in (lhs_sub, rhs_sub):
        for i, s in enumerate(subs):
            if s is None:
                subs[i] = next(letters)
    out = ([lhs_sub[d] for d in lb] + [s for d, s in enumerate(lhs_sub) if d not in lb + lc]
           + [s for d, s in enumerate(rhs_sub) if d not in rb + rc])
    spec = f"{''.join(lhs_sub)},{''.join(rhs_sub)}->{''.join(out)}"
    return np.einsum(spec, lhs.astype(object), rhs.astype(object))


def wrap_object(values, dtype):
    info = np.iinfo(dtype)
    span = 1 << info.bits
    flat = [((int(v) - info.min) % span) + info.min for v in np.ravel(values)]
    return np.array(flat, dtype=dtype).reshape(np.shape(values))


# ---------------------------------------------------------------------------
# dot_general


def test_interpreter_suite_batched_identity():
    lhs = np.array([[[1, 2], [3, 4]], [[5, 6], [7, 8]]], dtype=np.int64)
    rhs = np.array([[[1, 0], [0, 1]], [[1, 0], [0, 1]]], dtype=np.int64)
    op = dot_general_op(lhs, rhs, (2, 2, 2), np.int64, lb=[0], rb=[0], lc=[2], rc=[1])
    np.testing.assert_array_equal(call1(op, lhs, rhs), lhs)


def test_empty_dims_is_an_outer_product():
    lhs = np.array([[1, 2], [3, 4]], dtype=np.int64)
    rhs = np.array([[1, 0], [0, 1]], dtype=np.int64)
    op = dot_general_op(lhs, rhs, (2, 2, 2, 2), np.int64)
    np.testing.assert_array_equal(call1(op, lhs, rhs), np.multiply.outer(lhs, rhs))


@pytest.mark.parametrize("seed", range(10))
def test_random_layouts_match_exact_einsum(seed):
    rank_l, rank_r = 2 + seed % 3, 2 + (seed // 3) % 3
    nb = min(1, rank_l - 1, rank_r - 1) if seed % 2 else 0
    nc = 1 + (seed % 2 if rank_l - nb > 2 and rank_r - nb > 2 else 0)
    perm_l, perm_r = RNG.permutation(rank_l), RNG.permutation(rank_r)
    lb, lc = list(perm_l[:nb]), list(perm_l[nb:nb + nc])
    rb, rc = list(perm_r[:nb]), list(perm_r[nb:nb + nc])
    lshape = list(RNG.integers(1, 4, rank_l))
    rshape = list(RNG.integers(1, 4, rank_r))
    for a, b in zip(lb + lc, rb + rc):
        rshape[b] = lshape[a]
    lhs = RNG.integers(-128, 128, lshape).astype(np.int8)
    rhs = RNG.integers(-128, 128, rshape).astype(np.int8)
    lb, lc, rb, rc = ([int(v) for v in x] for x in (lb, lc, rb, rc))
    exact = einsum_reference(lhs, rhs, lb, rb, lc, rc)
    for out_dtype in (np.int8, np.int32):
        op = dot_general_op(lhs, rhs, exact.shape, out_dtype, lb=lb, rb=rb, lc=lc, rc=rc)
        got = call1(op, lhs, rhs)
        assert got.dtype == np.dtype(out_dtype)
        np.testing.assert_array_equal(got, wrap_object(exact, out_dtype))


def test_uint64_and_int4_wrap_modulo_width():
    lhs = np.array([[2 ** 63, 3]], dtype=np.uint64)
    rhs = np.array([[3], [2 ** 62]], dtype=np.uint64)
    op = dot_general_op(lhs, rhs, (1, 1), np.uint64, lc=[1], rc=[0])
    expected = (2 ** 63 * 3 + 3 * 2 ** 62) % 2 ** 64
    assert int(call1(op, lhs, rhs)[0, 0]) == expected
    a = np.array([7, -8, 5], dtype=ml_dtypes.int4)
    op = dot_general_op(a, a, (), ml_dtypes.int4, lc=[0], rc=[0])
    # 49 + 64 + 25 = 138 = 8 * 16 + 10, and 10 as a signed 4-bit value is -6
    assert int(call1(op, a, a)) == -6


def test_boolean_dot_is_or_of_ands():
    lhs = np.array([[True, False], [False, False]])
    rhs = np.array([[False, True], [True, True]])
    op = dot_general_op(lhs, rhs, (2, 2), np.bool_, lc=[1], rc=[0])
    expected = (lhs.astype(int) @ rhs.astype(int)) > 0
    np.testing.assert_array_equal(call1(op, lhs, rhs), expected)


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16])
def test_narrow_float_dot_accumulates_in_f32_like_xla(dtype):
    from jax import lax
    lhs = RNG.standard_normal((5, 40)).astype(dtype)
    rhs = RNG.standard_normal((40, 6)).astype(dtype)
    op = dot_general_op(lhs, rhs, (5, 6), dtype, lc=[1], rc=[0])
    got = call1(op, lhs, rhs)
    expected = np.asarray(lax.dot_general(lhs, rhs, (([1], [0]), ([], []))))
    assert got.dtype == np.dtype(dtype)
    # One rounding of an f32 sum: at most one unit in the last place apart.
    diff = np.abs(got.astype(np.float64) - expected.astype(np.float64))
    ulp = np.spacing(np.abs(expected.astype(np.float64)).astype(np.float32)).astype(np.float64)
    ulp *= 2.0 ** (23 - (ml_dtypes.finfo(dtype).nmant))
    assert np.all(diff <= ulp + 1e-30)


def test_f8_dot_from_interpreter_suite():
    x = np.array([0.0, 1.0, 2.0, 3.0], dtype=ml_dtypes.float8_e3m4)
    op = dot_general_op(x, x, (), ml_dtypes.float8_e3m4, lc=[0], rc=[0])
    assert float(call1(op, x, x)) == 14.0


def test_result_type_may_differ_and_complex():
    lhs = RNG.standard_normal((2, 3)).astype(np.float32)
    rhs = RNG.standard_normal((3, 4)).astype(np.float32)
    op = dot_general_op(lhs, rhs, (2, 4), np.float64, lc=[1], rc=[0])
    got = call1(op, lhs, rhs)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, lhs.astype(np.float64) @ rhs, rtol=1e-12)
    z = (RNG.standard_normal((2, 3)) + 1j * RNG.standard_normal((2, 3)))
    op = dot_general_op(z, z.T, (2, 2), np.complex128, lc=[1], rc=[0])
    np.testing.assert_allclose(call1(op, z, z.T.copy()), z @ z.T, rtol=1e-12)


def test_mismatched_contracting_sizes_name_the_op():
    lhs, rhs = np.zeros((2, 3), np.float32), np.zeros((4, 2), np.float32)
    op = dot_general_op(lhs, rhs, (2, 2), np.float32, lc=[1], rc=[0])
    with pytest.raises(InterpreterError, match="stablehlo.dot_general"):
        call(op, lhs, rhs)


def test_dot_and_einsum_forms():
    a = RNG.integers(-5, 5, (3, 4)).astype(np.int32)
    b = RNG.integers(-5, 5, (4,)).astype(np.int32)
    op = make_op("stablehlo.dot", [ttype(a.shape, a.dtype), ttype(b.shape, b.dtype)],
                 [ttype((3,), np.int32)])
    np.testing.assert_array_equal(call1(op, a, b), a @ b)
    op = make_op("stablehlo.einsum", [ttype(a.shape, a.dtype), ttype(a.shape, a.dtype)],
                 [ttype((4, 4), np.int32)], {"einsum_config": StringAttr("ab,ac->bc")})
    np.testing.assert_array_equal(call1(op, a, a), a.T @ a)
    op = make_op("stablehlo.unary_einsum", [ttype(a.shape, a.dtype)], [ttype((4,), np.int32)],
                 {"einsum_config": StringAttr(",ab->b")})
    np.testing.assert_array_equal(call1(op, a), a.sum(axis=0))


# ---------------------------------------------------------------------------
# chlo.ragged_dot


def ragged_op(lhs, rhs, sizes, out_shape, lb=(), rb=(), lc=(), rc=(), lr=(), rg=()):
    dims = StructAttr("ragged_dot", (
        ("lhs_batching_dimensions", tuple(lb)), ("rhs_batching_dimensions", tuple(rb)),
        ("lhs_contracting_dimensions", tuple(lc)), ("rhs_contracting_dimensions", tuple(rc)),
        ("lhs_ragged_dimensions", tuple(lr)), ("rhs_group_dimensions", tuple(rg))), "chlo")
    types = [ttype(x.shape, x.dtype) for x in (lhs, rhs, sizes)]
    return make_op("chlo.ragged_dot", types, [ttype(out_shape, lhs.dtype)],
                   {"ragged_dot_dimension_numbers": dims})


def test_ragged_non_contracting_rows_use_their_group():
    lhs = RNG.standard_normal((2, 11, 5))
    rhs = RNG.standard_normal((3, 2, 5, 7))
    sizes = np.array([4, 4, 3], dtype=np.int64)
    op = ragged_op(lhs, rhs, sizes, (2, 11, 7), lb=[0], rb=[1], lc=[2], rc=[2], lr=[1], rg=[0])
    group_of_row = np.repeat(np.arange(3), sizes)
    expected = np.stack([np.stack([lhs[b, m] @ rhs[group_of_row[m], b] for m in range(11)])
                         for b in range(2)])
    np.testing.assert_allclose(call1(op, lhs, rhs, sizes), expected, rtol=1e-12)


def test_ragged_groups_per_batch_and_uncovered_rows_are_zero():
    lhs = RNG.standard_normal((2, 6, 3))
    rhs = RNG.standard_normal((2, 3, 4))  # [g, k, n], no batch in rhs
    sizes = np.array([[1, 2], [3, 3]], dtype=np.int64)  # [b, g]; batch 0 covers 3 rows only
    op = ragged_op(lhs, rhs, sizes, (2, 6, 4), lc=[2], rc=[1], lr=[1], rg=[0])
    expected = np.zeros((2, 6, 4))
    for b in range(2):
        row = 0
        for g, count in enumerate(sizes[b]):
            for m in range(row, row + count):
                expected[b, m] = lhs[b, m] @ rhs[g]
            row += count
    np.testing.assert_allclose(call1(op, lhs, rhs, sizes), expected, rtol=1e-12)


def test_ragged_contracting_splits_the_sum_into_groups():
    lhs = RNG.standard_normal((4, 7))
    rhs = RNG.standard_normal((7, 5))
    sizes = np.array([2, 0, 5], dtype=np.int64)
    op = ragged_op(lhs, rhs, sizes, (3, 4, 5), lc=[1], rc=[0], lr=[1])
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    expected = np.stack([lhs[:, a:b] @ rhs[a:b] for a, b in zip(bounds[:-1], bounds[1:])])
    np.testing.assert_allclose(call1(op, lhs, rhs, sizes), expected, rtol=1e-12, atol=1e-15)


def test_ragged_batch_is_a_plain_batched_dot():
    lhs = RNG.standard_normal((3, 2, 4))
    rhs = RNG.standard_normal((3, 4, 5))
    sizes = np.array([1, 2], dtype=np.int64)
    op = ragged_op(lhs, rhs, sizes, (3, 2, 5), lb=[0], rb=[0], lc=[2], rc=[1], lr=[0])
    np.testing.assert_allclose(call1(op, lhs, rhs, sizes), lhs @ rhs, rtol=1e-12)


# ---------------------------------------------------------------------------
# convolution


def conv_op(lhs, rhs, out_shape, out_dtype, dims, kernel="dynamic", **window):
    spatial = lhs.ndim - 2
    attrs = {"dimension_numbers": dims,
             "feature_group_count": i64(window.pop("feature_group_count", 1)),
             "batch_group_count": i64(window.pop("batch_group_count", 1))}
    for name in ("window_strides", "lhs_dilation", "rhs_dilation"):
        if name in window:
            attrs[name] = i64s(window.pop(name))
    if "padding" in window:
        pairs = np.asarray(window.pop("padding"), dtype=np.int64).reshape(spatial, 2)
        attrs["padding"] = DenseElementsAttr(TensorType(pairs.shape, I64), pairs)
    if "window_reversal" in window:
        attrs["window_reversal"] = bool_array(window.pop("window_reversal"))
    types = [ttype(lhs.shape, lhs.dtype), ttype(rhs.shape, rhs.dtype)]
    return make_op("stablehlo.convolution", types, [ttype(out_shape, out_dtype)], attrs)


NHWC = ConvDimensionNumbersAttr(0, 3, (1, 2), 2, 3, (0, 1), 0, 3, (1, 2))
SPEC_LHS = np.array([[[[1], [2], [5], [6]], [[3], [4], [7], [8]], [[10], [11], [14], [15]],
                      [[12], [13], [16], [17]]]], dtype=np.int64)


def test_interpreter_suite_lhs_dilation_and_i8_to_i32():
    rhs = np.ones((3, 3, 1, 1), dtype=np.int64)
    op = conv_op(SPEC_LHS, rhs, (1, 2, 2, 1), np.int64, NHWC, window_strides=[4, 4],
                 lhs_dilation=[2, 2])
    np.testing.assert_array_equal(call1(op, SPEC_LHS, rhs)[0, :, :, 0], [[10, 26], [46, 62]])
    lhs8, rhs8 = SPEC_LHS.astype(np.int8), np.full((3, 3, 1, 1), 10, np.int8)
    op = conv_op(lhs8, rhs8, (1, 2, 2, 1), np.int32, NHWC, window_strides=[4, 4],
                 lhs_dilation=[2, 2])
    got = call1(op, lhs8, rhs8)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got[0, :, :, 0], [[100, 260], [460, 620]])
    op = conv_op(SPEC_LHS, rhs, (1, 2, 2, 1), np.int64, NHWC, window_strides=[4, 4],
                 lhs_dilation=[2, 2], padding=[[1, 1], [1, 1]])
    np.testing.assert_array_equal(call1(op, SPEC_LHS, rhs)[0, :, :, 0], [[1, 5], [10, 14]])


def test_interpreter_suite_group_counts():
    rhs = np.ones((1, 2, 1, 4), dtype=np.int64)
    dims = ConvDimensionNumbersAttr(1, 3, (0, 2), 2, 3, (0, 1), 0, 3, (1, 2))
    op = conv_op(SPEC_LHS, rhs, (1, 1, 2, 4), np.int64, dims, window_strides=[4, 4],
                 lhs_dilation=[2, 2], batch_group_count=4)
    np.testing.assert_array_equal(call1(op, SPEC_LHS, rhs),
                                  [[[[1, 3, 10, 12], [5, 7, 14, 16]]]])
    dims = ConvDimensionNumbersAttr(0, 2, (1, 3), 1, 3, (0, 2), 0, 3, (1, 2))
    op = conv_op(SPEC_LHS, rhs, (1, 2, 1, 4), np.int64, dims, window_strides=[4, 4],
                 lhs_dilation=[2, 2], feature_group_count=2)
    np.testing.assert_array_equal(call1(op, SPEC_LHS, rhs),
                                  [[[[3, 3, 11, 11]], [[21, 21, 29, 29]]]])


@pytest.mark.parametrize("seed", range(16))
def test_convolution_matches_xla(seed):
    from jax import lax
    rng = np.random.default_rng(100 + seed)
    spatial = 1 + seed % 2
    groups_f = [1, 2, 3][seed % 3]
    groups_b = 2 if groups_f == 1 and seed % 4 == 0 else 1
    n, cg = groups_b * int(rng.integers(1, 3)), int(rng.integers(1, 3))
    out_features = groups_f * groups_b * int(rng.integers(1, 3))
    sizes = [int(v) for v in rng.integers(3, 7, spatial)]
    ksizes = [int(v) for v in rng.integers(1, 4, spatial)]
    strides = [int(v) for v in rng.integers(1, 3, spatial)]
    lhs_dil = [int(v) for v in rng.integers(1, 3, spatial)]
    rhs_dil = [int(v) for v in rng.integers(1, 3, spatial)]
    padding = [(int(a), int(b)) for a, b in rng.integers(-1, 3, (spatial, 2))]
    in_perm, k_perm, out_perm = (list(rng.permutation(spatial + 2)) for _ in range(3))
    lhs_shape, rhs_shape = [0] * (spatial + 2), [0] * (spatial + 2)
    for pos, size in zip(in_perm, [n, cg * groups_f] + sizes):
        lhs_shape[pos] = size
    for pos, size in zip(k_perm, [out_features, cg] + ksizes):
        rhs_shape[pos] = size
    lhs = rng.integers(-4, 5, lhs_shape).astype(np.float32)
    rhs = rng.integers(-4, 5, rhs_shape).astype(np.float32)
    numbers = lax.ConvDimensionNumbers(tuple(in_perm), tuple(k_perm), tuple(out_perm))
    expected = np.asarray(lax.conv_general_dilated(
        lhs, rhs, strides, padding, lhs_dil, rhs_dil, numbers,
        feature_group_count=groups_f, batch_group_count=groups_b))
    dims = ConvDimensionNumbersAttr(
        int(in_perm[0]), int(in_perm[1]), tuple(int(v) for v in in_perm[2:]),
        int(k_perm[1]), int(k_perm[0]), tuple(int(v) for v in k_perm[2:]),
        int(out_perm[0]), int(out_perm[1]), tuple(int(v) for v in out_perm[2:]))
    op = conv_op(lhs, rhs, expected.shape, np.float32, dims, window_strides=strides,
                 lhs_dilation=lhs_dil, rhs_dilation=rhs_dil, padding=padding,
                 feature_group_count=groups_f, batch_group_count=groups_b)
    np.testing.assert_array_equal(call1(op, lhs, rhs), expected)


def test_window_reversal_flips_the_kernel():
    lhs = RNG.integers(-5, 5, (1, 7, 2)).astype(np.int32)       # [b, 0, f]
    rhs = RNG.integers(-5, 5, (3, 2, 4)).astype(np.int32)       # [0, i, o]
    dims = ConvDimensionNumbersAttr(0, 2, (1,), 1, 2, (0,), 0, 2, (1,))
    reversed_op = conv_op(lhs, rhs, (1, 5, 4), np.int32, dims, window_reversal=[True])
    plain_op = conv_op(lhs, rhs[::-1].copy(), (1, 5, 4), np.int32, dims)
    np.testing.assert_array_equal(call1(reversed_op, lhs, rhs),
                                  call1(plain_op, lhs, rhs[::-1].copy()))
    # and directly from the definition: result[x, o] = sum_k lhs[x + 2 - k] * rhs[k]
    expected = np.zeros((1, 5, 4), dtype=np.int64)
    for x in range(5):
        for k in range(3):
            expected[0, x] += lhs[0, x + 2 - k] @ rhs[k]
    np.testing.assert_array_equal(call1(reversed_op, lhs, rhs), expected)


def test_dynamic_conv_takes_padding_from_an_operand():
    rhs = np.ones((3, 3, 1, 1), dtype=np.int64)
    padding = np.ones((2, 2), dtype=np.int64)
    op = make_op("stablehlo.dynamic_conv", [ttype(SPEC_LHS.shape, np.int64),
                                            ttype(rhs.shape, np.int64), ttype((2, 2), np.int64)],
                 [ttype((1, 2, 2, 1), np.int64)],
                 {"dimension_numbers": NHWC, "window_strides": i64s([4, 4]),
                  "lhs_dilation": i64s([2, 2])})
    np.testing.assert_array_equal(call1(op, SPEC_LHS, rhs, padding)[0, :, :, 0],
                                  [[1, 5], [10, 14]])


# ---------------------------------------------------------------------------
# fft


def fft_op(x, kind, lengths, out_shape, out_dtype):
    return make_op("stablehlo.fft", [ttype(x.shape, x.dtype)], [ttype(out_shape, out_dtype)],
                   {"fft_type": EnumAttr("fft_type", kind), "fft_length": i64s(lengths)})


def test_fft_examples_from_interpreter_suite():
    x = np.array([1 + 2j, 3 - 4j])
    np.testing.assert_allclose(call1(fft_op(x, "FFT", [2], (2,), np.complex128), x),
                               [4 - 2j, -2 + 6j])
    y = np.array([[1 + 2j, 3 - 4j], [-5 + 6j, -7 - 8j]])
    np.testing.assert_allclose(call1(fft_op(y, "FFT", [2, 2], (2, 2), np.complex128), y),
                               [[-8 - 4j, 20j], [16, -4 - 8j]])


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-12), (np.float32, 2e-5)])
def test_fft_kinds_against_direct_dft(dtype, rtol):
    x = RNG.standard_normal((3, 4, 6)).astype(dtype)
    cdtype = np.complex128 if dtype == np.float64 else np.complex64

    def dft(v, axis, inverse=False):
        n = v.shape[axis]
        k = np.arange(n)
        w = np.exp((2j if inverse else -2j) * np.pi * np.outer(k, k) / n)
        return np.moveaxis(np.tensordot(w, np.moveaxis(v, axis, 0), axes=1), 0, axis) / (
            n if inverse else 1)
    full = dft(dft(x.astype(np.complex128), 2), 1)
    got = call1(fft_op(x, "RFFT", [4, 6], (3, 4, 4), cdtype), x)
    np.testing.assert_allclose(got, full[..., :4], rtol=rtol, atol=rtol * 10)
    back = call1(fft_op(got, "IRFFT", [4, 6], (3, 4, 6), dtype), got)
    np.testing.assert_allclose(back, x, rtol=rtol, atol=rtol * 10)
    z = x.astype(cdtype)
    got = call1(fft_op(z, "IFFT", [6], (3, 4, 6), cdtype), z)
    np.testing.assert_allclose(got, dft(z.astype(np.complex128), 2, inverse=True),
                               rtol=rtol, atol=rtol * 10)


def test_fft_of_empty_batch():
    x = np.zeros((2, 0, 8), dtype=np.float32)
    got = call1(fft_op(x, "RFFT", [8], (2, 0, 5), np.complex64), x)
    assert got.shape == (2, 0, 5) and got.dtype == np.complex64


# ---------------------------------------------------------------------------
# cholesky and triangular_solve


def spd(batch, n, complex_=False):
    a = RNG.standard_normal(batch + (n, n))
    if complex_:
        a = a + 1j * RNG.standard_normal(batch + (n, n))
    return a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)


@pytest.mark.parametrize("complex_", [False, True])
def test_cholesky_lower_and_upper_match_numpy(complex_):
    a = spd((2, 3), 4, complex_)
    op = make_op("stablehlo.cholesky", [ttype(a.shape, a.dtype)], [ttype(a.shape, a.dtype)],
                 {"lower": boolean(True)})
    lower = call1(op, a)
    np.testing.assert_allclose(lower, np.linalg.cholesky(a), rtol=1e-10, atol=1e-12)
    # Only the named triangle is read: garbage in the other one changes nothing.
    noisy = a + np.triu(RNG.standard_normal(a.shape), 1)
    np.testing.assert_allclose(call1(op, noisy), lower, rtol=1e-12)
    op.attributes["lower"] = boolean(False)
    upper = call1(op, a)
    np.testing.assert_allclose(upper, np.conj(np.swapaxes(np.linalg.cholesky(a), -1, -2)),
                               rtol=1e-10, atol=1e-12)


def test_cholesky_of_indefinite_matrix_gives_nan_not_error():
    a = np.array([[1.0, 2.0], [2.0, 1.0]], dtype=np.float32)
    op = make_op("stablehlo.cholesky", [ttype(a.shape, a.dtype)], [ttype(a.shape, a.dtype)],
                 {"lower": boolean(True)})
    assert np.isnan(call1(op, a)[1, 1])


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose", ["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"])
@pytest.mark.parametrize("unit", [True, False])
def test_triangular_solve_is_undone_by_multiplication(left, lower, transpose, unit):
    n, m = 4, 3
    a = RNG.standard_normal((2, n, n)) + 1j * RNG.standard_normal((2, n, n)) + 4 * np.eye(n)
    b = RNG.standard_normal((2, n, m) if left else (2, m, n)) + 0j
    op = make_op("stablehlo.triangular_solve", [ttype(a.shape, a.dtype), ttype(b.shape, b.dtype)],
                 [ttype(b.shape, b.dtype)],
                 {"left_side": boolean(left), "lower": boolean(lower),
                  "unit_diagonal": boolean(unit),
                  "transpose_a": EnumAttr("transpose", transpose)})
    x = call1(op, a, b)
    tri = np.tril(a) if lower else np.triu(a)
    if unit:
        tri[:, np.arange(n), np.arange(n)] = 1
    op_a = {"NO_TRANSPOSE": tri, "TRANSPOSE": np.swapaxes(tri, -1, -2),
            "ADJOINT": np.conj(np.swapaxes(tri, -1, -2))}[transpose]
    np.testing.assert_allclose(op_a @ x if left else x @ op_a, b, rtol=1e-10, atol=1e-10)


def test_triangular_solve_spec_example_f32():
    a = np.array([[1, 0, 0], [2, 4, 0], [3, 5, 6]], dtype=np.float32)
    b = np.array([[2, 0, 0], [4, 8, 0], [6, 10, 12]], dtype=np.float32)
    op = make_op("stablehlo.triangular_solve", [ttype(a.shape, a.dtype), ttype(b.shape, b.dtype)],
                 [ttype(b.shape, b.dtype)],
                 {"left_side": boolean(True), "lower": boolean(True),
                  "unit_diagonal": boolean(False),
                  "transpose_a": EnumAttr("transpose", "NO_TRANSPOSE")})
    np.testing.assert_allclose(call1(op, a, b), [[2, 0, 0], [0, 2, 0], [0, 0, 2]], atol=1e-6)


# ---------------------------------------------------------------------------
# batch_norm_*


def bn_attrs(index=1, epsilon=1e-3):
    return {"epsilon": FloatAttr(epsilon, F32), "feature_index": i64(index)}


def test_batch_norm_training_grad_and_inference_match_jax_autodiff():
    import jax
    import jax.numpy as jnp
    x = RNG.standard_normal((3, 4, 5))
    scale, offset = RNG.standard_normal(4), RNG.standard_normal(4)
    dy = RNG.standard_normal(x.shape)
    eps = 1e-3

    def train(v, s, o):
        mean = jnp.mean(v, axis=(0, 2), keepdims=True)
        var = jnp.mean((v - mean) ** 2, axis=(0, 2), keepdims=True)
        return s[None, :, None] * (v - mean) / jnp.sqrt(var + eps) + o[None, :, None]
    with jax.enable_x64(True):
        expected, vjp = jax.vjp(train, x, scale, offset)
        expected_grads = [np.asarray(g) for g in vjp(dy)]
    feature = [ttype((4,), np.float64)]
    op = make_op("stablehlo.batch_norm_training", [ttype(x.shape, x.dtype)] + feature * 2,
                 [ttype(x.shape, x.dtype)] + feature * 2, bn_attrs(epsilon=eps))
    out, mean, var = call(op, x, scale, offset)
    np.testing.assert_allclose(out, expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(mean, x.mean(axis=(0, 2)), rtol=1e-12)
    np.testing.assert_allclose(var, x.var(axis=(0, 2)), rtol=1e-12)
    op = make_op("stablehlo.batch_norm_inference", [ttype(x.shape, x.dtype)] + feature * 4,
                 [ttype(x.shape, x.dtype)], bn_attrs(epsilon=eps))
    np.testing.assert_allclose(call1(op, x, scale, offset, mean, var), expected, rtol=1e-10,
                               atol=1e-12)
    op = make_op("stablehlo.batch_norm_grad",
                 [ttype(x.shape, x.dtype)] + feature * 3 + [ttype(x.shape, x.dtype)],
                 [ttype(x.shape, x.dtype)] + feature * 2, bn_attrs(epsilon=eps))
    grads = call(op, x, scale, mean, var, dy)
    for got, want in zip(grads, expected_grads):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)


# ---------------------------------------------------------------------------
# rng and rng_bit_generator


def rbg_op(state, shape, dtype, algorithm):
    return make_op("stablehlo.rng_bit_generator", [ttype(state.shape, state.dtype)],
                   [ttype(state.shape, state.dtype), ttype(shape, dtype)],
                   {"rng_algorithm": EnumAttr("rng_algorithm", algorithm)})


def test_three_fry_spec_example():
    state = np.array([1, 2], dtype=np.uint64)
    new_state, out = call(rbg_op(state, (2, 2), np.uint64, "THREE_FRY"), state)
    np.testing.assert_array_equal(new_state, [1, 6])
    np.testing.assert_array_equal(out, np.array([[9236835810183407956, 16087790271692313299],
                                                 [18212823393184779219, 2658481902456610144]],
                                                dtype=np.uint64))


@pytest.mark.parametrize("algorithm", ["THREE_FRY", "PHILOX", "DEFAULT"])
@pytest.mark.parametrize("dtype,shape", [(np.uint64, (3, 5)), (np.uint32, (3, 5)),
                                         (np.uint32, (4, 3)), (np.uint32, ()),
                                         (np.float32, (7,)), (np.uint16, (4, 3)),
                                         (np.int8, (5,)), (np.float64, (2, 2, 3))])
def test_rng_bit_generator_matches_xla(algorithm, dtype, shape):
    import jax
    from jax import lax
    key = np.array([0x12345678, 0x9ABCDEF0, 0xFFFFFFF0, 0xFFFFFFFF], dtype=np.uint32)
    alg = {"THREE_FRY": lax.RandomAlgorithm.RNG_THREE_FRY,
           "PHILOX": lax.RandomAlgorithm.RNG_PHILOX,
           "DEFAULT": lax.RandomAlgorithm.RNG_DEFAULT}[algorithm]
    unsigned = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize]
    with jax.enable_x64(True):
        new_key, bits = lax.rng_bit_generator(key, shape, dtype=unsigned, algorithm=alg)
    state = key.view(np.uint64)  # little-endian pairs, as bitcast_convert makes them
    new_state, out = call(rbg_op(state, shape, dtype, algorithm), state)
    np.testing.assert_array_equal(new_state.view(np.uint32), np.asarray(new_key))
    assert out.shape == shape and out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out.view(unsigned), np.asarray(bits))


def test_rng_uniform_and_normal_have_the_right_shape_and_range():
    op = make_op("stablehlo.rng", [ttype((), np.int32)] * 2 + [ttype((2,), np.int64)],
                 [ttype((30, 40), np.int32)],
                 {"rng_distribution": EnumAttr("rng_distribution", "UNIFORM")})
    got = call1(op, np.int32(3), np.int32(7), np.array([30, 40]))
    assert got.shape == (30, 40) and got.dtype == np.int32
    assert got.min() >= 3 and got.max() < 7 and len(np.unique(got)) == 4
    op = make_op("stablehlo.rng", [ttype((), np.float32)] * 2 + [ttype((1,), np.int64)],
                 [ttype((20000,), np.float32)],
                 {"rng_distribution": EnumAttr("rng_distribution", "NORMAL")})
    got = call1(op, np.float32(5), np.float32(2), np.array([20000]))
    assert abs(got.mean() - 5) < 0.1 and abs(got.std() - 2) < 0.1
