"""Random arguments have exactly the declared types and the documented ranges."""
from __future__ import annotations

import numpy as np
import pytest

from stablehlo.ir.types import ComplexType, FloatType, IntegerType, TensorType, TupleType
from tools.diagnostics import CliError
from tools.random_inputs import random_arguments


def tensor(shape, elem):
    return TensorType(tuple(shape), elem)


def test_dtypes_shapes_and_ranges():
    import ml_dtypes
    types = [tensor((50,), IntegerType(8)), tensor((50,), IntegerType(8, False)),
             tensor((50,), IntegerType(1)), tensor((2, 25), FloatType("f32")),
             tensor((7,), ComplexType(FloatType("f64"))), tensor((), FloatType("bf16")),
             tensor((40,), IntegerType(2)), tensor((40,), IntegerType(4, False))]
    i8, u8, b, f, c, bf, i2, u4 = random_arguments(types, seed=0)
    assert i8.dtype == np.int8 and i8.min() >= -5 and i8.max() <= 5 and len(set(i8)) > 5
    assert u8.dtype == np.uint8 and u8.max() <= 9
    assert b.dtype == np.bool_ and b.any() and not b.all()
    assert f.dtype == np.float32 and f.shape == (2, 25) and 0.3 < f.std() < 3
    assert c.dtype == np.complex128 and np.all(c.imag != 0)
    assert bf.dtype == ml_dtypes.bfloat16 and bf.shape == ()
    assert i2.dtype == ml_dtypes.int2 and set(i2.astype(int)) <= {-2, -1, 0, 1}
    assert u4.dtype == ml_dtypes.uint4 and int(u4.astype(int).max()) <= 9


def test_seed_determines_values():
    types = [tensor((10,), FloatType("f32"))]
    a, = random_arguments(types, 1)
    b, = random_arguments(types, 1)
    c, = random_arguments(types, 2)
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_tuples_and_dynamic_shapes():
    t = TupleType((tensor((2,), IntegerType(32)), tensor((), FloatType("f64"))))
    value, = random_arguments([t], 0)
    assert isinstance(value, tuple) and value[0].dtype == np.int32 and value[1].shape == ()
    with pytest.raises(CliError, match=r"argument 0 has the dynamic type tensor<\?x4xf32>"):
        random_arguments([tensor((None, 4), FloatType("f32"))], 0)
