"""Type parsing: element types, tensors, tuples, tokens, quantized and function types.

``TypeParser`` is a mixin over ``Cursor``. Simple tensor types arrive as one ``tensor`` token
and are memoized by their text; everything else is parsed piecewise
(see Note [shape lexing] in lexer.py).
"""
from __future__ import annotations

import re
import struct

from stablehlo.ir.types import (
    ComplexType,
    FloatType,
    FunctionType,
    FutureType,
    IndexType,
    IntegerType,
    OpaqueType,
    QuantizedType,
    TensorType,
    TokenType,
    TupleType,
    Type,
    complex_part_problem,
    parse_element_type_name,
)
from stablehlo.text.cursor import Cursor

_TENSOR_CACHE: dict[str, TensorType] = {}
_ELEMENT_CACHE: dict[str, Type] = {}
# ``x4x?xf32`` style identifiers inside a shape: dims then (maybe) the element type.
_SHAPE_TAIL_RE = re.compile(r"x((?:\d+x)*)(\w*)$")
_SIMPLE_ELEMENT_RE = re.compile(r"(?:[su]?i\d+|bf16|f16|f32|f64|tf32|index|f\d+E\w+)$")
_TENSOR_TOKEN_RE = re.compile(r"tensor<((?:(?:\d+|\?)x)*)(.*)>$")
# Builtin types we keep as text (``vector<...>``, ``memref<...>``); foreign dialect types
# (``!foo.bar<...>``) are kept as text too.
_OPAQUE_KEYWORDS = ("vector", "memref", "none")
_MAX_DIMENSION = str((1 << 63) - 1)
# What a tensor may hold: numbers, quantized numbers, and element types of other dialects
# (kept opaque).
_ELEMENT_TYPES = (IntegerType, FloatType, ComplexType, QuantizedType, IndexType, OpaqueType)


def element_type_from_name(name: str) -> Type | None:
    """Cached element type for a keyword such as ``f32``; None if it is not one."""
    cached = _ELEMENT_CACHE.get(name)
    if cached is None:
        if not _SIMPLE_ELEMENT_RE.match(name):
            return None
        try:
            cached = parse_element_type_name(name)
        except ValueError:
            return None
        _ELEMENT_CACHE[name] = cached
    return cached


def unknown_element_message(name: str) -> str:
    """Why ``name`` is not an element type (an integer of a width StableHLO lacks, or not a
    type at all)."""
    try:
        parse_element_type_name(name)
    except ValueError as exc:
        return str(exc)
    return f"unknown element type '{name}'"


def dimension_size(text: str) -> int:
    """A static dimension's digits -> its size; ValueError when it exceeds int64."""
    if len(text) > len(_MAX_DIMENSION) or int(text) > int(_MAX_DIMENSION):
        raise ValueError(f"dimension size {text[:30]} exceeds the int64 range")
    return int(text)


def tensor_from_token(text: str) -> TensorType:
    """The TensorType of a ``tensor`` token (``tensor<3x?xf32>``); ValueError says what is
    wrong with a dimension or the element type."""
    cached = _TENSOR_CACHE.get(text)
    if cached is not None:
        return cached
    match = _TENSOR_TOKEN_RE.match(text)
    dims = tuple(None if d == "?" else dimension_size(d) for d in match.group(1).split("x")[:-1])
    elem_text = match.group(2)
    if elem_text.startswith("complex<"):
        elem = parse_element_type_name(elem_text)
    else:
        elem = element_type_from_name(elem_text)
    if elem is None:
        raise ValueError(unknown_element_message(elem_text))
    result = TensorType(dims, elem)
    _TENSOR_CACHE[text] = result
    return result


class TypeParser(Cursor):
    """Mixin: ``parse_type`` and friends. Expects ``self.type_aliases`` (name -> Type)."""

    type_aliases: dict

    def parse_type(self, context: str = "") -> Type:
        kind, text = self.kinds[self.i], self.texts[self.i]
        if kind == "tensor":
            self.i += 1
            try:
                return tensor_from_token(text)
            except ValueError as exc:
                raise self.error_at(self.i - 1, str(exc)) from None
        if kind == "ident":
            return self._parse_keyword_type(text)
        if kind == "bang":
            return self._parse_dialect_type(text)
        if text == "(":
            return self.parse_function_type()
        where = f" {context}" if context else ""
        raise self.error(f"expected type{where}, found {self.found()}")

    def parse_type_list(self, close: str = ")") -> list[Type]:
        """Types separated by ',' up to ``close`` (opening already consumed)."""
        return self.comma_list(self.parse_type, close, "in type list")

    def parse_function_type(self) -> FunctionType:
        """``(T, ...) -> R`` or ``(T, ...) -> (R, ...)``."""
        self.enter("function type")
        try:
            self.expect("(", "to start a function type")
            inputs = self.parse_type_list(")")
            self.expect("->", "in function type")
            results = self.parse_result_types()
        finally:
            self.leave()
        return FunctionType(tuple(inputs), tuple(results))

    def parse_result_types(self) -> list[Type]:
        """A single type or a parenthesised list (the right side of ``->``)."""
        if self.at("("):
            # ``(T) -> R`` as a single result is a function type; a list is ``(T, U)``.
            start = self.i
            self.i += 1
            types = self.parse_type_list(")")
            if self.at("->"):
                self.i = start
                return [self.parse_function_type()]
            return types
        return [self.parse_type()]

    # -- keyword types -------------------------------------------------------------------
    def _parse_keyword_type(self, text: str) -> Type:
        elem = element_type_from_name(text)
        if elem is not None:
            self.i += 1
            return elem
        if text == "tensor":
            return self._parse_tensor()
        if text == "complex":
            self.i += 1
            return self._complex_body()
        if text == "tuple":
            self.enter("tuple type")
            try:
                self.i += 1
                self.expect("<", "after 'tuple'")
                return TupleType(tuple(self.parse_type_list(">")))
            finally:
                self.leave()
        if text in _OPAQUE_KEYWORDS:
            return self._parse_opaque_type()
        if _SIMPLE_ELEMENT_RE.match(text):
            raise self.error(unknown_element_message(text))
        raise self.error(f"expected type, found {self.found()}")

    def _parse_tensor(self) -> TensorType:
        self.enter("tensor type")
        try:
            return self._tensor_body()
        finally:
            self.leave()

    def _tensor_body(self) -> TensorType:
        self.i += 1
        self.expect("<", "after 'tensor'")
        if self.at("*"):
            raise self.error("unranked tensors are not supported by StableHLO")
        dims: list = []
        while True:
            kind, text = self.kinds[self.i], self.texts[self.i]
            if kind == "int" and not text.startswith("-"):
                dims.append(self._dimension(self.i, text))
            elif kind == "punct" and text == "?":
                dims.append(None)
            else:
                elem = self._tensor_element()
                break
            self.i += 1
            # after a dimension comes ``x``, maybe with more dims and the element glued on
            text = self.texts[self.i]
            match = _SHAPE_TAIL_RE.match(text) if self.kinds[self.i] == "ident" else None
            if match is None:
                raise self.error(f"expected 'x' in tensor shape, found {self.found()}")
            dims.extend(self._dimension(self.i, d) for d in match.group(1).split("x")[:-1])
            self.i += 1
            if match.group(2):
                elem = self._glued_element(match.group(2))
                break
        encoding = None
        if self.accept(","):
            encoding = self.parse_attribute()  # type: ignore[attr-defined]
        self.expect(">", "to close tensor type")
        return TensorType(tuple(dims), elem, encoding)

    def _tensor_element(self) -> Type:
        """A tensor's element type written as its own token(s): a scalar type only."""
        token = self.i
        elem = self.parse_type("as tensor element type")
        if not isinstance(elem, _ELEMENT_TYPES):
            raise self.error_at(token, f"tensor element type must be a number or quantized "
                                       f"type, got {elem}")
        return elem

    def _dimension(self, index: int, text: str) -> int:
        try:
            return dimension_size(text)
        except ValueError as exc:
            raise self.error_at(index, str(exc)) from None

    def _glued_element(self, name: str) -> Type:
        """The element type written right after ``x`` (``x4xf32`` -> ``f32``)."""
        if name == "complex":
            return self._complex_body()
        elem = element_type_from_name(name)
        if elem is None:
            raise self.error_at(self.i - 1, unknown_element_message(name))
        return elem

    def _complex_body(self) -> ComplexType:
        """``<f32>`` after ``complex``."""
        self.enter("complex type")
        try:
            self.expect("<", "after 'complex'")
            inner = self.parse_type()
            self.expect(">", "to close complex type")
        finally:
            self.leave()
        problem = complex_part_problem(inner)
        if problem:
            raise self.error(problem)
        return ComplexType(inner)

    # -- dialect types -------------------------------------------------------------------
    def _parse_dialect_type(self, text: str) -> Type:
        if text == "!stablehlo.token":
            self.i += 1
            return TokenType()
        if text == "!openhlo.future":
            self.i += 1
            self.expect("<", "after '!openhlo.future'")
            return FutureType(tuple(self.parse_type_list(">")))
        if text == "!quant.uniform":
            self.enter("quantized type")
            try:
                return self._parse_quant_uniform()
            finally:
                self.leave()
        if text in self.type_aliases:
            self.i += 1
            return self.type_aliases[text]
        return self._parse_opaque_type()

    def _parse_opaque_type(self) -> OpaqueType:
        start = self.i
        self.i += 1
        if self.at("<"):
            self.skip_balanced()
        return OpaqueType(self.source_since(start))

    def _parse_quant_uniform(self) -> QuantizedType:
        """``!quant.uniform<i8[<min:max>]:f32[:axis], scale[:zp]>`` or ``{s:zp, ...}``."""
        self.i += 1
        self.expect("<", "after '!quant.uniform'")
        storage = self.parse_type("as quantized storage type")
        if not isinstance(storage, IntegerType):
            raise self.error(f"quantized storage type must be an integer type, got {storage}")
        storage_min = storage_max = None
        if self.accept("<"):
            storage_min = self.integer("as storage minimum")
            self.expect(":", "in storage range")
            storage_max = self.integer("as storage maximum")
            self.expect(">", "to close storage range")
        self.expect(":", "after quantized storage type")
        expressed = self.parse_type("as quantized expressed type")
        if not isinstance(expressed, FloatType):
            raise self.error(f"quantized expressed type must be a float type, got {expressed}")
        axis = None
        if self.accept(":"):
            axis = self.integer("as quantization axis")
        self.expect(",", "after quantized types")
        if axis is not None:
            self.expect("{", "to start per-axis scales")
            params = self.comma_list(self._quant_param, "}", "in per-axis scales")
        else:
            params = [self._quant_param()]
        self.expect(">", "to close quantized type")
        scales = tuple(s for s, _ in params)
        zero_points = tuple(z for _, z in params)
        return QuantizedType(storage, expressed, scales, zero_points, axis, storage_min,
                             storage_max)

    def _quant_param(self) -> tuple[float, int]:
        kind = self.kinds[self.i]
        if kind == "hex":  # how the printer writes a scale short decimals cannot hold
            bits = self.integer_value(self.i, 0, (1 << 64) - 1, "an f64 scale")
            self.i += 1
            scale = struct.unpack("<d", bits.to_bytes(8, "little"))[0]
        elif kind in ("float", "int"):
            scale = float(self.advance())
        else:
            raise self.error(f"expected quantization scale, found {self.found()}")
        if self.kinds[self.i] == "ident" and self.texts[self.i][:1] in "eE":
            raise self.error("write exponents with a '.' (for example 1.0e-3)")
        zero_point = 0
        if self.accept(":"):
            zero_point = self.integer("as zero point")
        return scale, zero_point
