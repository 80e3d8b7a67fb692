"""Interpreter kernels of ``stablehlo.rng`` and ``stablehlo.rng_bit_generator``.

``rng`` is nondeterministic by the spec: numpy's generator draws UNIFORM
values in ``[a, b)`` or NORMAL values with mean ``a`` and deviation ``b``.

``rng_bit_generator`` must be a deterministic function of the state, and we
make it bit-identical to XLA's expansion (xla/hlo/builder/lib/prng.cc and the
RngBitGeneratorExpander) so that programs lowered by JAX give the values
XLA gives:

* THREE_FRY: ``state = [key, counter]``. Element ``i`` (row-major) of a
  64-bit output is Threefry-2x32 (20 rounds) of the 64-bit block
  ``counter + i`` under ``key``; 32-bit outputs take both 32-bit halves of
  a block for two neighbours along the first even dimension (see
  ``_split_dim``); narrower outputs keep the low bits of the 32-bit ones.
  The counter advances by the number of blocks used.
* PHILOX: ``state = [key, counter_lo(, counter_hi)]``, a 128-bit counter
  (for a 2-word state the counter is ``[state[1], state[0]]``); each counter
  value yields four 32-bit words (Philox-4x32, 10 rounds), consumed in order.
* DEFAULT is PHILOX, which is what XLA's CPU and GPU compilers choose.

All arithmetic is on uint32/uint64 numpy arrays (wrap-around intended).
"""
from __future__ import annotations

import numpy as np

from stablehlo.interpreter.accumulate import kind
from stablehlo.interpreter.kernels import kernel
from stablehlo.interpreter.opattrs import enum_value, fail
from stablehlo.ir.types import numpy_dtype

_U32 = np.uint32
_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)
_M32 = np.uint64(0xFFFFFFFF)


# ---------------------------------------------------------------------------
# rng


@kernel("stablehlo.rng")
def rng(ctx, op, a, b, shape):
    distribution = enum_value(op, "rng_distribution")
    result_type = op.result_types[0]
    dtype = numpy_dtype(result_type.element_type)
    dims = tuple(int(d) for d in np.asarray(shape).reshape(-1))
    generator = np.random.default_rng()
    low, high = np.asarray(a), np.asarray(b)
    if distribution == "NORMAL":
        if kind(dtype) != "f":
            raise fail(op, "NORMAL needs a floating-point result type")
        value = generator.normal(float(low), float(high), size=dims)
    elif distribution == "UNIFORM":
        if kind(dtype) == "f":
            value = generator.uniform(float(low), float(high), size=dims)
        elif kind(dtype) == "b":
            value = generator.integers(int(low), max(int(high), int(low) + 1), size=dims) != 0
        else:
            value = generator.integers(int(low), max(int(high), int(low) + 1), size=dims)
    else:
        raise fail(op, f"unknown rng_distribution {distribution}")
    return np.asarray(value).astype(dtype)


# ---------------------------------------------------------------------------
# Threefry-2x32


def _rotl(x: np.ndarray, distance: int) -> np.ndarray:
    return (x << _U32(distance)) | (x >> _U32(32 - distance))


def threefry2x32(x0: np.ndarray, x1: np.ndarray, k0, k1) -> tuple[np.ndarray, np.ndarray]:
    """Threefry-2x32 with 20 rounds on uint32 arrays, key words ``k0, k1``."""
    k0, k1 = _U32(k0), _U32(k1)
    k2 = _U32(0x1BD11BDA) ^ k0 ^ k1
    schedule = (k0, k1, k2)
    x0 = x0 + k0
    x1 = x1 + k1
    for group in range(5):
        for r in _ROTATIONS[(group % 2) * 4:(group % 2) * 4 + 4]:
            x0 = x0 + x1
            x1 = _rotl(x1, r) ^ x0
        x0 = x0 + schedule[(group + 1) % 3]
        x1 = x1 + schedule[(group + 2) % 3] + _U32(group + 1)
    return x0, x1


def _split_u64(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return (x & _M32).astype(_U32), (x >> np.uint64(32)).astype(_U32)


def _join_u64(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return lo.astype(np.uint64) | (hi.astype(np.uint64) << np.uint64(32))


def _split_dim(shape: tuple) -> int:
    """The dimension XLA halves for 32-bit outputs: the first even one, else the largest."""
    for i, d in enumerate(shape):
        if d % 2 == 0:
            return i
    return int(np.argmax(shape))


def _threefry_blocks(key, counter, shape) -> tuple[np.ndarray, np.ndarray, int]:
    """Threefry output words for blocks ``counter + i`` over ``shape``; blocks used."""
    count = int(np.prod(shape, dtype=np.int64))
    blocks = np.uint64(counter) + np.arange(count, dtype=np.uint64)
    k0, k1 = _split_u64(np.uint64(key))
    lo, hi = _split_u64(blocks)
    out0, out1 = threefry2x32(lo, hi, k0, k1)
    return out0.reshape(shape), out1.reshape(shape), count


def _threefry_bits(key, counter, shape: tuple, bits: int) -> tuple[np.ndarray, int]:
    """(uint bits of ``shape``, blocks consumed) as XLA's ThreeFryBitGenerator."""
    if bits == 64:
        out0, out1, used = _threefry_blocks(key, counter, shape)
        return _join_u64(out0, out1), used
    if not shape:
        out0, _, used = _threefry_blocks(key, counter, (1,))
        words = out0.reshape(())
    else:
        axis = _split_dim(shape)
        half = list(shape)
        half[axis] = -(-shape[axis] // 2)
        out0, out1, used = _threefry_blocks(key, counter, tuple(half))
        pairs = np.stack([out0, out1], axis=axis + 1)
        merged = list(shape)
        merged[axis] = half[axis] * 2
        words = pairs.reshape(merged)
        words = words[tuple(slice(0, d) for d in shape)]
    return words, used


# ---------------------------------------------------------------------------
# Philox-4x32


def _mulhilo(x: np.ndarray, multiplier: int) -> tuple[np.ndarray, np.ndarray]:
    product = x.astype(np.uint64) * np.uint64(multiplier)
    return (product >> np.uint64(32)).astype(_U32), (product & _M32).astype(_U32)


def philox4x32(words: list[np.ndarray], k0, k1) -> list[np.ndarray]:
    """Philox-4x32 with 10 rounds on four uint32 arrays."""
    k0, k1 = int(k0), int(k1)
    x = list(words)
    for _ in range(10):
        hi0, lo0 = _mulhilo(x[0], 0xD2511F53)
        hi1, lo1 = _mulhilo(x[2], 0xCD9E8D57)
        x = [hi1 ^ x[1] ^ _U32(k0), lo1, hi0 ^ x[3] ^ _U32(k1), lo0]
        k0 = (k0 + 0x9E3779B9) & 0xFFFFFFFF
        k1 = (k1 + 0xBB67AE85) & 0xFFFFFFFF
    return x


def _philox_words(key, counter_lo, counter_hi, count: int) -> tuple[list[np.ndarray], tuple]:
    """Four word arrays for ``count`` consecutive 128-bit counters; the next counter."""
    steps = np.arange(count, dtype=np.uint64)
    low = np.uint64(counter_lo) + steps
    high = np.uint64(counter_hi) + (low < np.uint64(counter_lo)).astype(np.uint64)
    k0, k1 = _split_u64(np.uint64(key))
    w0, w1 = _split_u64(low)
    w2, w3 = _split_u64(high)
    new_lo = np.uint64(counter_lo) + np.uint64(count)
    new_hi = np.uint64(counter_hi) + np.uint64(1 if new_lo < np.uint64(counter_lo) else 0)
    return philox4x32([w0, w1, w2, w3], k0, k1), (new_lo, new_hi)


def _philox_bits(key, counter_lo, counter_hi, shape: tuple, bits: int):
    count = int(np.prod(shape, dtype=np.int64))
    if bits == 64:
        words, state = _philox_words(key, counter_lo, counter_hi, -(-count * 2 // 4))
        first, second = _join_u64(words[0], words[1]), _join_u64(words[2], words[3])
        numbers = np.stack([first, second], axis=1).reshape(-1)
    else:
        words, state = _philox_words(key, counter_lo, counter_hi, -(-count // 4))
        numbers = np.stack(words, axis=1).reshape(-1)
    return numbers[:count].reshape(shape), state


# ---------------------------------------------------------------------------
# rng_bit_generator


def _bit_width(op, dtype) -> int:
    width = np.dtype(dtype).itemsize * 8
    if kind(dtype) in "bc" or width not in (8, 16, 32, 64):
        raise fail(op, f"rng_bit_generator cannot produce {dtype} values")
    return width


def _as_output(words: np.ndarray, dtype) -> np.ndarray:
    """Raw uint bits (uint32 or uint64) kept to the output's width, reinterpreted."""
    width = np.dtype(dtype).itemsize * 8
    unsigned = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[width]
    # astype truncates to the low bits, as XLA's narrowing convert does; a
    # copy of a 0-d array stays 0-d (np.ascontiguousarray would make it 1-d).
    return words.astype(unsigned).copy().view(dtype)


@kernel("stablehlo.rng_bit_generator", multi=True)
def rng_bit_generator(ctx, op, initial_state):
    with np.errstate(over="ignore"):  # counters wrap around by design
        return _generate(op, initial_state)


def _generate(op, initial_state) -> list[np.ndarray]:
    algorithm = enum_value(op, "rng_algorithm", "DEFAULT")
    state = np.asarray(initial_state).astype(np.uint64).reshape(-1)
    output_type = op.result_types[1]
    dtype = numpy_dtype(output_type.element_type)
    shape = tuple(output_type.shape)
    width = _bit_width(op, dtype)
    if algorithm == "DEFAULT":
        algorithm = "PHILOX"
    if algorithm == "THREE_FRY":
        if state.size != 2:
            raise fail(op, f"THREE_FRY needs a state of 2 words, got {state.size}")
        words, used = _threefry_bits(state[0], state[1], shape, max(width, 32))
        new_state = np.array([state[0], state[1] + np.uint64(used)], dtype=np.uint64)
    elif algorithm == "PHILOX":
        if state.size not in (2, 3):
            raise fail(op, f"PHILOX needs a state of 2 or 3 words, got {state.size}")
        lo, hi = (state[1], state[2]) if state.size == 3 else (state[1], state[0])
        words, (new_lo, new_hi) = _philox_bits(state[0], lo, hi, shape, max(width, 32))
        tail = [new_lo, new_hi] if state.size == 3 else [new_lo]
        new_state = np.array([state[0]] + tail, dtype=np.uint64)
    else:
        raise fail(op, f"unknown rng_algorithm {algorithm}")
    state_dtype = numpy_dtype(op.result_types[0].element_type)
    return [new_state.astype(state_dtype), _as_output(words, dtype)]
