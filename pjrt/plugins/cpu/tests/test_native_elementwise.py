"""Native elementwise kernels of the cpu backend against the reference interpreter.

Every op runs over every element type it supports on small random inputs salted with the
edge values the spec (or XLA) gives special results for: NaN, infinities, signed zeros,
INT_MIN, zero divisors, out-of-range shift amounts, rounding ties. Large arrays exercise the
thread pool, rank-0 operands the scalar paths; unsupported types must raise Unsupported
(the op then falls back to the interpreter).
"""
from __future__ import annotations

import zlib

import ml_dtypes
import numpy as np
import pytest

import stablehlo
from pjrt.plugins.cpu.native_module import native
from pjrt.plugins.cpu.tests.kernel_check import check_op, run_native, single_op
from stablehlo.errors import VerificationError
from stablehlo.interpreter import evaluate

BOOL = ["i1"]
SINTS = ["i8", "i16", "i32", "i64"]
UINTS = ["ui8", "ui16", "ui32", "ui64"]
INTS = SINTS + UINTS
FLOATS = ["f16", "bf16", "f32", "f64"]
REALS = BOOL + INTS + FLOATS

NUMPY = {
    "i1": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
    "ui8": np.uint8, "ui16": np.uint16, "ui32": np.uint32, "ui64": np.uint64,
    "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
    "complex<f32>": np.complex64,
}

# Kinds each op accepts (b: i1, i: integers, s: signed integers, f: floats), as the verifier
# and interpreter do.
BINARY = {
    "add": "bif", "subtract": "if", "multiply": "bif", "divide": "if", "remainder": "if",
    "power": "if", "maximum": "bif", "minimum": "bif", "atan2": "f", "and": "bi", "or": "bi",
    "xor": "bi", "shift_left": "i", "shift_right_arithmetic": "i", "shift_right_logical": "i",
}
UNARY = {
    "negate": "if", "abs": "sf", "sign": "sf", "not": "bi", "popcnt": "i",
    "count_leading_zeros": "i", "exponential": "f", "exponential_minus_one": "f", "log": "f",
    "log_plus_one": "f", "logistic": "f", "sqrt": "f", "rsqrt": "f", "cbrt": "f", "sine": "f",
    "cosine": "f", "tan": "f", "tanh": "f", "floor": "f", "ceil": "f", "round_nearest_afz": "f",
    "round_nearest_even": "f", "is_finite": "f",
}
KIND_TYPES = {"b": BOOL, "i": INTS, "s": SINTS, "f": FLOATS}


def supported(kinds: str) -> list[str]:
    return [t for k in kinds for t in KIND_TYPES[k]]


def unsupported(kinds: str) -> list[str]:
    return [t for t in REALS if t not in supported(kinds)]


def tensor(dtype: str, shape) -> str:
    dims = "".join(f"{d}x" for d in shape)
    return f"tensor<{dims}{dtype}>"


def module(op: str, operand_types, result_type, attrs: str = "") -> str:
    """A module whose @main applies one op (generic form) to its arguments."""
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(operand_types))
    names = ", ".join(f"%a{i}" for i in range(len(operand_types)))
    attrs = f" {{{attrs}}}" if attrs else ""
    return (f"func.func @main({args}) -> {result_type} {{\n"
            f"  %0 = \"stablehlo.{op}\"({names}){attrs} : ({', '.join(operand_types)}) -> "
            f"{result_type}\n"
            f"  return %0 : {result_type}\n}}\n")


def edge_values(dtype: str) -> np.ndarray:
    np_type = np.dtype(NUMPY[dtype])
    if dtype == "i1":
        return np.array([False, True])
    if dtype in INTS:
        info = np.iinfo(np_type)
        small = [0, 1, 2, 3, 7, info.max, info.max - 1, info.min, info.min + 1]
        if dtype in SINTS:
            small += [-1, -2, -3, -7]
        return np.array(small, dtype=np_type)
    values = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5,
              -2.5, 3.0, 1e-3, 1e30, -1e30, 1e-30, 1e-42, 300.0, -300.0, 65504.0, 70000.0]
    with np.errstate(over="ignore"):  # 1e30 and 70000 become inf in the 16-bit floats
        return np.array(values, dtype=np.float64).astype(np_type)


def random_values(dtype: str, n: int, rng) -> np.ndarray:
    """``n`` values: every edge value, then random ones (small and full-range mixed)."""
    np_type = np.dtype(NUMPY[dtype])
    edges = edge_values(dtype)
    count = max(n - len(edges), 0)
    if dtype == "i1":
        rand = rng.integers(0, 2, count).astype(bool)
    elif dtype in INTS:
        info = np.iinfo(np_type)
        wide = rng.integers(info.min, info.max, count, dtype=np_type, endpoint=True)
        small = rng.integers(-8 if dtype in SINTS else 0, 9, count).astype(np_type)
        rand = np.where(rng.random(count) < 0.5, wide, small)
    else:
        scale = np.exp(rng.uniform(-8, 8, count))
        rand = (rng.standard_normal(count) * scale).astype(np_type)
    values = np.concatenate([edges, rand])[:n] if n >= len(edges) else edges[:n]
    return rng.permutation(values)


def check(text: str, inputs):
    """check_op; a bf16 result is compared here, exactly, as f32 and sign bits (numpy's
    NaN-aware comparisons do not recognise bf16 NaNs)."""
    parsed = stablehlo.parse(text)
    op = single_op(parsed)
    if str(op.results[0].type.element_type) != "bf16":
        return check_op(text, inputs)
    inputs = [np.asarray(x) for x in inputs]
    (got,), (want,) = run_native(op, inputs), evaluate(parsed, inputs)
    assert got.dtype == want.dtype and got.shape == want.shape
    got, want = got.astype(np.float32), want.astype(np.float32)
    np.testing.assert_array_equal(got, want, err_msg=f"{op.name} bf16")
    numbers = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))


def check_binary(op: str, dtype: str, lhs, rhs):
    t = tensor(dtype, np.shape(lhs))
    check(module(op, [t, t], t), [lhs, rhs])


@pytest.mark.parametrize("op,dtype", [(op, t) for op, kinds in BINARY.items()
                                      for t in supported(kinds)])
def test_binary(op, dtype):
    rng = np.random.default_rng(zlib.crc32(f"{op} {dtype}".encode()))
    edges = edge_values(dtype)
    # Every pair of edge values, then random pairs.
    lhs = np.concatenate([np.repeat(edges, len(edges)), random_values(dtype, 200, rng)])
    rhs = np.concatenate([np.tile(edges, len(edges)), random_values(dtype, 200, rng)])
    if op.startswith("shift") or (op == "power" and dtype in INTS):
        # Amounts/exponents around the bit width, negative ones included.
        width = np.dtype(NUMPY[dtype]).itemsize * 8
        low = -3 if dtype in SINTS else 0
        rhs[-200:] = rng.integers(low, width + 4, 200).astype(NUMPY[dtype])
    check_binary(op, dtype, lhs, rhs)


@pytest.mark.parametrize("op,dtype", [(op, t) for op, kinds in UNARY.items()
                                      for t in supported(kinds)])
def test_unary(op, dtype):
    rng = np.random.default_rng(zlib.crc32(f"{op} {dtype}".encode()))
    x = random_values(dtype, 300, rng)
    result = "i1" if op == "is_finite" else dtype
    check(module(op, [tensor(dtype, [300])], tensor(result, [300])), [x])


def test_rounding_ties():
    # Halves, and the float64 just below 0.5 (whose naive floor(x + 0.5) rounds up).
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999999999999994, -0.49999999999999994,
                  2.0**52 + 1, 1e300, -0.0, 0.0])
    for op in ("round_nearest_afz", "round_nearest_even", "floor", "ceil"):
        for dtype in FLOATS:
            with np.errstate(over="ignore"):
                values = x.astype(NUMPY[dtype])
            t = tensor(dtype, [len(values)])
            check(module(op, [t], t), [values])


@pytest.mark.parametrize("dtype", REALS)
@pytest.mark.parametrize("direction", ["EQ", "NE", "LT", "LE", "GT", "GE"])
def test_compare(dtype, direction):
    rng = np.random.default_rng(7)
    edges = edge_values(dtype)
    lhs = np.concatenate([np.repeat(edges, len(edges)), random_values(dtype, 100, rng)])
    rhs = np.concatenate([np.tile(edges, len(edges)), random_values(dtype, 100, rng)])
    types = [None, "SIGNED"] if dtype in SINTS else [None, "UNSIGNED"]
    if dtype in FLOATS:
        types = [None, "FLOAT", "TOTALORDER"]
    t = tensor(dtype, lhs.shape)
    for compare_type in types:
        attrs = f"comparison_direction = #stablehlo<comparison_direction {direction}>"
        if compare_type:
            attrs += f", compare_type = #stablehlo<comparison_type {compare_type}>"
        check(module("compare", [t, t], tensor("i1", lhs.shape), attrs), [lhs, rhs])


@pytest.mark.parametrize("source", REALS)
def test_convert(source):
    rng = np.random.default_rng(11)
    x = random_values(source, 400, rng)
    if source in ("i64", "ui64"):
        # Wide integers whose rounding to f16/bf16 needs the sticky low bits (one rounding).
        tricky = [(1 << 62) + (1 << 54) + 1, (1 << 62) + (1 << 54), (1 << 53) + 1, 2049, 2051,
                  257, 259, 65519, 65520, (1 << 63) - 1]
        x[:len(tricky)] = np.array(tricky, dtype=np.uint64).astype(NUMPY[source])
    if source in ("f32", "f64"):
        # Just above, at and below f16/bf16 rounding ties, and the f16 subnormal range.
        ties = [1 + 2.0**-11, 1 + 2.0**-8, 1 + 3 * 2.0**-11, 65520.0, 2.0**-25, 3 * 2.0**-26]
        ties = np.array(ties, dtype=np.float64)
        around = np.concatenate([ties, np.nextafter(ties, np.inf), np.nextafter(ties, -np.inf)])
        # Truncation and saturation at the integer ranges' ends.
        bounds = np.array([2.0**7, 2.0**8, 2.0**15, 2.0**16, 2.0**31, 2.0**32, 2.0**63, 2.0**64])
        ends = np.concatenate([bounds, bounds - 0.5, bounds - 1, -bounds, -bounds - 0.5,
                               -bounds - 1, [-0.9, 0.9]])
        special = np.concatenate([around, ends]).astype(NUMPY[source])
        x[:len(special)] = special
    t = tensor(source, x.shape)
    for target in REALS:
        check(module("convert", [t], tensor(target, x.shape)), [x])


@pytest.mark.parametrize("source,target", [
    ("f32", "i32"), ("i32", "ui32"), ("f16", "bf16"), ("bf16", "i16"), ("f64", "i64"),
    ("ui8", "i8"), ("i1", "i1"),
])
def test_bitcast_convert(source, target):
    raw = np.random.default_rng(3).integers(0, 256, 8 * 16, dtype=np.uint8)
    if source == "i1":
        x = (raw[:16] & 1).astype(bool)
    else:
        x = raw[:16 * np.dtype(NUMPY[source]).itemsize].view(NUMPY[source])
    check(module("bitcast_convert", [tensor(source, [16])], tensor(target, [16])), [x])


@pytest.mark.parametrize("dtype", REALS + ["complex<f32>"])
@pytest.mark.parametrize("scalar_pred", [False, True])
def test_select(dtype, scalar_pred):
    rng = np.random.default_rng(5)
    on_true = np.arange(16).astype(NUMPY[dtype])
    on_false = (np.arange(16) * 3 + 1).astype(NUMPY[dtype])
    preds = [np.array(True), np.array(False)] if scalar_pred else [rng.integers(0, 2, 16) == 1]
    for pred in preds:
        t = tensor(dtype, [16])
        text = module("select", [tensor("i1", pred.shape), t, t], t)
        check(text, [pred, on_true, on_false])


@pytest.mark.parametrize("dtype", REALS)
@pytest.mark.parametrize("scalar_low,scalar_high", [(False, False), (True, False),
                                                    (False, True), (True, True)])
def test_clamp(dtype, scalar_low, scalar_high):
    rng = np.random.default_rng(9)
    x = random_values(dtype, 64, rng)
    low = random_values(dtype, 1 if scalar_low else 64, rng)
    high = random_values(dtype, 1 if scalar_high else 64, rng)
    low = low.reshape(()) if scalar_low else low
    high = high.reshape(()) if scalar_high else high
    t = tensor(dtype, [64])
    text = module("clamp", [tensor(dtype, low.shape), t, tensor(dtype, high.shape)], t)
    check(text, [low, x, high])


# Large enough for several thread-pool chunks of cheap and of libm-bound ops.
@pytest.mark.parametrize("op,dtype", [("add", "f32"), ("multiply", "i32"), ("maximum", "f64"),
                                      ("divide", "i64"), ("atan2", "f32")])
def test_large_binary(op, dtype):
    rng = np.random.default_rng(13)
    n = 300_001
    check_binary(op, dtype, random_values(dtype, n, rng), random_values(dtype, n, rng))


@pytest.mark.parametrize("op,dtype", [("exponential", "f32"), ("negate", "bf16"),
                                      ("tanh", "f64"), ("not", "i1")])
def test_large_unary(op, dtype):
    x = random_values(dtype, 401 * 499, np.random.default_rng(17)).reshape(401, 499, 1)
    t = tensor(dtype, x.shape)
    if op == "exponential" and dtype == "f32":
        # f32 exp is codegen/mathlib.py's (the generated kernels' own, so both tiers agree):
        # a few ULP from the interpreter's double exp, also on the subnormal grid.
        check_op(module(op, [t], t), [x], rtol=4e-6, atol=4e-45)
    else:
        check(module(op, [t], t), [x])


def test_large_other_ops():
    rng = np.random.default_rng(19)
    n = 150_000
    x = random_values("f32", n, rng)
    check(module("convert", [tensor("f32", [n])], tensor("bf16", [n])), [x])
    t = tensor("f32", [n])
    attrs = "comparison_direction = #stablehlo<comparison_direction LT>"
    check(module("compare", [t, t], tensor("i1", [n]), attrs), [x, x[::-1].copy()])
    pred = rng.integers(0, 2, n) == 1
    check(module("select", [tensor("i1", [n]), t, t], t), [pred, x, -x])
    scalar = tensor("f32", [])
    check(module("clamp", [scalar, t, scalar], t), [np.float32(-1), x, np.float32(1)])


def test_scalars():
    for op in ("add", "divide", "maximum", "power"):
        for dtype in ("i32", "f32", "bf16"):
            lhs = np.array(7).astype(NUMPY[dtype])
            rhs = np.array(0 if op == "divide" else 2).astype(NUMPY[dtype])
            check_binary(op, dtype, lhs, rhs)
    for op, dtype in (("exponential", "f32"), ("popcnt", "i16"), ("sign", "f64")):
        t = tensor(dtype, [])
        check(module(op, [t], t), [np.array(-3).astype(NUMPY[dtype])])
    check(module("convert", [tensor("f64", [])], tensor("ui8", [])), [np.array(300.7)])
    check(module("select", [tensor("i1", [])] + [tensor("i8", [])] * 2, tensor("i8", [])),
          [np.array(False), np.array(1, np.int8), np.array(2, np.int8)])


def test_empty_arrays():
    t = tensor("f32", [0, 3])
    check(module("add", [t, t], t), [np.zeros((0, 3), np.float32)] * 2)
    check(module("exponential", [t], t), [np.zeros((0, 3), np.float32)])


# ---------------------------------------------------------------------------
# Refusals: the op falls back to the interpreter


def assert_refused(text: str):
    op = single_op(stablehlo.parse(text))
    inputs = [np.zeros(v.type.shape, NUMPY[str(v.type.element_type)]) for v in op.operands]
    with pytest.raises(native().Unsupported):
        run_native(op, inputs)


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_refuses(op):
    for dtype in unsupported(BINARY[op]) + ["complex<f32>"]:
        t = tensor(dtype, [4])
        text = module(op, [t, t], t)
        try:
            stablehlo.parse(text)
        except VerificationError:
            continue  # not valid IR for this element type: never reaches a kernel
        assert_refused(text)


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_refuses(op):
    for dtype in unsupported(UNARY[op]) + ["complex<f32>"]:
        t = tensor(dtype, [4])
        result = tensor("i1", [4]) if op == "is_finite" else t
        if op == "abs" and dtype.startswith("complex"):
            result = tensor("f32", [4])
        text = module(op, [t], result)
        try:
            stablehlo.parse(text)
        except VerificationError:
            continue  # not valid IR for this element type: never reaches a kernel
        assert_refused(text)


def test_other_refusals():
    c = tensor("complex<f32>", [4])
    attrs = "comparison_direction = #stablehlo<comparison_direction EQ>"
    assert_refused(module("compare", [c, c], tensor("i1", [4]), attrs))
    assert_refused(module("convert", [tensor("f32", [4])], c))
    assert_refused(module("convert", [c], tensor("f32", [4])))
    assert_refused(module("clamp", [c, c, c], c))
    # bitcast_convert between widths adds or drops a dimension: not native.
    assert_refused(module("bitcast_convert", [tensor("f32", [4])], tensor("i16", [4, 2])))
    assert_refused(module("bitcast_convert", [tensor("i16", [4, 2])], tensor("f32", [4])))


def test_16bit_conversions_exhaustive():
    # Every f16 and bf16 bit pattern, and random f32/f64 patterns, through the bit-level
    # conversions (subnormals, NaNs, overflow, rounding carries).
    every = np.arange(1 << 16, dtype=np.uint16)
    rng = np.random.default_rng(23)
    f32 = rng.integers(0, 1 << 32, 200_000, dtype=np.uint32).view(np.float32)
    # f64 values around the 16-bit ranges, with random low bits (near ties and not).
    f64 = np.ldexp(rng.uniform(-2, 2, 200_000), rng.integers(-30, 20, 200_000))
    cases = [(every.view(np.float16), "f16", ["f32", "f64", "bf16"]),
             (every.view(ml_dtypes.bfloat16), "bf16", ["f32", "f16"]),
             (f32, "f32", ["f16", "bf16"]), (f64, "f64", ["f16", "bf16"])]
    for values, source, targets in cases:
        for target in targets:
            shape = values.shape
            with np.errstate(over="ignore", invalid="ignore"):
                check(module("convert", [tensor(source, shape)], tensor(target, shape)),
                      [values])
