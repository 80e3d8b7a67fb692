"""Native dot_general, dot and convolution against the reference interpreter.

The native kernels multiply on BLAS (blocked, FMA), the interpreter sums small contractions
sequentially (linalg.py, Note [summation order]), so float results agree within a tolerance
scaled by the contraction length.
"""
import ml_dtypes
import numpy as np
import pytest

from pjrt.plugins.cpu.native_module import native
from pjrt.plugins.cpu.tests.kernel_check import check_op, run_kernel

RNG = np.random.default_rng(3)

_TYPE_NAMES = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64",
               np.dtype(np.float16): "f16", np.dtype(ml_dtypes.bfloat16): "bf16",
               np.dtype(np.int32): "i32", np.dtype(np.complex64): "complex<f32>"}


def ttype(shape, dtype) -> str:
    name = _TYPE_NAMES[np.dtype(dtype)]
    return f"tensor<{'x'.join(str(d) for d in shape)}x{name}>" if shape else f"tensor<{name}>"


def random(shape, dtype=np.float32):
    if np.dtype(dtype).kind == "i":
        return RNG.integers(-5, 5, size=shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def one_op_module(operand_types, result_type, op_text) -> str:
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(operand_types))
    return (f"func.func @main({args}) -> {result_type} {{\n  %0 = {op_text}\n"
            f"  return %0 : {result_type}\n}}\n")


# ---------------------------------------------------------------------------------------
# dot_general


def dot_general_text(lhs_shape, rhs_shape, lb, rb, lc, rc, dtype, out_dtype=None):
    out_dtype = out_dtype or dtype
    lf = [d for d in range(len(lhs_shape)) if d not in lb + lc]
    rf = [d for d in range(len(rhs_shape)) if d not in rb + rc]
    out = [lhs_shape[d] for d in lb] + [lhs_shape[d] for d in lf] + [rhs_shape[d] for d in rf]
    types = [ttype(lhs_shape, dtype), ttype(rhs_shape, dtype)]
    result = ttype(out, out_dtype)
    op = (f"stablehlo.dot_general %a0, %a1, batching_dims = {lb} x {rb}, "
          f"contracting_dims = {lc} x {rc} : ({types[0]}, {types[1]}) -> {result}")
    return one_op_module(types, result, op)


def check_dot_general(lhs_shape, rhs_shape, lb, rb, lc, rc, dtype=np.float32, out_dtype=None,
                      rtol=1e-5):
    text = dot_general_text(lhs_shape, rhs_shape, lb, rb, lc, rc, dtype, out_dtype)
    k = int(np.prod([lhs_shape[d] for d in lc]))
    check_op(text, [random(lhs_shape, dtype), random(rhs_shape, dtype)], rtol=rtol,
             atol=rtol * np.sqrt(k))


DOT_CASES = [
    # (lhs shape, rhs shape, lhs batch, rhs batch, lhs contracting, rhs contracting)
    ((4, 5), (5, 6), [], [], [1], [0]),            # plain matmul
    ((5, 4), (5, 6), [], [], [0], [0]),            # lhs transposed in place
    ((4, 5), (6, 5), [], [], [1], [1]),            # rhs transposed in place
    ((5, 4), (6, 5), [], [], [0], [1]),            # both transposed
    ((3, 4, 5), (3, 5, 6), [0], [0], [2], [1]),    # batched
    ((5, 3, 4), (6, 3, 5), [1], [1], [0], [2]),    # batch in the middle: packed
    ((2, 3, 4, 5), (2, 3, 5, 6), [0, 1], [0, 1], [3], [2]),
    ((4, 2, 5, 3), (3, 5, 2, 7), [1], [2], [2, 3], [1, 0]),  # two contracting dims, permuted
    ((7,), (7,), [], [], [0], [0]),                # inner product
    ((4, 5), (6, 7), [], [], [], []),              # outer product
    ((1, 4, 5), (5, 1, 6), [], [], [2], [0]),      # size-1 dims
    ((64, 8, 8), (64, 8, 8), [0], [0], [2], [1]),  # many small batches (parallel)
    ((3, 0, 4), (3, 4, 2), [0], [0], [2], [1]),    # empty
    ((3, 4, 0), (3, 0, 2), [0], [0], [2], [1]),    # empty contraction: zeros
]


@pytest.mark.parametrize("case", DOT_CASES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dot_general_layouts(case, dtype):
    check_dot_general(*case, dtype=dtype, rtol=1e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("case", [
    ((300, 200), (200, 250), [], [], [1], [0]),   # split over rows of the result
    ((200, 300), (200, 250), [], [], [0], [0]),   # rows, lhs transposed
    ((100, 200), (200, 400), [], [], [1], [0]),   # split over columns
    ((100, 200), (400, 200), [], [], [1], [1]),   # columns, rhs transposed
], ids=str)
def test_dot_general_large(case):
    # Big enough to be split over the thread pool.
    check_dot_general(*case)
    check_dot_general(*case, dtype=np.float64, rtol=1e-12)


@pytest.mark.parametrize("dtype,out_dtype", [
    (np.float16, np.float16), (ml_dtypes.bfloat16, ml_dtypes.bfloat16),
    (ml_dtypes.bfloat16, np.float32), (np.float32, np.float64), (np.float16, np.float64)])
def test_dot_general_converts(dtype, out_dtype):
    # 16-bit operands accumulate in f32 and round once; the rounding may differ by an ulp
    # where the two summation orders straddle a rounding boundary.
    rtol = {np.dtype(np.float16): 2e-3, np.dtype(ml_dtypes.bfloat16): 1e-2}.get(
        np.dtype(out_dtype), 1e-5)
    check_dot_general((3, 8, 16), (3, 16, 5), [0], [0], [2], [1], dtype, out_dtype, rtol=rtol)


@pytest.mark.parametrize("out_dtype", [np.float16, ml_dtypes.bfloat16])
def test_dot_general_rounds_to_16_bit(out_dtype):
    # x * 1 rounds x once: ties, subnormals and overflow to inf must round as numpy does.
    # (No NaN: numpy's assert_allclose does not see NaNs in bfloat16 arrays.)
    x = np.concatenate([
        RNG.standard_normal(2000) * 10.0 ** RNG.integers(-9, 6, 2000),
        [65504, 65519.99, 65520, 1e6, 2.0**-24, 2.0**-25, 3 * 2.0**-26, 2.0**-14 - 2.0**-25,
         1 + 2.0**-11, 1 + 3 * 2.0**-11, 1 + 2.0**-8, 1 + 3 * 2.0**-8, np.inf, -np.inf],
    ]).astype(np.float32)[:, None]
    text = dot_general_text(x.shape, (1, 1), [], [], [1], [0], np.float32, out_dtype)
    check_op(text, [x, np.ones((1, 1), np.float32)], rtol=0)


def test_dot_legacy():
    for lhs, rhs, out in [((4, 5), (5, 6), (4, 6)), ((4, 5), (5,), (4,)), ((5,), (5, 6), (6,)),
                          ((5,), (5,), ())]:
        types = [ttype(lhs, np.float32), ttype(rhs, np.float32)]
        result = ttype(out, np.float32)
        text = one_op_module(types, result, f"stablehlo.dot %a0, %a1 : ({types[0]}, "
                                            f"{types[1]}) -> {result}")
        check_op(text, [random(lhs), random(rhs)], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.int32, np.complex64])
def test_dot_general_refuses_other_types(dtype):
    text = dot_general_text((4, 5), (5, 6), [], [], [1], [0], dtype)
    with pytest.raises(native().Unsupported):
        check_op(text, [random((4, 5), dtype), random((5, 6), dtype)])


def test_dot_general_refuses_mixed_operands():
    # Not valid StableHLO (the verifier rejects it), so the kernel is called directly.
    attrs = {"dot_dimension_numbers": {"lhs_batching_dimensions": [],
                                       "rhs_batching_dimensions": [],
                                       "lhs_contracting_dimensions": [1],
                                       "rhs_contracting_dimensions": [0]}}
    with pytest.raises(native().Unsupported):
        run_kernel("stablehlo.dot_general", attrs, [("f32", [4, 5]), ("f64", [5, 6])],
                   [("f64", [4, 6])], [random((4, 5)), random((5, 6), np.float64)])


# ---------------------------------------------------------------------------------------
# convolution


def conv_out(size, k, stride, pad, lhs_dil, rhs_dil):
    dilated = 0 if size == 0 else (size - 1) * lhs_dil + 1
    padded = pad[0] + dilated + pad[1]
    span = (k - 1) * rhs_dil + 1
    return 0 if padded <= 0 or span > padded else (padded - span) // stride + 1


def layout_shape(layout, sizes):
    """Shape of a tensor in ``layout`` ("b01f", "01io"...): letters and spatial digits."""
    return [sizes[c] if not c.isdigit() else sizes["s"][int(c)] for c in layout]


def check_conv(x_layout, w_layout, y_layout, n, c, o, spatial, kernel, strides=None,
               padding=None, lhs_dil=None, rhs_dil=None, reverse=None, groups=1,
               batch_groups=1, dtype=np.float32):
    dims = len(spatial)
    strides = strides or [1] * dims
    padding = padding or [[0, 0]] * dims
    lhs_dil = lhs_dil or [1] * dims
    rhs_dil = rhs_dil or [1] * dims
    reverse = reverse or [False] * dims
    out = [conv_out(*a) for a in zip(spatial, kernel, strides, padding, lhs_dil, rhs_dil)]
    x_shape = layout_shape(x_layout, {"b": n, "f": c, "s": spatial})
    w_shape = layout_shape(w_layout, {"i": c // groups, "o": o, "s": kernel})
    y_shape = layout_shape(y_layout, {"b": n // batch_groups, "f": o, "s": out})
    types = [ttype(x_shape, dtype), ttype(w_shape, dtype)]
    result = ttype(y_shape, dtype)

    def dn(layout):
        return "[" + ", ".join(layout) + "]"

    def ints(values):
        return "[" + ", ".join(str(v).lower() for v in values) + "]"

    pads = "[" + ", ".join(f"[{lo}, {hi}]" for lo, hi in padding) + "]"
    op = (f"stablehlo.convolution(%a0, %a1) dim_numbers = {dn(x_layout)}x{dn(w_layout)}->"
          f"{dn(y_layout)}, window = {{stride = {ints(strides)}, pad = {pads}, "
          f"lhs_dilate = {ints(lhs_dil)}, rhs_dilate = {ints(rhs_dil)}, "
          f"reverse = {ints(reverse)}}} {{batch_group_count = {batch_groups} : i64, "
          f"feature_group_count = {groups} : i64}} : ({types[0]}, {types[1]}) -> {result}")
    text = one_op_module(types, result, op)
    k = (c // groups) * int(np.prod(kernel))
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    check_op(text, [random(x_shape, dtype), random(w_shape, dtype)], rtol=rtol,
             atol=rtol * np.sqrt(k))


NHWC = ("b01f", "01io", "b01f")
NCHW = ("bf01", "oi01", "bf01")


@pytest.mark.parametrize("layouts", [NHWC, NCHW, ("f01b", "i01o", "0bf1")], ids=str)
def test_conv2d_layouts(layouts):
    check_conv(*layouts, n=2, c=3, o=4, spatial=[7, 6], kernel=[3, 3],
               padding=[[1, 1], [1, 1]])
    check_conv(*layouts, n=2, c=5, o=3, spatial=[9, 8], kernel=[3, 2], strides=[2, 3],
               padding=[[0, 1], [2, 0]])


def test_conv1d():
    check_conv("b0f", "0io", "b0f", n=3, c=4, o=5, spatial=[11], kernel=[3], strides=[2],
               padding=[[1, 2]])
    check_conv("bf0", "oi0", "bf0", n=2, c=3, o=2, spatial=[10], kernel=[4], rhs_dil=[2],
               dtype=np.float64)


def test_conv_dilations_and_reversal():
    # lhs dilation with negative padding is how transposed convolutions look.
    check_conv(*NHWC, n=2, c=3, o=4, spatial=[5, 6], kernel=[3, 2], lhs_dil=[2, 3],
               rhs_dil=[1, 2], padding=[[2, -1], [1, 1]], reverse=[True, False])
    check_conv(*NCHW, n=1, c=2, o=3, spatial=[8, 7], kernel=[2, 3], rhs_dil=[3, 2],
               strides=[2, 1], reverse=[True, True], dtype=np.float64)


def test_conv_pointwise():
    check_conv(*NHWC, n=2, c=8, o=6, spatial=[5, 5], kernel=[1, 1])
    check_conv(*NCHW, n=2, c=8, o=6, spatial=[5, 5], kernel=[1, 1], groups=2)
    check_conv(*NHWC, n=4, c=3, o=4, spatial=[5, 5], kernel=[1, 1], batch_groups=2)


@pytest.mark.parametrize("layouts", [NHWC, NCHW], ids=str)
def test_conv_feature_groups(layouts):
    check_conv(*layouts, n=2, c=6, o=9, spatial=[6, 5], kernel=[3, 3], groups=3,
               padding=[[1, 1], [1, 1]])
    # Depthwise: one input feature per group, multiplier 1 and 2.
    check_conv(*layouts, n=2, c=8, o=8, spatial=[7, 7], kernel=[3, 3], groups=8,
               strides=[2, 2], padding=[[1, 1], [1, 1]])
    check_conv(*layouts, n=1, c=4, o=8, spatial=[6, 5], kernel=[3, 2], groups=4)


@pytest.mark.parametrize("layouts", [NHWC, ("f01b", "i01o", "01bf")], ids=str)
def test_conv_batch_groups(layouts):
    # The weight gradient of a (depthwise) convolution uses batch groups.
    check_conv(*layouts, n=6, c=4, o=6, spatial=[5, 6], kernel=[2, 3], batch_groups=3)
    check_conv(*layouts, n=4, c=2, o=4, spatial=[5, 5], kernel=[3, 3], batch_groups=4,
               padding=[[1, 1], [1, 1]], dtype=np.float64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
def test_conv_channels_first_in_place(dtype):
    # NCHW/OIHW convolutions run without copies (kernels_linalg.cc, Note [channels-first
    # convolution]): im2col rows are runs along the last spatial dim, cut by the padding.
    check_conv(*NCHW, n=3, c=5, o=7, spatial=[9, 8], kernel=[3, 3], strides=[2, 1],
               padding=[[1, 1], [2, 0]], rhs_dil=[1, 2], reverse=[False, True], dtype=dtype)
    # Padding wider than the image: some taps read no x at all.
    check_conv(*NCHW, n=1, c=2, o=3, spatial=[2, 3], kernel=[3, 3], padding=[[3, 3], [2, 4]],
               dtype=dtype)
    # Negative padding crops.
    check_conv(*NCHW, n=2, c=3, o=2, spatial=[7, 7], kernel=[2, 2], padding=[[-1, 0], [0, -2]],
               dtype=dtype)
    check_conv("bf012", "oi012", "bf012", n=2, c=3, o=4, spatial=[5, 4, 6], kernel=[2, 3, 2],
               strides=[1, 2, 2], padding=[[1, 0], [1, 1], [0, 1]], dtype=dtype)
    # One image and one group: the im2col and the GEMM of it split over the threads.
    check_conv(*NCHW, n=1, c=16, o=24, spatial=[20, 20], kernel=[3, 3], padding=[[1, 1], [1, 1]],
               dtype=dtype)
    # Pointwise: the x planes are the GEMM operand; one and many images.
    check_conv(*NCHW, n=1, c=12, o=8, spatial=[6, 5], kernel=[1, 1], dtype=dtype)
    check_conv(*NCHW, n=5, c=12, o=9, spatial=[4, 3], kernel=[1, 1], dtype=dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=str)
def test_conv_channels_first_copied_cases(dtype):
    # Feature groups (depthwise with multiplier 1 and 3 too), lhs dilation and batch groups
    # take the channels-last path, with copies.
    check_conv(*NCHW, n=2, c=16, o=8, spatial=[9, 9], kernel=[3, 3], groups=4,
               strides=[2, 2], padding=[[1, 1], [1, 1]], dtype=dtype)
    check_conv(*NCHW, n=2, c=4, o=12, spatial=[8, 7], kernel=[5, 3], groups=4,
               strides=[1, 3], rhs_dil=[2, 1], padding=[[2, 6], [1, 1]],
               reverse=[True, False], dtype=dtype)
    check_conv("bf0", "oi0", "bf0", n=3, c=5, o=5, spatial=[11], kernel=[4], groups=5,
               padding=[[2, 1]], dtype=dtype)
    check_conv(*NCHW, n=2, c=3, o=4, spatial=[5, 6], kernel=[3, 2], lhs_dil=[2, 3],
               padding=[[2, -1], [1, 1]], dtype=dtype)
    check_conv(*NCHW, n=4, c=3, o=6, spatial=[5, 5], kernel=[3, 3], batch_groups=2,
               padding=[[1, 1], [1, 1]], dtype=dtype)


def test_conv_big_nhwc():
    # Several im2col row blocks per image.
    check_conv(*NHWC, n=2, c=64, o=32, spatial=[40, 40], kernel=[3, 3],
               padding=[[1, 1], [1, 1]])


def test_conv_refuses_integers():
    text = one_op_module(
        [ttype((1, 4, 4, 2), np.int32), ttype((3, 3, 2, 2), np.int32)],
        ttype((1, 2, 2, 2), np.int32),
        "stablehlo.convolution(%a0, %a1) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],"
        " window = {} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : "
        "(tensor<1x4x4x2xi32>, tensor<3x3x2x2xi32>) -> tensor<1x2x2x2xi32>")
    with pytest.raises(native().Unsupported):
        check_op(text, [random((1, 4, 4, 2), np.int32), random((3, 3, 2, 2), np.int32)])
