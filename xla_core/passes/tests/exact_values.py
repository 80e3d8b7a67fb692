"""Bit-exact comparison, sampling of special values and the golden programs, shared by the
rewrite-pass tests (a support module: Bazel gives each test file only its own module and these)."""
from __future__ import annotations

import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from stablehlo.ir.types import ComplexType, IntegerType, TensorType, numpy_dtype
from stablehlo.text import split_input_file


def same(a, b) -> bool:
    return (a.dtype == b.dtype and a.shape == b.shape
            and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes())


def float_pool(dtype) -> np.ndarray:
    """Special values of a float dtype (formats without inf turn it into NaN)."""
    info = ml_dtypes.finfo(dtype)
    specials = [np.nan, -np.nan, -0.0, 0.0, np.inf, -np.inf, 1.0, -1.0, float(info.max),
                -float(info.max), float(info.smallest_subnormal), 0.5, 3.0, -7e-3]
    return np.array(specials).astype(dtype)


def sample(t: TensorType, rng: np.random.Generator) -> np.ndarray:
    """Random values of ``t``, half of them special (NaN, -0.0, inf, extremes)."""
    element, dtype = t.element_type, numpy_dtype(t.element_type)
    size = int(np.prod(t.shape, dtype=np.int64))
    if isinstance(element, IntegerType) and element.width == 1:
        return rng.integers(0, 2, size).astype(bool).reshape(t.shape)
    if isinstance(element, IntegerType):
        info = np.iinfo(dtype)
        pool = [info.min, info.max, 0, 1, info.max // 3] + ([-1] if element.signed else [])
        values = np.where(rng.random(size) < 0.5, rng.choice(np.array(pool, dtype), size),
                          rng.integers(info.min, info.max, size, dtype=dtype, endpoint=True))
        return values.astype(dtype).reshape(t.shape)
    part_dtype = numpy_dtype(element.element_type if isinstance(element, ComplexType) else element)
    pool = float_pool(part_dtype).astype(np.float64)
    with np.errstate(over="ignore"):  # random values beyond f16's range become inf: fine
        random = rng.standard_normal((2, size)) * np.exp2(rng.integers(-20, 20, (2, size)))
        # every special value, and for complex every pair of them, then random values,
        # shuffled: a big enough tensor has them all, a small one a random few
        specials = np.stack([np.repeat(pool, len(pool)), np.tile(pool, len(pool))])
        if not isinstance(element, ComplexType):
            specials = specials[:, ::len(pool)]
        parts = np.concatenate([specials, random], axis=1)[:, :size].astype(part_dtype)
    parts = parts[:, rng.permutation(size)]
    if isinstance(element, ComplexType):
        values = np.empty(size, dtype)
        values.real, values.imag = parts
        return values.reshape(t.shape)
    return parts[0].reshape(t.shape)


def golden_programs(path: Path) -> list:
    """pytest params (function name, chunk text) of every chunk of a golden .mlir file."""
    programs = []
    for _, _, chunk in split_input_file(path.read_text()):
        match = re.search(r"^func\.func public @(\w+)", chunk, re.MULTILINE)
        if match:
            programs.append(pytest.param(match.group(1), chunk, id=match.group(1)))
    return programs
