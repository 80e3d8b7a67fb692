"""Native reduce and reduce_window with (value, index) bodies (argmax/argmin, max pooling
with indices) against the reference interpreter, bit for bit.

The bodies are written as JAX and the PyTorch lowering write them (NaN picked or not, ties
to the lower index, the value of an equal pair taken from either side). Inputs have many
ties, NaNs, signed zeros and infinities, repeated indices, windows with padding, strides,
dilations and base dilations, and folds longer than the interpreter's sequential limit
(its pairwise tree). The kernels apply the body's own pick table in the interpreter's fold
order, so every bit must agree, NaN payloads and the sign of zero included.
"""
import numpy as np
import pytest

import pjrt
import stablehlo
from stablehlo.interpreter import evaluate
from stablehlo.ir.types import numpy_dtype, parse_element_type_name

from pjrt.plugins.cpu.tests.kernel_check import i64s, run_native, single_op, ttype

RNG = np.random.default_rng(11)

# {V}: the value type, {I}: the index type. jnp.argmax/argmin's body (lax._compute_argminmax):
# NaN wins, and on equal values the value comes from the second pair, the index from the
# lower one.
_JAX = """
    %better = stablehlo.compare {DIR}, %a, %b, FLOAT : ({V}, {V}) -> tensor<i1>
    %nan = stablehlo.compare NE, %a, %a, FLOAT : ({V}, {V}) -> tensor<i1>
    %pick = stablehlo.or %better, %nan : tensor<i1>
    %eq = stablehlo.compare EQ, %a, %b, FLOAT : ({V}, {V}) -> tensor<i1>
    %lt = stablehlo.compare LT, %i, %j, SIGNED : ({I}, {I}) -> tensor<i1>
    %tie = stablehlo.and %eq, %lt : tensor<i1>
    %pick_index = stablehlo.or %pick, %tie : tensor<i1>
    %v = stablehlo.select %pick, %a, %b : tensor<i1>, {V}
    %k = stablehlo.select %pick_index, %i, %j : tensor<i1>, {I}
    stablehlo.return %v, %k : {V}, {I}"""
# frameworks/torch/lowering/pooling.py's max_pool2d_with_indices body.
_TORCH_POOL = """
    %a_nan = stablehlo.compare NE, %a, %a : ({V}, {V}) -> tensor<i1>
    %gt = stablehlo.compare GT, %a, %b : ({V}, {V}) -> tensor<i1>
    %eq = stablehlo.compare EQ, %a, %b : ({V}, {V}) -> tensor<i1>
    %lt = stablehlo.compare LT, %i, %j : ({I}, {I}) -> tensor<i1>
    %tie = stablehlo.and %eq, %lt : tensor<i1>
    %p0 = stablehlo.or %gt, %a_nan : tensor<i1>
    %pick = stablehlo.or %p0, %tie : tensor<i1>
    %v = stablehlo.select %pick, %a, %b : tensor<i1>, {V}
    %k = stablehlo.select %pick, %i, %j : tensor<i1>, {I}
    stablehlo.return %v, %k : {V}, {I}"""
# A plain argmin without NaN tests (a NaN is kept or dropped by position).
_PLAIN_MIN = """
    %lt = stablehlo.compare LT, %b, %a : ({V}, {V}) -> tensor<i1>
    %eq = stablehlo.compare EQ, %a, %b : ({V}, {V}) -> tensor<i1>
    %later = stablehlo.compare GT, %i, %j : ({I}, {I}) -> tensor<i1>
    %tie = stablehlo.and %eq, %later : tensor<i1>
    %pick = stablehlo.or %lt, %tie : tensor<i1>
    %v = stablehlo.select %pick, %b, %a : tensor<i1>, {V}
    %k = stablehlo.select %pick, %j, %i : tensor<i1>, {I}
    stablehlo.return %v, %k : {V}, {I}"""
BODIES = {"jax_argmax": _JAX.replace("{DIR}", "GT"), "jax_argmin": _JAX.replace("{DIR}", "LT"),
          "torch_pool": _TORCH_POOL, "plain_argmin": _PLAIN_MIN}


def region(body: str, vt: str, it: str) -> str:
    v, i = f"tensor<{vt}>", f"tensor<{it}>"
    text = body.replace("{V}", v).replace("{I}", i)
    if not vt.startswith(("f", "bf")):
        text = text.replace(", FLOAT", ", UNSIGNED" if vt.startswith("ui") else ", SIGNED")
    return f"({{\n  ^bb0(%a: {v}, %i: {i}, %b: {v}, %j: {i}):{text}\n  }})"


def pair_module(name: str, shape, out_shape, vt: str, it: str, body: str, attrs: str) -> str:
    operands = [ttype(shape, vt), ttype(shape, it), f"tensor<{vt}>", f"tensor<{it}>"]
    results = [ttype(out_shape, vt), ttype(out_shape, it)]
    args = ", ".join(f"%x{k}: {t}" for k, t in enumerate(operands))
    return (f"func.func @main({args}) -> ({', '.join(results)}) {{\n"
            f"  %0:2 = \"{name}\"(%x0, %x1, %x2, %x3) {region(BODIES[body], vt, it)} "
            f"{{{attrs}}} : ({', '.join(operands)}) -> ({', '.join(results)})\n"
            f"  return %0#0, %0#1 : {', '.join(results)}\n}}\n")


def values(shape, vt: str) -> np.ndarray:
    """Few distinct values (ties everywhere), with NaNs, both zeros and infinities."""
    dtype = numpy_dtype(parse_element_type_name(vt))
    if dtype.kind in "iu":
        return RNG.integers(-3, 4, size=shape).astype(dtype)
    pool = np.array([0.0, -0.0, 1.5, -1.5, 2.0, np.inf, -np.inf, np.nan, -np.nan, 1.5, 2.0])
    return RNG.choice(pool, size=shape).astype(dtype)


def indices(shape, it: str) -> np.ndarray:
    """Small indices, so equal ones meet too (the body's index relation 'eq')."""
    dtype = numpy_dtype(parse_element_type_name(it))
    return RNG.integers(-1, 6, size=shape).astype(dtype)


def check_bits(text: str, inputs) -> None:
    module = stablehlo.parse(text)
    got = run_native(single_op(module), inputs)
    want = evaluate(module, inputs)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        bits = f"u{g.dtype.itemsize}"
        np.testing.assert_array_equal(g.view(bits), w.view(bits))


def init_pair(vt: str, it: str, body: str):
    vdtype = numpy_dtype(parse_element_type_name(vt))
    low = "min" not in body
    if vdtype.kind == "f" or vt == "bf16":
        value = -np.inf if low else np.inf
    else:
        info = np.iinfo(vdtype)
        value = info.min if low else info.max
    return np.asarray(value).astype(vdtype), np.asarray(-1).astype(
        numpy_dtype(parse_element_type_name(it)))


@pytest.mark.parametrize("body", sorted(BODIES))
@pytest.mark.parametrize("shape,dims", [((5, 7), [1]), ((5, 7), [0]), ((3, 4, 5), [0, 2]),
                                        ((2, 600), [1]), ((3, 0), [1]), ((0, 3), [1]),
                                        ((4,), [0])])
def test_reduce_pair_matches_interpreter_bits(body, shape, dims):
    out = [d for k, d in enumerate(shape) if k not in dims]
    for vt, it in (("f32", "i64"), ("f64", "i32")):
        text = pair_module("stablehlo.reduce", shape, out, vt, it, body,
                           f"dimensions = {i64s(dims)}")
        check_bits(text, [values(shape, vt), indices(shape, it), *init_pair(vt, it, body)])


@pytest.mark.parametrize("vt", ["bf16", "f16", "i32", "ui8"])
def test_reduce_pair_other_value_types(vt):
    shape = (6, 9)
    text = pair_module("stablehlo.reduce", shape, [6], vt, "i32", "jax_argmax",
                       f"dimensions = {i64s([1])}")
    check_bits(text, [values(shape, vt), indices(shape, "i32"),
                      *init_pair(vt, "i32", "jax_argmax")])


def _window_attrs(window, strides, padding, base=None, dilation=None) -> str:
    rank = len(window)
    pads = "[" + ", ".join(f"[{lo}, {hi}]" for lo, hi in padding) + "]"
    text = (f"window_dimensions = {i64s(window)}, window_strides = {i64s(strides)}, "
            f"padding = dense<{pads}> : tensor<{rank}x2xi64>")
    if base is not None:
        text += f", base_dilations = {i64s(base)}"
    if dilation is not None:
        text += f", window_dilations = {i64s(dilation)}"
    return text


def _window_count(size, window, stride, pad, base, dilation):
    dilated = 0 if size == 0 else (size - 1) * base + 1
    padded = pad[0] + dilated + pad[1]
    span = (window - 1) * dilation + 1
    return 0 if padded <= 0 or span > padded else (padded - span) // stride + 1


WINDOWS = [
    # max_pool2d(3, stride 2, padding 1) on NCHW, as ResNet's stem does
    ((2, 3, 9, 8), [1, 1, 3, 3], [1, 1, 2, 2], [(0, 0), (0, 0), (1, 1), (1, 1)], None, None),
    # ceil_mode's extra high padding, window dilation
    ((1, 2, 7, 7), [1, 1, 2, 2], [1, 1, 2, 2], [(0, 0), (0, 0), (0, 1), (0, 1)], None,
     [1, 1, 2, 1]),
    # base dilation and negative padding
    ((3, 6), [2, 3], [1, 2], [(1, -1), (2, 0)], [2, 1], [1, 2]),
    # a window longer than the interpreter's sequential fold (17 x 17 = 289 taps)
    ((1, 20, 18), [1, 17, 17], [1, 2, 1], [(0, 0), (1, 0), (0, 0)], None, None),
]


@pytest.mark.parametrize("body", sorted(BODIES))
@pytest.mark.parametrize("shape,window,strides,padding,base,dilation", WINDOWS)
def test_reduce_window_pair_matches_interpreter_bits(body, shape, window, strides, padding,
                                                     base, dilation):
    out = [_window_count(s, w, st, p, b, d) for s, w, st, p, b, d in zip(
        shape, window, strides, padding, base or [1] * len(shape),
        dilation or [1] * len(shape))]
    attrs = _window_attrs(window, strides, padding, base, dilation)
    for vt, it in (("f32", "i64"), ("bf16", "i32"), ("i32", "i64")):
        text = pair_module("stablehlo.reduce_window", shape, out, vt, it, body, attrs)
        check_bits(text, [values(shape, vt), indices(shape, it), *init_pair(vt, it, body)])


_JAX_ARGMAX_PROGRAM = """
func.func @main(%x: tensor<4x300xf32>) -> (tensor<4xi32>, tensor<2x3x4x4xf32>,
                                         tensor<2x3x4x4xi64>) {
  %iota = stablehlo.iota dim = 1 : tensor<4x300xi32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.reduce(%x init: %ninf), (%iota init: %zero) across dimensions = [1]
      : (tensor<4x300xf32>, tensor<4x300xi32>, tensor<f32>, tensor<i32>)
      -> (tensor<4xf32>, tensor<4xi32>)
    reducer(%a: tensor<f32>, %b: tensor<f32>) (%i: tensor<i32>, %j: tensor<i32>) {
      %better = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %nan = stablehlo.compare NE, %a, %a, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %pick = stablehlo.or %better, %nan : tensor<i1>
      %eq = stablehlo.compare EQ, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %lt = stablehlo.compare LT, %i, %j, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %tie = stablehlo.and %eq, %lt : tensor<i1>
      %pick_index = stablehlo.or %pick, %tie : tensor<i1>
      %v = stablehlo.select %pick, %a, %b : tensor<i1>, tensor<f32>
      %k = stablehlo.select %pick_index, %i, %j : tensor<i1>, tensor<i32>
      stablehlo.return %v, %k : tensor<f32>, tensor<i32>
    }
  %img = stablehlo.reshape %x : (tensor<4x300xf32>) -> tensor<2x3x10x20xf32>
  %sl = stablehlo.slice %img [0:2, 0:3, 0:8, 0:8] : (tensor<2x3x10x20xf32>) -> tensor<2x3x8x8xf32>
  %flat = stablehlo.iota dim = 0 : tensor<64xi64>
  %plane = stablehlo.reshape %flat : (tensor<64xi64>) -> tensor<8x8xi64>
  %idx = stablehlo.broadcast_in_dim %plane, dims = [2, 3] : (tensor<8x8xi64>) -> tensor<2x3x8x8xi64>
  %m1 = stablehlo.constant dense<-1> : tensor<i64>
  %p:2 = "stablehlo.reduce_window"(%sl, %idx, %ninf, %m1) ({
    ^bb0(%a: tensor<f32>, %i: tensor<i64>, %b: tensor<f32>, %j: tensor<i64>):
      %a_nan = stablehlo.compare NE, %a, %a : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %gt = stablehlo.compare GT, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %eq = stablehlo.compare EQ, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %lt = stablehlo.compare LT, %i, %j : (tensor<i64>, tensor<i64>) -> tensor<i1>
      %tie = stablehlo.and %eq, %lt : tensor<i1>
      %p0 = stablehlo.or %gt, %a_nan : tensor<i1>
      %pick = stablehlo.or %p0, %tie : tensor<i1>
      %v = stablehlo.select %pick, %a, %b : tensor<i1>, tensor<f32>
      %k = stablehlo.select %pick, %i, %j : tensor<i1>, tensor<i64>
      stablehlo.return %v, %k : tensor<f32>, tensor<i64>
  }) {window_dimensions = array<i64: 1, 1, 3, 3>, window_strides = array<i64: 1, 1, 2, 2>,
      padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1]]> : tensor<4x2xi64>}
    : (tensor<2x3x8x8xf32>, tensor<2x3x8x8xi64>, tensor<f32>, tensor<i64>)
    -> (tensor<2x3x4x4xf32>, tensor<2x3x4x4xi64>)
  return %r#1, %p#0, %p#1 : tensor<4xi32>, tensor<2x3x4x4xf32>, tensor<2x3x4x4xi64>
}
"""


def test_argmax_and_max_pool_with_indices_do_not_fall_back():
    exe = pjrt.make_client("cpu").compile(_JAX_ARGMAX_PROGRAM)
    assert exe.fallbacks == []
    x = values((4, 300), "f32")
    got = exe(x)
    want = evaluate(stablehlo.parse(_JAX_ARGMAX_PROGRAM), [x])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g).view(f"u{w.dtype.itemsize}"),
                                      w.view(f"u{w.dtype.itemsize}"))


# Poolings as PyTorch writes them (NCHW; kernel, stride, padding, ceil_mode), with rows long
# and odd enough that the kernels' vectorized runs have remainders, and windows that reach
# into the padding on either side.
POOLS = [((2, 3, 10, 12), 2, 2, 0, False), ((2, 4, 17, 19), 3, 2, 1, False),
         ((1, 3, 20, 33), 3, 1, 1, False), ((1, 2, 16, 15), 3, 2, 0, True),
         ((1, 2, 9, 70), 3, 2, 1, True)]


def _pool_out(size: int, k: int, s: int, p: int, ceil: bool) -> int:
    # torch's pooling_output_shape: the last window must start inside the input or padding
    span = size + 2 * p - k
    out = (span + (s - 1 if ceil else 0)) // s + 1
    return out - 1 if ceil and (out - 1) * s >= size + p else out


def pool_program(shape, k, s, p, ceil, with_indices: bool) -> tuple[str, tuple]:
    """max_pool2d_with_indices as frameworks/torch/lowering/pooling.py writes it (the
    plane's flat position as the index, the init pair's index above them all) returning the
    values, and the indices `with_indices`."""
    n, c, h, w = shape
    out = (n, c, _pool_out(h, k, s, p, ceil), _pool_out(w, k, s, p, ceil))
    high = [max((o - 1) * s + k - size - p, 0) for o, size in zip(out[2:], (h, w))]
    attrs = _window_attrs([1, 1, k, k], [1, 1, s, s], [(0, 0), (0, 0), (p, high[0]),
                                                       (p, high[1])])
    vt, it = ttype(shape, "f32"), ttype(shape, "i64")
    ot, oi = ttype(out, "f32"), ttype(out, "i64")
    results = f"{ot}, {oi}" if with_indices else ot
    returned = f"%p#0, %p#1 : {ot}, {oi}" if with_indices else f"%p#0 : {ot}"
    text = f"""func.func @main(%x: {vt}) -> ({results}) {{
  %flat = stablehlo.iota dim = 0 : tensor<{h * w}xi64>
  %plane = stablehlo.reshape %flat : (tensor<{h * w}xi64>) -> tensor<{h}x{w}xi64>
  %idx = stablehlo.broadcast_in_dim %plane, dims = [2, 3] : (tensor<{h}x{w}xi64>) -> {it}
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %last = stablehlo.constant dense<9223372036854775807> : tensor<i64>
  %p:2 = "stablehlo.reduce_window"(%x, %idx, %ninf, %last) {region(BODIES["torch_pool"], "f32",
                                                                 "i64")}
    {{{attrs}}} : ({vt}, {it}, tensor<f32>, tensor<i64>) -> ({ot}, {oi})
  return {returned}
}}
"""
    return text, out


def pool_inputs(shape) -> list:
    """Random values; few distinct ones (ties, both zeros, -inf); NaNs."""
    x = RNG.standard_normal(shape).astype(np.float32)
    ties = RNG.choice(np.array([0.0, -0.0, 1.0, 2.0, -np.inf], np.float32), size=shape)
    nans = np.where(RNG.random(shape) < 0.2, np.float32(np.nan), x)
    return [x, ties, nans, values(shape, "f32")]


@pytest.mark.parametrize("shape,k,s,p,ceil", POOLS)
def test_max_pool_with_and_without_indices_matches_interpreter_bits(shape, k, s, p, ceil):
    # With the indices used, the pair kernel; with only the values used, the compiler drops
    # the indices (prune-argreduce-index) and the value-only kernel runs.
    client = pjrt.make_client("cpu")
    for with_indices in (True, False):
        text, _ = pool_program(shape, k, s, p, ceil, with_indices)
        exe = client.compile(text)
        assert exe.fallbacks == []
        pools = [op for f in exe.optimized_module.functions() for op in f.op.walk()
                 if op.name == "stablehlo.reduce_window"]
        assert [len(op.operands) for op in pools] == [4 if with_indices else 2]
        for x in pool_inputs(shape):
            want = evaluate(stablehlo.parse(text), [x])
            for g, w in zip(exe(x), want):
                g = np.asarray(g)
                assert g.dtype == w.dtype and g.shape == w.shape
                np.testing.assert_array_equal(g.view(f"u{g.dtype.itemsize}"),
                                              w.view(f"u{w.dtype.itemsize}"))
