"""Tests for stablehlo.text.literals and its native twin stablehlo._C._native.

Three layers: the native and Python implementations agree bit for bit; hex blobs round-trip
and fail with the documented messages; and the float text matches upstream MLIR (jaxlib's
parser/printer, fed hex blobs so that MLIR chooses the text itself).
"""
from __future__ import annotations

import re
import time

import ml_dtypes
import numpy as np
import pytest

from stablehlo.ir.types import FloatType, numpy_dtype
from stablehlo.tests import mlir_oracle
from stablehlo.text import literals

try:
    from stablehlo._C import _native
except ImportError:
    _native = None

needs_native = pytest.mark.skipif(_native is None, reason="stablehlo._C._native is not built")

# Element types whose every bit pattern is compared with MLIR (cheap: at most 65536 values).
EXHAUSTIVE_TYPES = [
    "f16", "bf16", "f8E4M3FN", "f8E5M2", "f8E4M3", "f8E3M4", "f8E4M3FNUZ", "f8E5M2FNUZ",
    "f8E4M3B11FNUZ", "f8E8M0FNU", "f4E2M1FN", "f6E2M3FN", "f6E3M2FN",
]
BIT_WIDTH = {"f4E2M1FN": 4, "f6E2M3FN": 6, "f6E3M2FN": 6, "f16": 16, "bf16": 16}
DTYPE = {"f32": np.float32, "f64": np.float64}


def _special_values(dtype) -> np.ndarray:
    """Values that exercise every branch of the printer."""
    info = np.finfo(dtype)
    values = [
        0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0, 0.1, 0.3, 1e-5, 1e20, 1e-20,
        1.5e20, 16777216.0, 16777217.0, 123456789.0, 1234.5678, 12345.678, 0.001234,
        0.00123456789, 2.0**63, 2.0**-30, 1.0 / 3.0, 100000000.0, 765e3, 765e-5,
        float(info.max), -float(info.max), float(info.tiny), float(info.smallest_subnormal),
        3 * float(info.smallest_subnormal), float(info.eps),
    ]
    arr = np.array(values, dtype=dtype)
    # Powers of ten and their neighbours, where digit generation carries and truncates.
    tens = np.array([10.0**k for k in range(-40, 39)], dtype=dtype)
    tens = tens[np.isfinite(tens) & (tens != 0)]
    neighbours = [np.nextafter(tens, dtype(np.inf)), np.nextafter(tens, dtype(0))]
    integers = np.arange(16777200, 16777240, dtype=dtype)
    nan_bits = np.array([0xFFC00001, 0x7F800001], np.uint32) if dtype == np.float32 else (
        np.array([0x7FF0000000000001, 0xFFF8000000000000], np.uint64))
    return np.concatenate([arr, tens, *neighbours, integers, nan_bits.view(dtype)])


def _random_values(dtype, count: int, seed: int) -> np.ndarray:
    """Random bit patterns (every exponent) plus values of everyday magnitudes."""
    rng = np.random.default_rng(seed)
    bits_dtype = np.uint32 if dtype == np.float32 else np.uint64
    patterns = rng.integers(0, np.iinfo(bits_dtype).max, count, dtype=bits_dtype,
                            endpoint=True).view(dtype)
    normal = rng.standard_normal(count) * 10.0 ** rng.integers(-8, 9, count)
    scale = 10.0 ** rng.integers(0, 7, count)
    decimal = np.round(rng.uniform(-1000, 1000, count) * scale) / scale  # like 12.345
    return np.concatenate([patterns, normal.astype(dtype), decimal.astype(dtype)])


# ---------------------------------------------------------------------------------------------
# Native vs Python


@needs_native
@pytest.mark.parametrize("type_name", ["f32", "f64"])
def test_native_matches_python(type_name):
    dtype = DTYPE[type_name]
    values = np.concatenate([_special_values(dtype), _random_values(dtype, 3000, seed=1)])
    native = _native.format_floats(values)
    python = literals.format_floats(values)
    mismatches = [(v, n, p) for v, n, p in zip(values.tolist(), native, python) if n != p]
    assert not mismatches, mismatches[:10]


@needs_native
def test_native_accepts_strided_and_rejects_other_dtypes():
    values = np.arange(10, dtype=np.float32) / 7
    assert _native.format_floats(values[::3]) == literals.format_floats(values[::3])
    for bad in (np.zeros(3, np.float16), np.zeros((2, 2), np.float32)):
        with pytest.raises(TypeError, match="expected a 1-D float32 or float64 array"):
            _native.format_floats(bad)
        with pytest.raises(TypeError, match="expected a 1-D float32 or float64 array"):
            literals.format_floats(bad)


@pytest.mark.slow
@needs_native
@pytest.mark.parametrize("type_name", ["f32", "f64"])
def test_native_speedup(type_name):
    """Measures native vs Python on 1e5 everyday floats; reported, not asserted."""
    values = np.random.default_rng(2).standard_normal(100_000).astype(DTYPE[type_name])
    start = time.perf_counter()
    native = _native.format_floats(values)
    native_s = time.perf_counter() - start
    start = time.perf_counter()
    python = literals.format_floats(values)
    python_s = time.perf_counter() - start
    assert native == python
    print(f"\n{type_name}: native {native_s * 1e3:.1f} ms, python {python_s * 1e3:.0f} ms, "
          f"speedup {python_s / native_s:.0f}x")


# ---------------------------------------------------------------------------------------------
# Hex blobs

HEX_IMPLEMENTATIONS = [pytest.param((literals.decode_hex, literals.encode_hex), id="python")]
if _native is not None:
    HEX_IMPLEMENTATIONS.append(
        pytest.param((_native.decode_hex, _native.encode_hex), id="native"))


@pytest.mark.parametrize("impl", HEX_IMPLEMENTATIONS)
def test_hex_round_trip(impl):
    decode, encode = impl
    rng = np.random.default_rng(3)
    for size in (0, 1, 2, 7, 1000):
        data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        digits = encode(data)
        assert digits == data.hex().upper()
        assert decode(digits) == data
        assert decode(digits.lower()) == data
    assert encode(b"\x01\xab\xff") == "01ABFF"
    assert encode(bytearray(b"\x10")) == "10"
    assert encode(np.array([1.0], np.float32)) == "0000803F"
    assert decode("0aBc") == b"\x0a\xbc"


@pytest.mark.parametrize("impl", HEX_IMPLEMENTATIONS)
@pytest.mark.parametrize("digits, message", [
    ("0G", "invalid hex digit 'G' at offset 1"),
    ("00112x", "invalid hex digit 'x' at offset 5"),
    ("0x00", "invalid hex digit 'x' at offset 1"),
    ("00 11", "invalid hex digit ' ' at offset 2"),
    ("0\n", "invalid hex digit '\\n' at offset 1"),
    ("00é1", "invalid hex digit 'é' at offset 2"),
    ("123", "odd number of hex digits (3)"),
    ("12g", "invalid hex digit 'g' at offset 2"),
])
def test_hex_errors(impl, digits, message):
    decode, _ = impl
    with pytest.raises(ValueError) as info:
        decode(digits)
    assert str(info.value) == message


def test_dispatchers():
    assert literals.hex_to_bytes("00FF") == b"\x00\xff"
    assert literals.bytes_to_hex(b"\x00\xff") == "00FF"
    assert literals.NATIVE_AVAILABLE == (_native is not None)


def test_dispatchers_fall_back_to_python(monkeypatch):
    values = _special_values(np.float32)
    expected = literals.format_float_array(values, "f32")
    monkeypatch.setattr(literals, "_native", None)
    assert literals.format_float_array(values, "f32") == expected
    assert literals.hex_to_bytes("0aFF") == b"\x0a\xff"
    assert literals.bytes_to_hex(b"\x0a\xff") == "0AFF"


# ---------------------------------------------------------------------------------------------
# Known texts (from jaxlib 0.10.2's printer)


@pytest.mark.parametrize("value, type_name, text", [
    (1.0, "f32", "1.000000e+00"),
    (-0.0, "f32", "-0.000000e+00"),
    (1e-45, "f32", "1.401300e-45"),  # six significant digits plus a padding zero, not %.6e
    (5e-324, "f64", "4.940660e-324"),
    (1e-5, "f32", "9.99999974E-6"),  # truncated, not rounded: exact 9.999999747...E-6
    (1e-5, "f64", "1.000000e-05"),
    (1234.5678, "f32", "1234.56775"),
    (1.2345678912345678e17, "f64", "1.2345678912345678E+17"),
    (1e-20, "f64", "9.9999999999999995E-21"),
    (16777216.0, "f32", "0x4B800000"),  # natural form "16777216" has no '.'
    (float("inf"), "f32", "0x7F800000"),
    (float("-inf"), "f32", "0xFF800000"),
    (float("nan"), "f32", "0x7FC00000"),
    (float("inf"), "f16", "0x7C00"),
    (float("inf"), "f64", "0x7FF0000000000000"),
    (0.1, "bf16", "1.000980e-01"),
    (float("nan"), "f8E4M3FN", "0x7F"),
])
def test_known_texts(value, type_name, text):
    assert literals.format_float(value, type_name) == text


def test_format_float_array_any_shape_and_unknown_type():
    arr = np.array([[1.0, 2.0], [3.0, 0.5]], ml_dtypes.bfloat16)
    assert literals.format_float_array(arr, "bf16") == [
        "1.000000e+00", "2.000000e+00", "3.000000e+00", "5.000000e-01"]
    with pytest.raises(ValueError, match="cannot print floats of type 'i32'"):
        literals.format_float(1.0, "i32")


# ---------------------------------------------------------------------------------------------
# Against upstream MLIR


@pytest.fixture(scope="module")
def mlir_context():
    pytest.importorskip("jaxlib", reason="jaxlib (the MLIR oracle) is not importable")
    from jaxlib.mlir import ir
    return ir, mlir_oracle.mlir_context()


_DENSE = re.compile(r"dense<(\[?)(.*?)\]?> : tensor<(\d+)x")


def _mlir_texts(mlir_context, arr: np.ndarray, type_name: str) -> list[str]:
    """MLIR's printed text for each element, given the values as hex blobs.

    Constants hold at most 100 elements: above that, MLIR prints the blob back as hex.
    """
    ir, ctx = mlir_context
    lines = []
    for i in range(0, len(arr), 100):
        chunk = arr[i:i + 100]
        lines.append(f'  %c{i} = stablehlo.constant dense<"0x{chunk.tobytes().hex()}"> : '
                     f"tensor<{len(chunk)}x{type_name}>")
    text = "func.func private @f() {\n" + "\n".join(lines) + "\n  return\n}"
    with ctx, ir.Location.unknown():
        printed = str(ir.Module.parse(text))
    texts = []
    for match in _DENSE.finditer(printed):
        body, count = match.group(2), int(match.group(3))
        texts += body.split(", ") if match.group(1) else [body] * count  # [..] or a splat
    assert len(texts) == len(arr)
    return texts


def _assert_same(expected: list[str], actual: list[str], arr: np.ndarray, type_name: str):
    bits = arr.view(f"u{arr.dtype.itemsize}").tolist()
    mismatches = [f"bits 0x{b:X}: MLIR {e!r}, ours {a!r}"
                  for b, e, a in zip(bits, expected, actual) if e != a]
    assert not mismatches, f"{type_name}: {len(mismatches)} mismatches\n" + "\n".join(
        mismatches[:20])


@pytest.mark.parametrize("type_name", EXHAUSTIVE_TYPES)
def test_every_bit_pattern_matches_mlir(mlir_context, type_name):
    dtype = numpy_dtype(FloatType(type_name))
    width = BIT_WIDTH.get(type_name, 8 * dtype.itemsize)
    arr = np.arange(2**width, dtype=f"u{dtype.itemsize}").view(dtype)
    expected = _mlir_texts(mlir_context, arr, type_name)
    _assert_same(expected, literals.format_float_array(arr, type_name), arr, type_name)


@pytest.mark.parametrize("type_name", ["f32", "f64"])
def test_random_values_match_mlir(mlir_context, type_name):
    dtype = DTYPE[type_name]
    arr = np.concatenate([_special_values(dtype), _random_values(dtype, 20000, seed=4)])
    expected = _mlir_texts(mlir_context, arr, type_name)
    _assert_same(expected, literals.format_float_array(arr, type_name), arr, type_name)
    # The Python reference on a slice, so it is checked against MLIR even with native built.
    head = arr[:3000]
    _assert_same(expected[:3000], literals.format_floats(head), head, type_name)
