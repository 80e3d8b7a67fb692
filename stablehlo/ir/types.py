"""StableHLO types: element types, tensors, tuples, tokens, quantized types.

Types are immutable and hashable; ``str(t)`` is the MLIR text form. Dynamic
dimensions are ``None`` in ``TensorType.shape`` and print as ``?``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

try:
    import ml_dtypes
except ImportError:  # pragma: no cover - ml_dtypes is a hard dependency
    ml_dtypes = None


class Type:
    """Base of every type."""


@dataclass(frozen=True)
class IntegerType(Type):
    width: int
    signed: bool = True  # i1 is always "signed" (bool); unsigned prints as uiN

    def __str__(self) -> str:
        return f"i{self.width}" if self.signed or self.width == 1 else f"ui{self.width}"


@dataclass(frozen=True)
class IndexType(Type):
    def __str__(self) -> str:
        return "index"


@dataclass(frozen=True)
class FloatFormat:
    """The facts about one float element type; ``FLOAT_FORMATS`` holds every one.

    ``bits`` is the type's width as StableHLO counts it (bitcast_convert, reduce_precision):
    sign, exponent and stored mantissa bits. ``numpy_name`` is the ``numpy``/``ml_dtypes``
    dtype holding its values, None where there is none (tf32). An IEEE-like format
    (``has_inf``) has signed zeros, infinities, NaNs, subnormals and the IEEE bias; the
    ``FN``/``FNUZ`` formats trade the infinities (and, ``UZ``, the negative zero) for range.
    """
    name: str
    bits: int
    exponent_bits: int
    mantissa_bits: int  # stored, without the implicit leading bit
    has_inf: bool
    has_nan: bool
    numpy_name: Optional[str]

    @property
    def precision(self) -> int:
        """Significand precision in bits, the implicit leading bit included."""
        return self.mantissa_bits + 1

    @property
    def signed(self) -> bool:
        """Whether the format has a sign bit (all but f8E8M0FNU)."""
        return self.bits > self.exponent_bits + self.mantissa_bits

    @property
    def storage_bits(self) -> int:
        """Bits a value takes in memory: sub-byte formats pack, and a width that is not a
        whole number of bytes (tf32's 19) takes the next power of two."""
        if self.bits <= 8 or self.bits % 8 == 0:
            return self.bits
        return 1 << (self.bits - 1).bit_length()

    @property
    def max_exponent(self) -> int:
        """Exponent of the largest finite value, for an IEEE-like format (``has_inf``)."""
        return (1 << (self.exponent_bits - 1)) - 1

    @property
    def min_exponent(self) -> int:
        """Exponent of the smallest normal value, for an IEEE-like format (``has_inf``)."""
        return 1 - self.max_exponent

    @property
    def max(self) -> float:
        """The largest finite value."""
        if self.numpy_name is None:  # IEEE-like (tf32): all ones in the mantissa, top exponent
            return (2.0 - 2.0 ** -self.mantissa_bits) * 2.0 ** self.max_exponent
        return float(ml_dtypes.finfo(_numpy_float_type(self.numpy_name)).max)


def _numpy_float_type(name: str):
    """numpy's own float types first, then ml_dtypes' (bfloat16, float8_*, ...)."""
    return getattr(np, name) if name in ("float16", "float32", "float64") \
        else getattr(ml_dtypes, name)


# name: bits, exponent bits, stored mantissa bits, infinities, NaNs, numpy dtype
FLOAT_FORMATS: dict[str, FloatFormat] = {f.name: f for f in (
    FloatFormat("f4E2M1FN", 4, 2, 1, False, False, "float4_e2m1fn"),
    FloatFormat("f6E2M3FN", 6, 2, 3, False, False, "float6_e2m3fn"),
    FloatFormat("f6E3M2FN", 6, 3, 2, False, False, "float6_e3m2fn"),
    FloatFormat("f8E3M4", 8, 3, 4, True, True, "float8_e3m4"),
    FloatFormat("f8E4M3", 8, 4, 3, True, True, "float8_e4m3"),
    FloatFormat("f8E4M3FN", 8, 4, 3, False, True, "float8_e4m3fn"),
    FloatFormat("f8E4M3FNUZ", 8, 4, 3, False, True, "float8_e4m3fnuz"),
    FloatFormat("f8E4M3B11FNUZ", 8, 4, 3, False, True, "float8_e4m3b11fnuz"),
    FloatFormat("f8E5M2", 8, 5, 2, True, True, "float8_e5m2"),
    FloatFormat("f8E5M2FNUZ", 8, 5, 2, False, True, "float8_e5m2fnuz"),
    FloatFormat("f8E8M0FNU", 8, 8, 0, False, True, "float8_e8m0fnu"),  # no sign bit
    FloatFormat("bf16", 16, 8, 7, True, True, "bfloat16"),
    FloatFormat("f16", 16, 5, 10, True, True, "float16"),
    FloatFormat("tf32", 19, 8, 10, True, True, None),  # computed in, never stored
    FloatFormat("f32", 32, 8, 23, True, True, "float32"),
    FloatFormat("f64", 64, 11, 52, True, True, "float64"),
)}


@dataclass(frozen=True)
class FloatType(Type):
    name: str  # one of FLOAT_FORMATS

    def __str__(self) -> str:
        return self.name

    @property
    def format(self) -> FloatFormat:
        return FLOAT_FORMATS[self.name]

    @property
    def precision(self) -> int:
        return FLOAT_FORMATS[self.name].precision


@dataclass(frozen=True)
class ComplexType(Type):
    element_type: FloatType

    def __str__(self) -> str:
        return f"complex<{self.element_type}>"


@dataclass(frozen=True)
class QuantizedType(Type):
    """``!quant.uniform<storage[:min:max]:expressed[:axis], scale[:zp]>``.

    Per-tensor types have one scale/zero point and ``axis is None``.
    ``storage_min``/``storage_max`` are None when the text omits them.
    """
    storage_type: IntegerType
    expressed_type: FloatType
    scales: tuple
    zero_points: tuple
    axis: Optional[int] = None
    storage_min: Optional[int] = None
    storage_max: Optional[int] = None

    def __str__(self) -> str:
        storage = str(self.storage_type)
        if self.storage_min is not None:
            storage += f"<{self.storage_min}:{self.storage_max}>"
        head = f"{storage}:{self.expressed_type}"
        if self.axis is not None:
            head += f":{self.axis}"
        params = [_quant_param(s, z) for s, z in zip(self.scales, self.zero_points)]
        body = "{" + ",".join(params) + "}" if self.axis is not None else params[0]
        return f"!quant.uniform<{head}, {body}>"

    @property
    def min_value(self) -> int:
        if self.storage_min is not None:
            return self.storage_min
        w = self.storage_type.width
        return -(1 << (w - 1)) if self.storage_type.signed else 0

    @property
    def max_value(self) -> int:
        if self.storage_max is not None:
            return self.storage_max
        w = self.storage_type.width
        return (1 << (w - 1)) - 1 if self.storage_type.signed else (1 << w) - 1


def _quant_param(scale: float, zero_point: int) -> str:
    text = repr(float(scale))
    return f"{text}:{zero_point}" if zero_point != 0 else text


@dataclass(frozen=True)
class TensorType(Type):
    shape: tuple  # ints, None for a dynamic dimension
    element_type: Type
    encoding: Optional[object] = None  # an Attribute, kept verbatim

    def __str__(self) -> str:
        dims = "".join(("?" if d is None else str(d)) + "x" for d in self.shape)
        enc = ""
        if self.encoding is not None:
            from stablehlo.text.printer import print_attribute
            enc = ", " + print_attribute(self.encoding)
        return f"tensor<{dims}{self.element_type}{enc}>"

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        return all(d is not None for d in self.shape)

    @property
    def num_elements(self) -> int:
        if not self.is_static:
            raise ValueError(f"{self} has dynamic dimensions")
        return math.prod(self.shape)  # exact, and ~10x faster than np.prod on a tuple

    def with_shape(self, shape) -> "TensorType":
        return TensorType(tuple(shape), self.element_type, self.encoding)

    def with_element_type(self, element_type: Type) -> "TensorType":
        return TensorType(self.shape, element_type, self.encoding)


@dataclass(frozen=True)
class TupleType(Type):
    types: tuple

    def __str__(self) -> str:
        return "tuple<" + ", ".join(str(t) for t in self.types) + ">"


@dataclass(frozen=True)
class TokenType(Type):
    def __str__(self) -> str:
        return "!stablehlo.token"


@dataclass(frozen=True)
class FutureType(Type):
    """``!openhlo.future<T, ...>``: the handle an ``openhlo.async_start`` returns and its
    ``openhlo.async_done`` consumes; ``types`` are the wrapped collective's result types."""
    types: tuple

    def __str__(self) -> str:
        return "!openhlo.future<" + ", ".join(str(t) for t in self.types) + ">"


@dataclass(frozen=True)
class FunctionType(Type):
    inputs: tuple
    results: tuple

    def __str__(self) -> str:
        ins = ", ".join(str(t) for t in self.inputs)
        if len(self.results) == 1 and not isinstance(self.results[0], FunctionType):
            outs = str(self.results[0])
        else:
            outs = "(" + ", ".join(str(t) for t in self.results) + ")"
        return f"({ins}) -> {outs}"


@dataclass(frozen=True)
class OpaqueType(Type):
    """A type we do not model (``!sdy.foo``, ``memref<...>``), kept verbatim."""
    text: str

    def __str__(self) -> str:
        return self.text


# ---------------------------------------------------------------------------
# Convenience constructors and numpy mapping

I1 = IntegerType(1)
I8, I16, I32, I64 = (IntegerType(w) for w in (8, 16, 32, 64))
UI8, UI16, UI32, UI64 = (IntegerType(w, False) for w in (8, 16, 32, 64))
F16, BF16, F32, F64 = (FloatType(n) for n in ("f16", "bf16", "f32", "f64"))


def tensor(shape, element_type: Type) -> TensorType:
    return TensorType(tuple(shape), element_type)


@dataclass(frozen=True)
class ElementFacts:
    """The facts every layer reads about one element type (``ELEMENT_TYPES`` holds them all;
    ``element_facts`` finds a type's): its width as StableHLO counts it (``bits``: i1 is 1,
    tf32 19, a complex number both parts), the bits a value takes in memory
    (``storage_bits``: sub-byte types pack, i1 takes a byte), the numpy dtype holding its
    values (None where there is none: tf32), and its ``PJRT_Buffer_Type`` code
    (pjrt/c_api/pjrt_abi.h; None for types the PJRT C API plugin does not exchange)."""
    name: str
    bits: int
    storage_bits: int
    numpy_dtype: Optional[np.dtype]
    pjrt_buffer_type: Optional[int]

    @property
    def host_bytes(self) -> int:
        """Bytes one value takes in a host array: its numpy dtype's, else whole bytes of its
        storage (at least one)."""
        if self.numpy_dtype is not None:
            return self.numpy_dtype.itemsize
        return max(1, (self.storage_bits + 7) // 8)


# PJRT_Buffer_Type codes of the types the PJRT C API plugin exchanges.
_PJRT_BUFFER_TYPES = {
    "i1": 1, "i8": 2, "i16": 3, "i32": 4, "i64": 5, "ui8": 6, "ui16": 7, "ui32": 8, "ui64": 9,
    "f16": 10, "f32": 11, "f64": 12, "bf16": 13, "complex<f32>": 14, "complex<f64>": 15,
    "f8E5M2": 16, "f8E4M3FN": 17, "f8E4M3B11FNUZ": 18, "f8E5M2FNUZ": 19, "f8E4M3FNUZ": 20,
    "i4": 21, "ui4": 22, "i2": 24, "ui2": 25, "f8E4M3": 26, "f8E3M4": 27, "f8E8M0FNU": 28}


def _element_table() -> dict[str, ElementFacts]:
    table: dict[str, ElementFacts] = {}

    def add(name: str, bits: int, storage_bits: int, dtype) -> None:
        table[name] = ElementFacts(name, bits, storage_bits,
                                   None if dtype is None else np.dtype(dtype),
                                   _PJRT_BUFFER_TYPES.get(name))

    add("i1", 1, 8, np.bool_)
    for width in (8, 16, 32, 64):
        add(f"i{width}", width, width, f"int{width}")
        add(f"ui{width}", width, width, f"uint{width}")
    if ml_dtypes is not None:
        for width in (2, 4):
            add(f"i{width}", width, width, getattr(ml_dtypes, f"int{width}"))
            add(f"ui{width}", width, width, getattr(ml_dtypes, f"uint{width}"))
    for fmt in FLOAT_FORMATS.values():
        dtype = None if fmt.numpy_name is None else _numpy_float_type(fmt.numpy_name)
        add(fmt.name, fmt.bits, fmt.storage_bits, dtype)
    add("complex<f32>", 64, 64, np.complex64)
    add("complex<f64>", 128, 128, np.complex128)
    add("index", 64, 64, np.int64)  # after i64: int64 arrays read back as i64
    return table


ELEMENT_TYPES: dict[str, ElementFacts] = _element_table()


def element_facts(element_type: Type) -> ElementFacts:
    """The facts of ``element_type`` (a quantized type's are its storage type's); TypeError
    for a type that is no element type."""
    if isinstance(element_type, QuantizedType):
        element_type = element_type.storage_type
    facts = ELEMENT_TYPES.get(str(element_type))
    if facts is None:
        raise TypeError(f"{element_type} is no element type")
    return facts


def numpy_dtype(element_type: Type) -> np.dtype:
    """The numpy dtype that holds values of ``element_type``.

    Quantized types map to their storage type.
    """
    try:
        dtype = element_facts(element_type).numpy_dtype
    except TypeError:
        dtype = None
    if dtype is None:
        raise TypeError(f"no numpy dtype for element type {element_type}")
    return dtype


def float_format_of_dtype(dtype) -> Optional[FloatFormat]:
    """The float format whose values ``dtype`` holds, or None for other dtypes."""
    name = np.dtype(dtype).name
    return _FORMATS_BY_NUMPY_NAME.get(name)


_FORMATS_BY_NUMPY_NAME = {f.numpy_name: f for f in FLOAT_FORMATS.values() if f.numpy_name}


def element_type_for_dtype(dtype) -> Type:
    """Inverse of ``numpy_dtype`` for the dtypes it produces."""
    dtype = np.dtype(dtype)
    for facts in ELEMENT_TYPES.values():
        if facts.numpy_dtype is not None and facts.numpy_dtype == dtype and \
                facts.name != "index":
            return parse_element_type_name(facts.name)
    raise TypeError(f"no StableHLO element type for numpy dtype {dtype}")


# StableHLO's complex numbers have f32 or f64 parts, nothing narrower or wider.
COMPLEX_PART_TYPES = ("f32", "f64")


def complex_part_problem(inner: Type):
    """Why ``complex<inner>`` is not a StableHLO type, or None when it is."""
    if isinstance(inner, FloatType) and inner.name in COMPLEX_PART_TYPES:
        return None
    return (f"complex element type must be {' or '.join(COMPLEX_PART_TYPES)}, got {inner}")


def parse_element_type_name(text: str) -> Type:
    """Element type from its keyword spelling (``f32``, ``ui8``, ``complex<f64>``)."""
    if text.startswith("complex<") and text.endswith(">"):
        inner = parse_element_type_name(text[8:-1])
        problem = complex_part_problem(inner)
        if problem:
            raise ValueError(problem)
        return ComplexType(inner)
    if text in FLOAT_FORMATS:
        return FloatType(text)
    if text == "index":
        return IndexType()
    for prefix, signed, widths in _INTEGER_SPELLINGS:
        digits = text[len(prefix):]
        if text.startswith(prefix) and digits.isdigit():
            if digits not in widths:
                known = ", ".join(prefix + width for width in widths)
                raise ValueError(f"unsupported integer type '{text}' (StableHLO has {known})")
            return IntegerType(int(digits), signed)
    raise ValueError(f"unknown element type '{text}'")


# The integer widths StableHLO has: i1 (boolean) and 2, 4, 8, 16, 32, 64 bits, signless or
# unsigned (``si`` is the explicitly signed spelling, as in MLIR).
_WIDTHS = ("2", "4", "8", "16", "32", "64")
_INTEGER_SPELLINGS = (("ui", False, _WIDTHS), ("si", True, _WIDTHS),
                      ("i", True, ("1",) + _WIDTHS))


def integer_range(element_type: Type) -> tuple[int, int]:
    """The values an integer literal of ``element_type`` may be written as: a signless
    integer also takes its unsigned spelling (as in MLIR: ``255 : i8`` is -1)."""
    if isinstance(element_type, IndexType):
        width, signed = 64, True
    else:
        width, signed = element_type.width, element_type.signed
    low = -(1 << (width - 1)) if signed and width > 1 else 0
    return low, (1 << width) - 1


def is_float(t: Type) -> bool:
    return isinstance(t, FloatType)


def is_integer(t: Type) -> bool:
    return isinstance(t, IntegerType) and t.width != 1


def is_bool(t: Type) -> bool:
    return isinstance(t, IntegerType) and t.width == 1


def is_complex(t: Type) -> bool:
    return isinstance(t, ComplexType)


