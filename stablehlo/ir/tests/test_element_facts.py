"""The one dtype table (``ELEMENT_TYPES``) against numpy's and ml_dtypes' own description of
each dtype, and against the types' spellings."""
import ml_dtypes
import numpy as np
import pytest

from stablehlo.ir.types import (ELEMENT_TYPES, QuantizedType, element_facts,
                                element_type_for_dtype, numpy_dtype, parse_element_type_name)

_WITH_DTYPE = sorted(n for n, f in ELEMENT_TYPES.items() if f.numpy_dtype is not None)


@pytest.mark.parametrize("name", _WITH_DTYPE)
def test_the_widths_agree_with_the_dtype(name):
    facts = ELEMENT_TYPES[name]
    dtype = facts.numpy_dtype
    if dtype == np.bool_:
        assert (facts.bits, facts.storage_bits) == (1, 8)
    elif dtype.kind == "c":
        assert facts.bits == facts.storage_bits == 8 * dtype.itemsize
    elif dtype.kind in "iu" or name.startswith(("i", "ui")):
        assert facts.bits == facts.storage_bits == ml_dtypes.iinfo(dtype).bits
    else:
        assert facts.bits == ml_dtypes.finfo(dtype).bits
    assert facts.host_bytes == dtype.itemsize
    assert facts.storage_bits <= 8 * dtype.itemsize


@pytest.mark.parametrize("name", sorted(set(ELEMENT_TYPES) - {"index"}))
def test_every_element_type_is_spelled_as_its_name_and_read_back_from_its_dtype(name):
    element_type = parse_element_type_name(name)
    assert str(element_type) == name
    assert element_facts(element_type) is ELEMENT_TYPES[name]
    if ELEMENT_TYPES[name].numpy_dtype is not None:
        assert element_type_for_dtype(numpy_dtype(element_type)) == element_type


def test_tf32_has_no_dtype_and_takes_four_bytes():
    facts = ELEMENT_TYPES["tf32"]
    assert (facts.bits, facts.storage_bits, facts.host_bytes) == (19, 32, 4)
    with pytest.raises(TypeError, match="no numpy dtype"):
        numpy_dtype(parse_element_type_name("tf32"))


def test_a_quantized_type_has_its_storage_types_facts():
    storage = parse_element_type_name("i8")
    quant = QuantizedType(storage, parse_element_type_name("f32"), (0.5,), (0,))
    assert element_facts(quant) is ELEMENT_TYPES["i8"]
