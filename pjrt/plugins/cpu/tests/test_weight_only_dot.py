"""The cpu backend's weight-only path: ``openhlo.weight_only_dot`` composites (formed by the
cpu pipeline's ``weight-only-dot`` pass) run on the native weight-only kernels, with no
interpreter fallback, and agree with the interpreter's run of the original program within
the f32 rounding of the sums (the kernel sums in another order); i4/ui4 converts and the
4-bit bitcasts run natively with the interpreter's bits; an int8 product against a weight
stored as rows is exact."""
from __future__ import annotations

import numpy as np
import pytest

import pjrt
from pjrt.plugins.cpu.native_module import native
from stablehlo.builder import Builder
from stablehlo.interpreter import evaluate
from stablehlo.ir.types import F32, I8, I32, UI8, IntegerType, TensorType, tensor
from xla_core.quantization.weight_only_dot import WEIGHT_ONLY_DOT
from xla_core.quantization.tests.programs import torch_int4_program

RNG = np.random.default_rng(5)


@pytest.fixture(params=[False, True], ids=["fast", "portable"])
def lowp_path(request):
    native().lowp.limit_isa("portable" if request.param else "detected")
    yield request.param
    native().lowp.limit_isa("detected")


def _compiled(module):
    exe = pjrt.make_client("cpu").compile(module)
    assert exe.fallbacks == []
    return exe


def _reference(module, *args) -> np.ndarray:
    return np.asarray(evaluate(module, list(args))[0])


def _assert_within_rounding(got, x, dequantized, want):
    """|got - want| <= 2 K eps sum_k |x_k w_kn| (two f32 sums of K terms, any order)."""
    depth = x.shape[-1]
    bound = 2 * depth * np.finfo(np.float32).eps * (np.abs(x.astype(np.float64))
                                                    @ np.abs(dequantized.astype(np.float64)))
    assert np.all(np.abs(got.astype(np.float64) - want) <= bound + 1e-30)


def _int8_program(weight: np.ndarray, scales: np.ndarray, batch: int, rows_layout: bool):
    """``x @ dequantize(weight)`` with the int8 weight an argument, [N, K] or [K, N]."""
    b = Builder()
    depth = weight.shape[1] if rows_layout else weight.shape[0]
    axis = 0 if rows_layout else 1
    with b.function("main", [tensor((batch, depth), F32), TensorType(weight.shape, I8),
                             tensor(scales.shape, F32)]) as (_, (x, w, s)):
        deq = b.multiply(b.convert(w, F32), b.broadcast_in_dim(s, weight.shape, [axis]))
        b.return_(b.dot_general(x, deq, contracting=((1,), (1 if rows_layout else 0,))))
    return b.module


@pytest.mark.parametrize("batch", [1, 5, 20])
@pytest.mark.parametrize("rows_layout", [True, False], ids=["nk", "kn"])
def test_int8_weight_only_dot(batch, rows_layout, lowp_path):
    n, k = 40, 96
    weight = RNG.integers(-127, 128, (n, k) if rows_layout else (k, n), dtype=np.int8)
    scales = RNG.uniform(0.001, 0.02, n).astype(np.float32)
    program = _int8_program(weight, scales, batch, rows_layout)
    exe = _compiled(program)
    assert f'"{WEIGHT_ONLY_DOT}"' in str(exe.optimized_module)
    x = RNG.standard_normal((batch, k)).astype(np.float32)
    dequantized = (weight.T if rows_layout else weight).astype(np.float32) * scales
    got = np.asarray(exe(x, weight, scales)[0])
    _assert_within_rounding(got, x, dequantized, _reference(program, x, weight, scales))
    # an argument rewritten between calls is read again (nothing stale is cached)
    weight2 = (-weight.astype(np.int16)).clip(-127, 127).astype(np.int8)
    again = np.asarray(exe(x, weight2, scales)[0])
    _assert_within_rounding(again, x, -dequantized, _reference(program, x, weight2, scales))


@pytest.mark.parametrize("batch", [1, 3, 17])
def test_packed_int4_weight_only_dot(batch, lowp_path):
    n, k, group = 48, 128, 32
    program = torch_int4_program(n, k, group, batch)
    exe = _compiled(program)
    assert f'"{WEIGHT_ONLY_DOT}"' in str(exe.optimized_module)
    x = RNG.standard_normal((batch, k)).astype(np.float32)
    packed = RNG.integers(0, 256, (n, k // 2), dtype=np.uint8)
    scales = RNG.uniform(0.01, 0.1, (n, k // group)).astype(np.float32)
    values = np.stack([packed & 15, packed >> 4], -1).reshape(n, k).astype(np.int8)
    values = np.where(values > 7, values - 16, values)
    dequantized = (values * np.repeat(scales, group, axis=1)).T.astype(np.float32)
    got = np.asarray(exe(x, packed, scales)[0])
    _assert_within_rounding(got, x, dequantized, _reference(program, x, packed, scales))


def test_quantizer_int4_constants(lowp_path):
    from xla_core.quantization import quantize
    from xla_core.quantization.tests.helpers import lowered
    from xla_core.quantization.tests.programs import mlp
    weights = [(RNG.standard_normal((64, 32)).astype(np.float32), np.zeros(32, np.float32))]
    program = lowered(quantize(mlp(weights, 2), "weight-int4", group_size=16)[0])
    exe = _compiled(program)
    assert str(exe.optimized_module).count(f'"{WEIGHT_ONLY_DOT}"') == 1
    x = RNG.standard_normal((2, 64)).astype(np.float32)
    want = _reference(program, x)
    np.testing.assert_allclose(np.asarray(exe(x)[0]), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("element", ["i4", "ui4"])
def test_four_bit_converts_run_natively(element):
    four = IntegerType(4, element == "i4")
    b = Builder()
    with b.function("main", [tensor((37,), F32), TensorType((37,), I32),
                             TensorType((6, 2), UI8)]) as (_, (f, i, p)):
        from_float = b.convert(f, four)
        from_int = b.convert(i, four)
        nibbles = b.bitcast_convert(p, TensorType((6, 2, 2), four))
        b.return_(b.convert(from_float, F32), b.convert(from_int, I32),
                  b.convert(nibbles, F32), b.bitcast_convert(nibbles, TensorType((6, 2), UI8)))
    exe = _compiled(b.module)
    f = np.concatenate([RNG.uniform(-20, 20, 33), [np.nan, np.inf, -np.inf, -0.5]]
                       ).astype(np.float32)
    i = RNG.integers(-1000, 1000, 37, dtype=np.int32)
    p = RNG.integers(0, 256, (6, 2), dtype=np.uint8)
    got = exe(f, i, p)
    want = evaluate(b.module, [f, i, p])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@pytest.mark.parametrize("batch", [1, 7])
def test_int8_dot_on_rows_is_exact(batch, lowp_path):
    """i8 x i8 -> i32 against a weight stored as rows ([N, K], contracting dim 1), as the
    dynamic-int8 lowering emits: the numpy int64 product, wrapped to int32."""
    n, k = 33, 100
    b = Builder()
    with b.function("main", [TensorType((batch, k), I8), TensorType((n, k), I8)]) as (_, (a, w)):
        b.return_(b.dot_general(a, w, contracting=((1,), (1,)), result_element_type=I32))
    exe = _compiled(b.module)
    a = RNG.integers(-128, 128, (batch, k), dtype=np.int8)
    w = RNG.integers(-128, 128, (n, k), dtype=np.int8)
    want = (a.astype(np.int64) @ w.astype(np.int64).T).astype(np.int32)
    np.testing.assert_array_equal(np.asarray(exe(a, w)[0]), want)


def _assert_matches_float64(got, x, dequantized):
    """Within f32 rounding of the product in float64 (numpy: an independent reference)."""
    want = x.astype(np.float64) @ dequantized.astype(np.float64)
    _assert_within_rounding(got, x, dequantized, want)


# (n, k): n not a multiple of the 4 weight rows read side by side; k with a partial last 32
# (or under 32); the last two over the size the rows kernel splits across threads
INT8_ROW_SHAPES = [(37, 100), (5, 33), (4, 16), (130, 1030), (520, 2050)]


@pytest.mark.parametrize("batch", [1, 2, 5, 15])
@pytest.mark.parametrize("n,k", INT8_ROW_SHAPES, ids=[f"{n}x{k}" for n, k in INT8_ROW_SHAPES])
def test_int8_rows_kernel_against_float64(n, k, batch, lowp_path):
    weight = RNG.integers(-127, 128, (n, k), dtype=np.int8)
    scales = RNG.uniform(0.001, 0.02, n).astype(np.float32)
    exe = _compiled(_int8_program(weight, scales, batch, rows_layout=True))
    x = RNG.standard_normal((batch, k)).astype(np.float32)
    got = np.asarray(exe(x, weight, scales)[0])
    _assert_matches_float64(got, x, (weight.astype(np.float32) * scales[:, None]).T)


# (n, k, group): groups of 32 k and more, with a partial last 32 per group (50, 80), under 32
# (4), per channel; an odd group (3) runs the portable loop on every path
INT4_ROW_SHAPES = [(37, 100, 50), (9, 96, 96), (6, 12, 4), (130, 1040, 80), (516, 2080, 160),
                   (7, 30, 3)]


@pytest.mark.parametrize("batch", [1, 2, 5, 15])
@pytest.mark.parametrize("n,k,group", INT4_ROW_SHAPES,
                         ids=[f"{n}x{k}g{g}" for n, k, g in INT4_ROW_SHAPES])
def test_int4_rows_kernel_against_float64(n, k, group, batch, lowp_path):
    exe = _compiled(torch_int4_program(n, k, group, batch))
    packed = RNG.integers(0, 256, (n, k // 2), dtype=np.uint8)
    scales = RNG.uniform(0.01, 0.1, (n, k // group)).astype(np.float32)
    values = np.stack([packed & 15, packed >> 4], -1).reshape(n, k).astype(np.int8)
    values = np.where(values > 7, values - 16, values)
    x = RNG.standard_normal((batch, k)).astype(np.float32)
    got = np.asarray(exe(x, packed, scales)[0])
    _assert_matches_float64(got, x, (values * np.repeat(scales, group, axis=1)).T)
