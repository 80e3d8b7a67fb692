"""The one table of float facts (``FLOAT_FORMATS``) against ml_dtypes' own description of
each dtype, and tf32, which has no dtype, against its definition."""
import ml_dtypes
import numpy as np
import pytest

from stablehlo.ir.types import FLOAT_FORMATS, FloatType, float_format_of_dtype, numpy_dtype

_WITH_DTYPE = sorted(n for n, f in FLOAT_FORMATS.items() if f.numpy_name is not None)


@pytest.mark.parametrize("name", _WITH_DTYPE)
def test_the_table_agrees_with_ml_dtypes(name):
    fmt = FLOAT_FORMATS[name]
    dtype = numpy_dtype(FloatType(name))
    info = ml_dtypes.finfo(dtype)
    assert (fmt.bits, fmt.exponent_bits, fmt.mantissa_bits) == (info.bits, info.nexp, info.nmant)
    assert fmt.max == float(info.max)
    assert fmt.has_inf == bool(np.isinf(np.array(np.inf).astype(dtype)))
    assert fmt.has_nan == bool(np.isnan(np.array(np.nan).astype(dtype)))
    if fmt.has_inf:  # IEEE-like: the bias gives these exponents
        assert (fmt.min_exponent, fmt.max_exponent) == (info.minexp, info.maxexp - 1)
    assert float_format_of_dtype(dtype) is fmt


def test_tf32_is_19_bits_with_8_exponent_and_10_mantissa_bits_and_no_dtype():
    fmt = FLOAT_FORMATS["tf32"]
    assert (fmt.bits, fmt.exponent_bits, fmt.mantissa_bits) == (19, 8, 10)
    assert fmt.precision == 11 and fmt.numpy_name is None and fmt.storage_bits == 32
    assert fmt.max == float.fromhex("0x1.ffcp+127")  # 10 mantissa ones at f32's top exponent
    with pytest.raises(TypeError, match="tf32"):
        numpy_dtype(FloatType("tf32"))


def test_every_format_spends_its_bits_on_sign_exponent_and_mantissa():
    for fmt in FLOAT_FORMATS.values():
        assert fmt.signed == (fmt.name != "f8E8M0FNU"), fmt.name  # the only unsigned format
        assert fmt.bits == fmt.signed + fmt.exponent_bits + fmt.mantissa_bits, fmt.name
