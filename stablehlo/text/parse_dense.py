"""``dense<...> : tensor<...>`` literals -> DenseElementsAttr holding a numpy array.

Accepted forms (MLIR's): nested lists, a single value (a splat, held as one element broadcast
to the shape: see ``DenseElementsAttr``), ``dense<>`` for empty
tensors, and a hex string of raw little-endian row-major bytes (``dense<"0x...">``, any size;
exactly one element's bytes is a splat). Values: integers (also for float types: ``1`` is
1.0), floats, ``true``/``false`` for i1, ``(re, im)`` for complex, and hex integers as raw
float bit patterns (``0x7FC00000``). i1, i2 and i4 take one byte per element in hex blobs.

The literal is read before its type (the type follows ``>``), so elements are collected as
tokens first and converted once the type is known.
"""
from __future__ import annotations

import numpy as np

from stablehlo.ir.attributes import DenseElementsAttr
from stablehlo.ir.types import (
    ComplexType,
    FloatType,
    IndexType,
    IntegerType,
    OpaqueType,
    QuantizedType,
    TensorType,
    integer_range,
    numpy_dtype,
)
from stablehlo.text import literals
from stablehlo.text.parse_types import TypeParser

_NUMBER_KINDS = frozenset(("int", "float", "hex"))


class DenseParser(TypeParser):
    """Mixin: ``parse_dense`` (current token is the ``dense`` keyword)."""

    def parse_dense(self) -> DenseElementsAttr:
        start = self.i
        self.i += 1
        self.expect("<", "after 'dense'")
        hex_digits = None
        elements: list = []
        shape: list = []
        if self.kinds[self.i] == "string":
            text = self.advance()
            if not text.startswith('"0x'):
                raise self.error_at(self.i - 1, "expected hex string ('\"0x...\"') or "
                                                "elements in dense literal")
            hex_digits = text[3:-1]
            self.expect(">", "to close dense literal")
        elif not self.accept(">"):
            shape = self._dense_elements(elements)
        self.expect(":", "after dense literal")
        type_index = self.i
        typ = self.parse_type("of dense literal")
        if not isinstance(typ, TensorType):
            raise self.error_at(type_index, f"dense literal needs a tensor type, got {typ}")
        if not typ.is_static:
            raise self.error_at(type_index, f"dense literal type {typ} must be static")
        if isinstance(typ.element_type, OpaqueType):
            raise self.error_at(type_index, f"dense literal type {typ} has an element type "
                                            f"this parser does not know")
        try:
            if hex_digits is not None:
                array = _array_from_hex(hex_digits, typ)
            else:
                array = _array_from_elements(elements, shape, typ)
        except ValueError as exc:
            raise self.error_at(start, f"invalid dense literal for {typ}: {exc}") from None
        return DenseElementsAttr(typ, array)

    def _dense_elements(self, out: list) -> list:
        """Reads elements up to the closing ``>``; returns the nested list shape."""
        shape: dict = {}  # depth -> number of items of every list at that depth
        counts: list = []  # elements seen so far in each open bracket
        leaf_depth = None
        kinds, texts = self.kinds, self.texts
        expect_item = True
        while True:
            kind, text = kinds[self.i], texts[self.i]
            depth = len(counts)
            if expect_item:
                if text == "[" and kind == "punct":
                    if leaf_depth is not None and depth >= leaf_depth:
                        raise self.error("unexpected '[' in dense literal (inconsistent nesting)")
                    if self.depth + depth >= self.max_depth:
                        raise self.too_deep("dense literal")
                    counts.append(0)
                    self.i += 1
                    if texts[self.i] != "]":
                        continue
                    self.i += 1  # ``[]``: an empty list
                    counts.pop()
                    leaf_depth = self._close_list(shape, depth, 0, leaf_depth, depth + 1)
                else:
                    if leaf_depth is None:
                        leaf_depth = depth
                    elif depth != leaf_depth:
                        raise self.error("inconsistent nesting in dense literal")
                    out.append(self._dense_item(kind, text))
                if counts:
                    counts[-1] += 1
                expect_item = False
                continue
            if kind == "punct" and text == "," and counts:
                self.i += 1
                expect_item = True
            elif kind == "punct" and text == "]" and counts:
                self.i += 1
                n = counts.pop()
                leaf_depth = self._close_list(shape, len(counts), n, leaf_depth, leaf_depth)
                if counts:
                    counts[-1] += 1
            elif kind == "punct" and text == ">" and not counts:
                self.i += 1
                return [shape[d] for d in range(len(shape))]
            else:
                expected = "',' or ']'" if counts else "'>'"
                raise self.error(f"expected {expected} in dense literal, found {self.found()}")

    def _close_list(self, shape: dict, depth: int, n: int, leaf_depth, default_leaf):
        """Record that a list at ``depth`` held ``n`` items; checks rectangular nesting."""
        if depth in shape:
            if shape[depth] != n:
                raise self.error_at(self.i - 1, f"dense literal is not rectangular: expected "
                                                f"{shape[depth]} elements, found {n}")
        else:
            shape[depth] = n
        return leaf_depth if leaf_depth is not None else default_leaf

    def _dense_item(self, kind: str, text: str):
        if kind in _NUMBER_KINDS:
            self.i += 1
            return kind, text
        if kind == "ident" and text in ("true", "false"):
            self.i += 1
            return "bool", text
        if text == "(" and kind == "punct":
            self.i += 1
            real = self._dense_number("as real part")
            self.expect(",", "between real and imaginary parts")
            imag = self._dense_number("as imaginary part")
            self.expect(")", "to close complex value")
            return "complex", (real, imag)
        raise self.error(f"expected dense element, found {self.found()}")

    def _dense_number(self, context: str):
        kind, text = self.kinds[self.i], self.texts[self.i]
        if kind not in _NUMBER_KINDS:
            raise self.error(f"expected number {context}, found {self.found()}")
        self.i += 1
        return kind, text


# -- conversion (no parser state needed) -------------------------------------------------

def _array_from_hex(digits: str, typ: TensorType) -> np.ndarray:
    try:
        data = literals.hex_to_bytes(digits)
    except ValueError as exc:
        raise ValueError(f"bad hex string: {exc}") from None
    dtype = numpy_dtype(typ.element_type)
    count = typ.num_elements
    if len(data) == dtype.itemsize and count != 1:
        flat = np.frombuffer(data, dtype=_storage_dtype(dtype))
        return _splat(_finish_ints(flat, typ), typ)
    if len(data) != count * dtype.itemsize:
        raise ValueError(f"hex data has {len(data)} bytes, expected {count * dtype.itemsize} "
                         f"({count} elements of {dtype.itemsize} bytes)")
    flat = np.frombuffer(data, dtype=_storage_dtype(dtype))
    return _finish_ints(flat.reshape(typ.shape).copy(), typ)


def _splat(one: np.ndarray, typ: TensorType) -> np.ndarray:
    """One element held as every element of ``typ``: a read-only view with zero strides,
    one element of memory whatever the shape (see ``DenseElementsAttr``)."""
    return np.broadcast_to(one.reshape(()), typ.shape)


def _storage_dtype(dtype: np.dtype) -> np.dtype:
    """How raw bytes are read: narrow ints and bools as uint8, fixed up by _finish_ints."""
    if dtype == np.bool_ or (dtype.itemsize == 1 and dtype.name in ("int2", "int4", "uint2",
                                                                     "uint4")):
        return np.dtype(np.uint8)
    return dtype


def _finish_ints(raw: np.ndarray, typ: TensorType) -> np.ndarray:
    """Bytes of i1/i2/i4/ui2/ui4 -> values (masked to the width, sign-extended)."""
    dtype = numpy_dtype(typ.element_type)
    if raw.dtype == dtype:
        return raw
    if dtype == np.bool_:
        return raw != 0
    elem = typ.element_type
    if isinstance(elem, QuantizedType):
        elem = elem.storage_type
    width = elem.width
    values = raw.astype(np.int16) & ((1 << width) - 1)
    if elem.signed:
        values = np.where(values >= 1 << (width - 1), values - (1 << width), values)
    return values.astype(dtype)


def _array_from_elements(elements: list, shape: list, typ: TensorType) -> np.ndarray:
    elem = typ.element_type
    if isinstance(elem, QuantizedType):
        elem = elem.storage_type
    dtype = numpy_dtype(elem)
    if not elements:
        if typ.num_elements != 0:
            raise ValueError(f"parsed zero elements, but type {typ} has {typ.num_elements}")
        return np.zeros(typ.shape, dtype=dtype)
    if isinstance(elem, FloatType):
        flat = _floats(elements, elem, dtype)
    elif isinstance(elem, ComplexType):
        flat = _complexes(elements, elem, dtype)
    elif isinstance(elem, (IntegerType, IndexType)):
        flat = _integers(elements, elem, dtype)
    else:  # reported as a ParseError by the caller, like every other bad literal
        raise ValueError(f"unsupported element type {elem}")  # noqa: TRY004
    if not shape:  # one value without brackets: a splat
        if len(flat) != 1:
            raise ValueError("expected a single value")
        return _splat(flat, typ)
    if tuple(shape) != typ.shape:
        dims = "x".join(str(d) for d in shape)
        raise ValueError(f"literal has shape [{dims}] but the type has shape "
                         f"[{'x'.join(str(d) for d in typ.shape)}]")
    return flat.reshape(typ.shape)


def _floats(elements: list, elem: FloatType, dtype: np.dtype) -> np.ndarray:
    if any(kind != "float" and kind != "int" for kind, _ in elements):
        return np.array([_float_value(kind, text, elem, dtype) for kind, text in elements],
                        dtype=dtype)
    values = np.array([float(text) for _, text in elements], dtype=np.float64)
    with np.errstate(over="ignore"):  # out of the type's range: +-inf, as numpy rounds
        return values.astype(dtype)


def _float_value(kind: str, text, elem, dtype: np.dtype):
    if kind == "hex":
        bits = int(text, 16)
        if bits >= 1 << (8 * dtype.itemsize):
            raise ValueError(f"hex float {text} too large for {elem}")
        return np.array([bits], dtype=f"u{dtype.itemsize}").view(dtype)[0]
    if kind in ("float", "int"):
        return np.array(float(text)).astype(dtype)
    raise ValueError(f"expected a float value for {elem}, found {_show(kind, text)}")


def _complexes(elements: list, elem: ComplexType, dtype: np.dtype) -> np.ndarray:
    part = numpy_dtype(elem.element_type)
    values = []
    for kind, text in elements:
        if kind != "complex":
            raise ValueError(f"expected (re, im) for {elem}, found {_show(kind, text)}")
        real = _float_value(*text[0], elem.element_type, part)
        imag = _float_value(*text[1], elem.element_type, part)
        values.append(complex(float(real), float(imag)))
    return np.array(values, dtype=dtype)


def _integers(elements: list, elem, dtype: np.dtype) -> np.ndarray:
    is_bool = isinstance(elem, IntegerType) and elem.width == 1
    values = []
    for kind, text in elements:
        if kind == "int":
            values.append(int(text))
        elif kind == "hex":
            values.append(int(text, 16))
        elif kind == "bool" and is_bool:
            values.append(1 if text == "true" else 0)
        else:
            raise ValueError(f"expected an integer for {elem}, found {_show(kind, text)}")
    if is_bool:
        if any(v not in (0, 1) for v in values):
            raise ValueError("i1 values must be true, false, 0 or 1")
        return np.array(values, dtype=np.bool_)
    width = 64 if isinstance(elem, IndexType) else elem.width
    signed = isinstance(elem, IndexType) or elem.signed
    low, high = integer_range(elem)
    for v in values:
        if v < low or v > high:
            raise ValueError(f"integer constant {v} out of range for {elem}")
    if signed and width <= 64:
        wrapped = [v - (1 << width) if v >= 1 << (width - 1) else v for v in values]
        return np.array(wrapped, dtype=np.int64).astype(dtype)
    return np.array(values, dtype=np.uint64).astype(dtype)


def _show(kind: str, text) -> str:
    return "a complex value" if kind == "complex" else f"'{text}'"
