"""The low-precision GEMMs (native/lowp_gemm.h) against independent references.

int8 products must equal numpy's int64 matmul exactly (wrapped to int32, which these
shapes never reach), and bf16 products agree with float64 within the error of f32
accumulation of exact bf16 products, on each path this CPU has: AMX tiles, AVX-512 (VNNI,
BF16) and the portable loops (`lowp.limit_isa`). Weight-only products are checked against the dequantized weight in
float64, and their fast and portable paths against each other bit for bit (both do the
same fused multiply-adds in the same order).
"""
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import pjrt
import stablehlo
from pjrt.plugins.cpu.native_module import native
from pjrt.plugins.cpu.tests.kernel_check import check_op
from stablehlo.interpreter import evaluate

RNG = np.random.default_rng(20)

# (m, k, n): edges of the 8 x 32 register tile and the 32 x 32 AMX block, k not a multiple
# of 4 (nor of 64, one AMX step), ones, tall and wide; narrow ones as a quantized
# convolution's per-tap dots give (n = 64, several pool tasks of 64 rows, the last partial),
# and several tasks both ways (A packed per task and reused across a row's tasks).
INT8_SHAPES = [(1, 1, 1), (1, 7, 3), (3, 5, 33), (8, 32, 32), (9, 63, 31), (17, 130, 65),
               (64, 64, 128), (65, 257, 97), (2, 1027, 5), (33, 64, 16), (300, 3, 2),
               (31, 129, 200), (200, 576, 64), (130, 64, 64), (97, 3, 64), (131, 100, 300)]


# Each path's kernels, the CPU features they need and the limit that picks them.
PATHS = {"amx": (("amx",), "detected"), "avx512": (("vnni", "bf16"), "avx512"),
         "portable": ((), "portable")}


@pytest.fixture(params=list(PATHS))
def path(request):
    lowp = native().lowp
    needs, limit = PATHS[request.param]
    missing = [f for f in needs if not lowp.detected_isa()[f]]
    if missing:
        pytest.skip(f"this CPU has no {', '.join(missing)}")
    lowp.limit_isa(limit)
    assert lowp.active_isa()["amx"] == (request.param == "amx")
    yield request.param
    lowp.limit_isa("detected")


def int8(shape, extremes=True):
    values = RNG.integers(-128, 128, size=shape, dtype=np.int64)
    if extremes and values.size >= 4:
        flat = values.reshape(-1)
        flat[RNG.integers(0, flat.size, size=flat.size // 4)] = -128
        flat[RNG.integers(0, flat.size, size=flat.size // 4)] = 127
    return values.astype(np.int8)


@pytest.mark.parametrize("m,k,n", INT8_SHAPES)
def test_int8_gemm_is_exact(path, m, k, n):
    a, b = int8((m, k)), int8((k, n))
    got = native().lowp.S8Weight(b).matmul(a)
    want = a.astype(np.int64) @ b.astype(np.int64)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)


def test_int8_gemm_of_all_extremes(path):
    # every product -128 * -128: the +128 offset and column-sum correction at their limits
    a = np.full((9, 515), -128, np.int8)
    b = np.full((515, 33), -128, np.int8)
    b[:, 1] = 127
    got = native().lowp.S8Weight(b).matmul(a)
    np.testing.assert_array_equal(got, a.astype(np.int64) @ b.astype(np.int64))


@pytest.mark.parametrize("m,k,n", [(10, 70, 40), (131, 100, 300)])
def test_int8_per_channel_scale_epilogue(path, m, k, n):
    a, b = int8((m, k)), int8((k, n))
    scale = RNG.uniform(1e-3, 1e-1, size=n).astype(np.float32)
    got = native().lowp.S8Weight(b).matmul(a, scale=scale)
    acc = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.float32)
    np.testing.assert_array_equal(got, acc * scale)


# edges of the register tile, the AMX block (32 x 32) and step (32 bf16 of k), tall, wide
BF16_SHAPES = [(1, 1, 1), (2, 1, 40), (7, 33, 31), (16, 32, 16), (33, 31, 17), (40, 257, 70),
               (128, 512, 96), (300, 5, 3), (3, 1000, 130), (65, 96, 33), (200, 64, 64),
               (131, 100, 300)]


@pytest.mark.parametrize("m,k,n", BF16_SHAPES)
def test_bf16_gemm_within_f32_accumulation_error(path, m, k, n):
    a = RNG.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = RNG.standard_normal((k, n)).astype(ml_dtypes.bfloat16)
    got = native().lowp.BF16Weight(b.view(np.uint16)).matmul(a.view(np.uint16))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = a64 @ b64
    # products of bf16 are exact in f32; k additions each round by at most 2^-24 relative
    bound = k * 2.0 ** -24 * (np.abs(a64) @ np.abs(b64)) + 1e-30
    assert np.all(np.abs(got - want) <= bound)


def test_bf16_paths_agree_within_f32_rounding():
    lowp = native().lowp
    a = RNG.standard_normal((40, 300)).astype(ml_dtypes.bfloat16).view(np.uint16)
    weight = lowp.BF16Weight(RNG.standard_normal((300, 50)).astype(ml_dtypes.bfloat16)
                             .view(np.uint16))
    got = {}
    try:
        for name, (needs, limit) in PATHS.items():
            if all(lowp.detected_isa()[f] for f in needs):
                lowp.limit_isa(limit)
                got[name] = weight.matmul(a)
    finally:
        lowp.limit_isa("detected")
    for name, value in got.items():
        np.testing.assert_allclose(value, got["portable"], rtol=1e-4, atol=1e-4, err_msg=name)


# ---------------------------------------------------------------------------------------
# weight-only

def quantized_weight(k, n, bits, group):
    limit = 127 if bits == 8 else 7
    low = -128 if bits == 8 else -8
    w = RNG.integers(low, limit + 1, size=(k, n)).astype(np.int8)
    scales = RNG.uniform(1e-3, 2e-2, size=(k // group, n)).astype(np.float32)
    return w, scales


def dequantized(w, scales, group):
    return w.astype(np.float64) * np.repeat(scales.astype(np.float64), group, axis=0)


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("m,k,n,group", [(1, 64, 64, 64), (1, 256, 100, 32), (3, 96, 130, 96),
                                         (2, 128, 1, 128), (16, 128, 70, 64), (33, 64, 65, 32)])
def test_weight_only_matches_dequantized_reference(bits, m, k, n, group):
    w, scales = quantized_weight(k, n, bits, group)
    x = RNG.standard_normal((m, k)).astype(np.float32)
    got = native().lowp.QuantizedWeight(w, scales, bits, group).matmul(x)
    want = x.astype(np.float64) @ dequantized(w, scales, group)
    bound = 2 * k * 2.0 ** -24 * (np.abs(x.astype(np.float64)) @ np.abs(dequantized(w, scales, group)))
    assert np.all(np.abs(got - want) <= bound + 1e-30)


@pytest.mark.parametrize("bits", [8, 4])
def test_weight_only_fast_and_portable_are_bitwise_equal(bits):
    lowp = native().lowp
    if not lowp.detected_isa()["avx512"]:
        pytest.skip("this CPU has no AVX-512")
    w, scales = quantized_weight(192, 150, bits, 64)
    x = RNG.standard_normal((5, 192)).astype(np.float32)
    weight = lowp.QuantizedWeight(w, scales, bits, 64)
    fast = weight.matmul(x)
    lowp.limit_isa("portable")
    try:
        portable = weight.matmul(x)
    finally:
        lowp.limit_isa("detected")
    np.testing.assert_array_equal(fast, portable)


def test_int4_unpacking_gives_every_value_back(path):
    # rows of the identity pick rows of the weight: every nibble, both halves of each byte
    k, n = 16, 130
    values = np.tile(np.arange(-8, 8, dtype=np.int8), 9)[:n]
    w = np.stack([np.roll(values, i) for i in range(k)])
    scales = np.ones((1, n), np.float32)
    got = native().lowp.QuantizedWeight(w, scales, 4, k).matmul(np.eye(k, dtype=np.float32))
    np.testing.assert_array_equal(got, w.astype(np.float32))
    assert native().lowp.QuantizedWeight(w, scales, 4, k).nbytes == k * 64 * 3 // 2


def test_weight_only_rejects_bad_inputs():
    lowp = native().lowp
    with pytest.raises(ValueError, match="out of range"):
        lowp.QuantizedWeight(np.full((4, 4), 8, np.int8), np.ones((1, 4), np.float32), 4, 4)
    with pytest.raises(ValueError, match="group"):
        lowp.QuantizedWeight(np.zeros((6, 4), np.int8), np.ones((1, 4), np.float32), 8, 4)


def test_portable_path_forced_by_the_environment():
    code = ("from pjrt.plugins.cpu.native_module import native; "
            "print(native().lowp.active_isa())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**__import__("os").environ,
                                          "OPENHLO_CPU_PORTABLE_LOWP": "1"}).stdout
    assert "'vnni': False" in out and "'bf16': False" in out and "'amx': False" in out


def test_limit_isa_rejects_unknown_levels():
    with pytest.raises(ValueError, match="'detected', 'avx512' or 'portable'"):
        native().lowp.limit_isa("fast")


# ---------------------------------------------------------------------------------------
# dot_general on the cpu backend

def dot_text(lhs_shape, rhs_shape, lb, rb, lc, rc, in_type, out_type):
    def t(shape, name):
        return f"tensor<{'x'.join(map(str, shape))}x{name}>"
    lf = [d for d in range(len(lhs_shape)) if d not in lb + lc]
    rf = [d for d in range(len(rhs_shape)) if d not in rb + rc]
    out = [lhs_shape[d] for d in lb] + [lhs_shape[d] for d in lf] + [rhs_shape[d] for d in rf]
    lt, rt, ot = t(lhs_shape, in_type), t(rhs_shape, in_type), t(out, out_type)
    return (f"func.func @main(%a0: {lt}, %a1: {rt}) -> {ot} {{\n"
            f"  %0 = stablehlo.dot_general %a0, %a1, batching_dims = {lb} x {rb}, "
            f"contracting_dims = {lc} x {rc} : ({lt}, {rt}) -> {ot}\n"
            f"  return %0 : {ot}\n}}\n")


INT8_DOTS = [
    ((4, 5), (5, 6), [], [], [1], [0]),
    ((5, 4), (5, 6), [], [], [0], [0]),            # lhs transposed in place
    ((70, 130), (70, 300), [], [], [0], [0]),      # ... over several tasks both ways
    ((200, 64), (64, 64), [], [], [1], [0]),       # narrow: a convolution tap's
    ((4, 5), (6, 5), [], [], [1], [1]),            # rhs transposed in place
    ((3, 4, 5), (3, 5, 6), [0], [0], [2], [1]),    # batched
    ((5, 3, 4), (6, 3, 5), [1], [1], [0], [2]),    # batch in the middle: packed
    ((4, 2, 5, 3), (3, 5, 2, 7), [1], [2], [2, 3], [1, 0]),
    ((3, 0, 4), (3, 4, 2), [0], [0], [2], [1]),    # empty
    ((3, 4, 0), (3, 0, 2), [0], [0], [2], [1]),    # empty contraction: zeros
]


@pytest.mark.parametrize("case", INT8_DOTS)
def test_int8_dot_general_kernel_equals_interpreter(path, case):
    lhs_shape, rhs_shape = case[0], case[1]
    check_op(dot_text(*case, "i8", "i32"), [int8(lhs_shape), int8(rhs_shape)])


def dense_text(array, fmt):
    return "[" + ",".join("[" + ",".join(fmt.format(x) for x in row) + "]"
                          for row in array.tolist()) + "]"


def test_program_with_low_precision_dots_equals_interpreter():
    text = """
    func.func @main(%x: tensor<6x70xi8>, %y: tensor<5x40xbf16>) -> (tensor<6x33xi32>, tensor<5x9xf32>, tensor<5x9xbf16>) {
      %w = stablehlo.constant dense<%W> : tensor<70x33xi8>
      %v = stablehlo.constant dense<%V> : tensor<9x40xbf16>
      %a = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<6x70xi8>, tensor<70x33xi8>) -> tensor<6x33xi32>
      %b = stablehlo.dot_general %y, %v, contracting_dims = [1] x [1] : (tensor<5x40xbf16>, tensor<9x40xbf16>) -> tensor<5x9xf32>
      %c = stablehlo.dot_general %y, %v, contracting_dims = [1] x [1] : (tensor<5x40xbf16>, tensor<9x40xbf16>) -> tensor<5x9xbf16>
      return %a, %b, %c : tensor<6x33xi32>, tensor<5x9xf32>, tensor<5x9xbf16>
    }"""
    w = int8((70, 33))
    v = RNG.integers(-4, 5, size=(9, 40)).astype(np.float32)  # exact in bf16 and in sums
    text = text.replace("%W", dense_text(w, "{:d}")).replace("%V", dense_text(v, "{:.1f}"))
    args = [int8((6, 70)), RNG.integers(-4, 5, size=(5, 40)).astype(ml_dtypes.bfloat16)]
    want = evaluate(stablehlo.parse(text), args)
    exe = pjrt.make_client("cpu").compile(text)
    assert exe.fallbacks == []
    for _ in range(2):  # the second run reuses the packed constants
        got = exe(*args)
        for g, e in zip(got, want):
            assert g.dtype == e.dtype
            np.testing.assert_array_equal(np.asarray(g, np.float64), np.asarray(e, np.float64))


BF16_DOTS = [
    ((33, 70), (70, 45), [], [], [1], [0]),
    ((5, 40), (9, 40), [], [], [1], [1]),             # rhs transposed in place
    ((3, 17, 65), (3, 65, 31), [0], [0], [2], [1]),   # batched
    ((70, 2, 1), (2, 1, 40), [1], [0], [2], [1]),     # k = 1
]


@pytest.mark.parametrize("out_type", ["f32", "bf16"])
@pytest.mark.parametrize("case", BF16_DOTS)
def test_bf16_dot_program_within_bounds_of_interpreter(path, case, out_type):
    lhs_shape, rhs_shape = case[0], case[1]
    text = dot_text(*case, "bf16", out_type)
    args = [RNG.standard_normal(s).astype(ml_dtypes.bfloat16) for s in (lhs_shape, rhs_shape)]
    want = np.asarray(evaluate(stablehlo.parse(text), args)[0], np.float64)
    magnitude = np.asarray(evaluate(stablehlo.parse(text), [np.abs(x) for x in args])[0],
                           np.float64)
    exe = pjrt.make_client("cpu").compile(text)
    assert exe.fallbacks == []
    got = np.asarray(exe(*args)[0], np.float64)
    k = int(np.prod([lhs_shape[d] for d in case[4]]))
    # both accumulate exact bf16 products in f32 (k roundings of 2^-24 each, both sides); a
    # bf16 result rounds once more on each side (2^-8 relative)
    bound = 2 * k * 2.0 ** -24 * magnitude
    if out_type == "bf16":
        bound += 2 * 2.0 ** -8 * magnitude
    assert np.all(np.abs(got - want) <= bound + 1e-30)


def test_slow_precision_is_warned_once(monkeypatch, caplog):
    import logging

    from pjrt.plugins.cpu import precision
    monkeypatch.setattr(precision, "_warned", set())
    native().lowp.limit_isa("portable")
    try:
        with caplog.at_level(logging.WARNING, logger="openhlo.cpu"):
            for _ in range(2):
                pjrt.make_client("cpu").compile(dot_text((2, 3), (3, 4), [], [], [1], [0],
                                                         "i8", "i32"))
    finally:
        native().lowp.limit_isa("detected")
    warnings = [r for r in caplog.records if "cannot run fast" in r.getMessage()]
    assert len(warnings) == 1 and "AVX-512 VNNI" in warnings[0].getMessage()
