"""Native reduce, reduce_window and select_and_scatter against the reference interpreter.

Every case runs the op through its native kernel and through stablehlo.interpreter
(kernel_check.check_op): integers must agree bit for bit (wraparound included), floats
within a tolerance (the native float sums fold in another order), NaNs in the same places.
"""
import numpy as np
import pytest

from pjrt.plugins.cpu.native_module import native
from pjrt.plugins.cpu.tests.kernel_check import check_op

RNG = np.random.default_rng(7)

_TYPE_NAMES = {np.dtype(np.bool_): "i1", np.dtype(np.int8): "i8", np.dtype(np.int16): "i16",
               np.dtype(np.int32): "i32", np.dtype(np.int64): "i64", np.dtype(np.uint8): "ui8",
               np.dtype(np.uint16): "ui16", np.dtype(np.uint32): "ui32",
               np.dtype(np.uint64): "ui64", np.dtype(np.float32): "f32",
               np.dtype(np.float64): "f64"}


def ttype(shape, dtype) -> str:
    dims = "x".join(str(d) for d in shape)
    return f"tensor<{dims}x{_TYPE_NAMES[np.dtype(dtype)]}>" if dims else \
        f"tensor<{_TYPE_NAMES[np.dtype(dtype)]}>"


def i64s(values) -> str:
    return "array<i64" + (": " + ", ".join(str(v) for v in values) if values else "") + ">"


def combiner_region(op: str, dtypes) -> str:
    """A reducer body applying ``stablehlo.<op>`` to each argument pair."""
    n = len(dtypes)
    scalars = [ttype((), d) for d in dtypes]
    args = [f"%x{i}: {t}" for i, t in enumerate(scalars)]
    args += [f"%y{i}: {t}" for i, t in enumerate(scalars)]
    lines = [f"  ^bb0({', '.join(args)}):"]
    for i, t in enumerate(scalars):
        lines.append(f"    %r{i} = stablehlo.{op} %x{i}, %y{i} : {t}")
    results = ", ".join(f"%r{i}" for i in range(n))
    lines.append(f"    stablehlo.return {results} : {', '.join(scalars)}")
    return "({\n" + "\n".join(lines) + "\n  })"


def module(name: str, operand_types, result_types, region: str, attrs: str) -> str:
    """``@main`` holding one generic-form op of its arguments."""
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(operand_types))
    operands = ", ".join(f"%a{i}" for i in range(len(operand_types)))
    results = ", ".join(result_types)
    n = len(result_types)
    head = "%0" if n == 1 else f"%0:{n}"
    returned = "%0" if n == 1 else ", ".join(f"%0#{i}" for i in range(n))
    return (f"func.func @main({args}) -> ({results}) {{\n"
            f"  {head} = \"{name}\"({operands}) {region} {{{attrs}}} : "
            f"({', '.join(operand_types)}) -> ({results})\n"
            f"  return {returned} : {results}\n}}\n")


def random_array(shape, dtype, op="add"):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return RNG.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return RNG.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    if op == "multiply":  # products of many factors stay in range
        return RNG.uniform(0.9, 1.1, size=shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def init_value(op, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.bool_(op in ("multiply", "minimum", "and"))
    if dtype.kind == "f" and op in ("maximum", "minimum"):
        return dtype.type(-np.inf if op == "maximum" else np.inf)
    return dtype.type(3)  # not the identity: the init must be folded in exactly once


def check_reduce(x, dims, op, rtol=1e-5, atol=1e-5):
    init = init_value(op, x.dtype)
    out_shape = [d for i, d in enumerate(x.shape) if i not in dims]
    text = module("stablehlo.reduce", [ttype(x.shape, x.dtype), ttype((), x.dtype)],
                  [ttype(out_shape, x.dtype)], combiner_region(op, [x.dtype]),
                  f"dimensions = {i64s(dims)}")
    check_op(text, [x, init], rtol=rtol, atol=atol)


SHAPES_AND_DIMS = [
    ((7,), [0]), ((3, 4, 5), [0]), ((3, 4, 5), [1]), ((3, 4, 5), [2]), ((3, 4, 5), [0, 2]),
    ((3, 4, 5), [0, 1, 2]), ((3, 4, 5), []), ((4, 1, 6), [1]), ((2, 300, 3), [1]),
    ((5, 1000), [1]), ((0, 3), [0]), ((3, 0), [0]), ((2, 3, 4, 5), [1, 3]),
]


@pytest.mark.parametrize("shape,dims", SHAPES_AND_DIMS)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("op", ["add", "multiply", "maximum", "minimum"])
def test_reduce_dims(shape, dims, dtype, op):
    check_reduce(random_array(shape, dtype, op), dims, op, rtol=1e-4)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int64,
                                   np.uint32, np.uint64, np.bool_])
@pytest.mark.parametrize("op", ["add", "multiply", "maximum", "minimum", "and", "or", "xor"])
def test_reduce_integers_wrap(dtype, op):
    check_reduce(random_array((6, 50, 7), dtype), [0, 1], op)
    check_reduce(random_array((6, 50, 7), dtype), [2], op)


@pytest.mark.parametrize("op", ["add", "maximum", "minimum"])
def test_reduce_large_parallel(op):
    # One output over many elements: split into partial results on the pool.
    check_reduce(random_array((300000,), np.float32), [0], op, rtol=1e-4, atol=1e-3)
    check_reduce(random_array((3, 70000), np.float64), [1], op, rtol=1e-9)
    check_reduce(random_array((70000, 3), np.float32), [0], op, rtol=1e-4, atol=1e-3)
    check_reduce(random_array((300000,), np.int64), [0], op)


@pytest.mark.parametrize("op", ["maximum", "minimum"])
@pytest.mark.parametrize("dims", [[0], [1], [0, 1]])
def test_reduce_nan_propagates(op, dims):
    x = random_array((40, 300), np.float32)
    x[3, 7] = np.nan
    x[10, :] = np.nan
    x[:, 250] = np.nan
    check_reduce(x, dims, op)
    check_reduce(x.astype(np.float64), dims, op)


def test_reduce_variadic():
    x = random_array((5, 6, 7), np.float32)
    y = random_array((5, 6, 7), np.int32)
    text = module("stablehlo.reduce",
                  [ttype(x.shape, np.float32), ttype(y.shape, np.int32), ttype((), np.float32),
                   ttype((), np.int32)],
                  [ttype((5, 7), np.float32), ttype((5, 7), np.int32)],
                  combiner_region("add", [np.float32, np.int32]), f"dimensions = {i64s([1])}")
    check_op(text, [x, y, np.float32(1), np.int32(2)], rtol=1e-5)


def test_reduce_refuses_other_bodies():
    # An argmax-like body (compare + select) is no single combiner.
    t = ttype((), np.float32)
    region = ("({\n  ^bb0(%x: " + t + ", %y: " + t + "):\n"
              f"    %s = stablehlo.add %x, %y : {t}\n"
              f"    %p = stablehlo.multiply %s, %y : {t}\n"
              f"    stablehlo.return %p : {t}\n  }})")
    text = module("stablehlo.reduce", [ttype((4, 5), np.float32), t],
                  [ttype((4,), np.float32)], region, f"dimensions = {i64s([1])}")
    with pytest.raises(native().Unsupported):
        check_op(text, [random_array((4, 5), np.float32), np.float32(0)])


# ---------------------------------------------------------------------------------------
# reduce_window


def window_count(size, window, stride, pad, base, dilation):
    dilated = 0 if size == 0 else (size - 1) * base + 1
    padded = pad[0] + dilated + pad[1]
    span = (window - 1) * dilation + 1
    return 0 if padded <= 0 or span > padded else (padded - span) // stride + 1


def check_reduce_window(x, op, window, strides=None, padding=None, base=None, dilations=None,
                        init=None, rtol=1e-5, atol=1e-6):
    rank = x.ndim
    strides = strides or [1] * rank
    padding = padding or [[0, 0]] * rank
    base = base or [1] * rank
    dilations = dilations or [1] * rank
    out = [window_count(*args) for args in zip(x.shape, window, strides, padding, base,
                                                 dilations)]
    init = init_value(op, x.dtype) if init is None else init
    pads = "[" + ", ".join(f"[{lo}, {hi}]" for lo, hi in padding) + "]"
    attrs = (f"window_dimensions = {i64s(window)}, window_strides = {i64s(strides)}, "
             f"base_dilations = {i64s(base)}, window_dilations = {i64s(dilations)}, "
             f"padding = dense<{pads}> : tensor<{rank}x2xi64>")
    text = module("stablehlo.reduce_window", [ttype(x.shape, x.dtype), ttype((), x.dtype)],
                  [ttype(out, x.dtype)], combiner_region(op, [x.dtype]), attrs)
    return check_op(text, [x, init], rtol=rtol, atol=atol)


def test_max_pool_nhwc():
    x = random_array((2, 15, 16, 8), np.float32)
    check_reduce_window(x, "maximum", [1, 3, 3, 1], [1, 2, 2, 1], [[0, 0], [1, 1], [1, 1], [0, 0]])
    x[0, 3, 4, 5] = np.nan
    check_reduce_window(x, "maximum", [1, 2, 2, 1], [1, 2, 2, 1])


def test_avg_pool_nchw_sum():
    x = random_array((2, 3, 17, 12), np.float32)
    check_reduce_window(x, "add", [1, 1, 3, 3], [1, 1, 2, 2], [[0, 0], [0, 0], [1, 1], [0, 1]],
                        init=np.float32(0))
    check_reduce_window(x.astype(np.float64), "add", [1, 1, 2, 2])


def test_reduce_window_dilations_and_negative_padding():
    x = random_array((9, 10), np.float32)
    check_reduce_window(x, "add", [2, 3], [3, 1], [[2, 1], [-1, 2]], base=[2, 1],
                        dilations=[3, 2])
    check_reduce_window(x, "minimum", [3, 2], [1, 2], [[1, 1], [0, 0]], base=[1, 3],
                        dilations=[2, 1], init=np.float32(0.5))


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint16, np.bool_])
@pytest.mark.parametrize("op", ["add", "multiply", "maximum", "xor"])
def test_reduce_window_integers(dtype, op):
    x = random_array((6, 7, 5), dtype)
    check_reduce_window(x, op, [2, 3, 1], [1, 2, 1], [[1, 0], [1, 1], [0, 0]], base=[2, 1, 1])


def test_reduce_window_spec_example():
    x = np.array([[1, 2], [3, 4], [5, 6]], dtype=np.int64)
    check_reduce_window(x, "add", [2, 1], [4, 1], [[2, 1], [0, 0]], base=[2, 1],
                        dilations=[3, 1], init=np.int64(0))


def prefix_window(x, axis, extra=0, reverse=False):
    """Window, padding of the running reduction along ``axis`` (JAX's cumsum spelling);
    ``extra`` widens the window past the dimension, ``reverse`` pads the other side."""
    window = [1] * x.ndim
    padding = [[0, 0] for _ in range(x.ndim)]
    window[axis] = x.shape[axis] + extra
    padding[axis] = [0, window[axis] - 1] if reverse else [window[axis] - 1, 0]
    return window, padding


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_running_sums_fold_like_the_interpreter_bit_for_bit(axis):
    # The scan path (kernels_reduction.cc: plan_prefix) must fold the same values in the same
    # order as the window loops: exact equality, not a tolerance.
    x = random_array((5, 7, 6), np.float32)
    for extra in (0, 3):
        window, padding = prefix_window(x, axis, extra)
        check_reduce_window(x, "add", window, padding=padding, init=np.float32(0), rtol=0,
                            atol=0)
    x[2, 3, 1] = np.nan
    window, padding = prefix_window(x, axis)
    check_reduce_window(x, "maximum", window, padding=padding, rtol=0, atol=0)


def test_running_products_and_integer_sums_wrap_like_the_interpreter():
    x = random_array((4, 33), np.int32)
    window, padding = prefix_window(x, 1)
    check_reduce_window(x, "add", window, padding=padding, init=np.int32(0))
    check_reduce_window(x, "multiply", window, padding=padding, init=np.int32(1))
    f = random_array((3, 40), np.float64, op="multiply")
    window, padding = prefix_window(f, 1)
    check_reduce_window(f, "multiply", window, padding=padding, init=np.float64(1), rtol=0,
                        atol=0)


def test_running_reductions_that_are_not_scans():
    # An init that changes when folded with itself (add 3: the padding taps add it again and
    # again) and a window padded on the high side (a reverse cumsum) take the window loops.
    x = random_array((6, 9), np.float32)
    window, padding = prefix_window(x, 1)
    check_reduce_window(x, "add", window, padding=padding, init=np.float32(3))
    window, padding = prefix_window(x, 0, reverse=True)
    check_reduce_window(x, "add", window, padding=padding, init=np.float32(0))
    window, padding = prefix_window(x, 1)
    got = check_reduce_window(x, "add", window, padding=padding, init=np.float32(0))
    np.testing.assert_allclose(got[0], np.cumsum(x, axis=1), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------
# select_and_scatter (max-pool backward)


def select_and_scatter_text(shape, source_shape, dtype, direction, window, strides, padding,
                            combiner="add"):
    t = ttype((), dtype)
    select = ("({\n  ^bb0(%x: " + t + ", %y: " + t + "):\n"
              f"    %p = stablehlo.compare {direction}, %x, %y : ({t}, {t}) -> tensor<i1>\n"
              "    stablehlo.return %p : tensor<i1>\n  }, {\n"
              f"  ^bb0(%u: {t}, %v: {t}):\n"
              f"    %s = stablehlo.{combiner} %u, %v : {t}\n"
              f"    stablehlo.return %s : {t}\n  }})")
    rank = len(shape)
    pads = "[" + ", ".join(f"[{lo}, {hi}]" for lo, hi in padding) + "]"
    attrs = (f"window_dimensions = {i64s(window)}, window_strides = {i64s(strides)}, "
             f"padding = dense<{pads}> : tensor<{rank}x2xi64>")
    return module("stablehlo.select_and_scatter",
                  [ttype(shape, dtype), ttype(source_shape, dtype), t],
                  [ttype(shape, dtype)], select, attrs)


@pytest.mark.parametrize("direction", ["GE", "GT", "LE"])
def test_select_and_scatter_max_pool_grad(direction):
    shape, window, strides = (2, 9, 8, 3), [1, 3, 3, 1], [1, 2, 2, 1]
    padding = [[0, 0], [1, 1], [1, 0], [0, 0]]
    out = [window_count(s, w, st, p, 1, 1) for s, w, st, p in zip(shape, window, strides,
                                                                    padding)]
    # Few distinct values, so that ties decide between GE and GT.
    x = RNG.integers(0, 4, size=shape).astype(np.float32)
    source = random_array(out, np.float32)
    text = select_and_scatter_text(shape, out, np.float32, direction, window, strides, padding)
    check_op(text, [x, source, np.float32(0)], rtol=1e-6)
    xi = x.astype(np.int32)
    text = select_and_scatter_text(shape, out, np.int32, direction, window, strides, padding)
    check_op(text, [xi, random_array(out, np.int32), np.int32(1)])


def test_select_and_scatter_refuses_other_select():
    text = select_and_scatter_text((4, 4), (2, 2), np.float32, "EQ", [2, 2], [2, 2],
                                   [[0, 0], [0, 0]])
    with pytest.raises(native().Unsupported):
        check_op(text, [random_array((4, 4), np.float32), random_array((2, 2), np.float32),
                        np.float32(0)])
