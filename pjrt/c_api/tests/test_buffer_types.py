"""The PJRT_Buffer_Type codes of the element types (stablehlo.ir.types.ELEMENT_TYPES)
against the enum of our PJRT C declarations (pjrt_abi.h)."""
import pathlib
import re

from stablehlo.ir.types import ELEMENT_TYPES

# pjrt_abi.h's enumerator suffixes, as PJRT names the element types.
_PJRT_NAMES = {"PRED": "i1", "S8": "i8", "S16": "i16", "S32": "i32", "S64": "i64", "U8": "ui8",
               "U16": "ui16", "U32": "ui32", "U64": "ui64", "F16": "f16", "F32": "f32",
               "F64": "f64", "BF16": "bf16", "C64": "complex<f32>", "C128": "complex<f64>",
               "F8E5M2": "f8E5M2", "F8E4M3FN": "f8E4M3FN", "F8E4M3B11FNUZ": "f8E4M3B11FNUZ",
               "F8E5M2FNUZ": "f8E5M2FNUZ", "F8E4M3FNUZ": "f8E4M3FNUZ", "S4": "i4", "U4": "ui4",
               "S2": "i2", "U2": "ui2", "F8E4M3": "f8E4M3", "F8E3M4": "f8E3M4",
               "F8E8M0FNU": "f8E8M0FNU"}


def _header_codes() -> dict:
    text = (pathlib.Path(__file__).parents[1] / "pjrt_abi.h").read_text()
    enum = re.search(r"enum PJRT_Buffer_Type : int \{(.*?)\};", text, re.S).group(1)
    return {name: int(code) for name, code in re.findall(r"PJRT_T_(\w+) = (\d+)", enum)}


def test_the_codes_are_the_headers():
    codes = {name: code for name, code in _header_codes().items() if name != "INVALID"}
    assert set(codes) == set(_PJRT_NAMES)
    want = {_PJRT_NAMES[name]: code for name, code in codes.items()}
    got = {name: f.pjrt_buffer_type for name, f in ELEMENT_TYPES.items()
           if f.pjrt_buffer_type is not None}
    assert got == want
