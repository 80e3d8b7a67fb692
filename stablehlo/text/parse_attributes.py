"""Attribute parsing: builtin attributes, StableHLO enums and structs, verbatim foreign ones.

``AttributeParser`` is a mixin over ``TypeParser``; ``dense<...>`` literals are decoded in
parse_dense.py. The representation follows the conventions in the shared brief: enums become
``EnumAttr``, ``#stablehlo.gather<...>`` and friends become ``StructAttr`` with every field in
canonical order, shardings (``#sdy.sharding<...>``, ``mhlo.sharding = "..."``) the typed
attributes of parse_sharding.py, anything from a dialect we do not model an ``OpaqueAttr``.
"""
from __future__ import annotations

import re

from stablehlo.ir.attributes import (
    ArrayAttr,
    Attribute,
    BoolAttr,
    ConvDimensionNumbersAttr,
    DenseArrayAttr,
    DictAttr,
    EnumAttr,
    FloatAttr,
    IntegerAttr,
    OpaqueAttr,
    StringAttr,
    StructAttr,
    SymbolRefAttr,
    TypeAttr,
    UnitAttr,
)
from stablehlo.ir.types import (
    F64,
    I64,
    FloatType,
    IndexType,
    IntegerType,
    Type,
    integer_range,
    numpy_dtype,
)
from stablehlo.text.parse_dense import DenseParser
from stablehlo.text.parse_sharding import GSPMD_KEY, ShardingParser
from stablehlo.text.struct_attrs import ENUM_KINDS, REQUIRED_FIELDS, STRUCT_FIELDS

_ESCAPE_RE = re.compile(r"\\(?:([0-9a-fA-F]{2})|(.))", re.DOTALL)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", '"': '"'}
_TYPE_START_KINDS = ("tensor", "bang")


def unescape_string(token: str) -> str:
    """The value of a string token (quotes included in ``token``)."""
    body = token[1:-1]
    if "\\" not in body:
        return body
    out = bytearray()
    pos = 0
    for match in _ESCAPE_RE.finditer(body):
        out += body[pos:match.start()].encode("utf-8", "surrogateescape")
        if match.group(1) is not None:
            out.append(int(match.group(1), 16))
        else:
            out += _SIMPLE_ESCAPES.get(match.group(2), match.group(2)).encode()
        pos = match.end()
    out += body[pos:].encode("utf-8", "surrogateescape")
    return out.decode("utf-8", "surrogateescape")


class AttributeParser(ShardingParser, DenseParser):
    """Mixin: ``parse_attribute``, ``parse_attr_dict``. Expects ``self.attr_aliases``."""

    attr_aliases: dict

    def parse_attribute(self, context: str = "") -> Attribute:
        kind, text = self.kinds[self.i], self.texts[self.i]
        if kind == "string":
            self.i += 1
            return StringAttr(unescape_string(text))
        if kind in ("int", "float", "hex"):
            return self._parse_number_attr()
        if kind == "ident":
            return self._parse_keyword_attr(text, context)
        if kind == "hash":
            return self._parse_hash_attr(text)
        if kind == "symbol":
            return self.parse_symbol_ref()
        if kind == "punct":
            if text == "[":
                self.enter("array attribute")
                try:
                    self.i += 1
                    return ArrayAttr(tuple(self.comma_list(self.parse_attribute, "]",
                                                           "in array attribute")))
                finally:
                    self.leave()
            if text == "{":
                return DictAttr(tuple(self.parse_attr_dict().items()))
            if text == "(":
                return TypeAttr(self.parse_function_type())
        if kind in _TYPE_START_KINDS:
            return TypeAttr(self.parse_type())
        where = f" {context}" if context else ""
        raise self.error(f"expected attribute value{where}, found {self.found()}")

    def parse_attr_dict(self) -> dict:
        """``{name = value, flag, "quoted" = value}`` -> ordered dict of attributes."""
        self.enter("attribute dictionary")
        try:
            return self._attr_dict_body()
        finally:
            self.leave()

    def _attr_dict_body(self) -> dict:
        self.expect("{", "to start attribute dictionary")
        result: dict = {}

        def entry():
            start = self.i
            kind = self.kinds[self.i]
            if kind == "string":
                name = unescape_string(self.advance())
            elif kind == "ident":
                name = self.advance()
            else:
                raise self.error(f"expected attribute name, found {self.found()}")
            if name in result:
                raise self.error_at(start, f"duplicate key '{name}' in dictionary attribute")
            result[name] = self.parse_attribute(f"for '{name}'") if self.accept("=") \
                else UnitAttr()
            # An empty mhlo.sharding (upstream's tests write many) says nothing: kept a string.
            if name == GSPMD_KEY and type(result[name]) is StringAttr \
                    and result[name].value.strip():
                result[name] = self.gspmd_sharding_attr(result[name].value, self.i - 1)

        self.comma_list(entry, "}", "in attribute dictionary")
        return result

    def parse_symbol_ref(self) -> SymbolRefAttr:
        root = self._symbol_name(self.expect_kind("symbol", "symbol reference"))
        nested = []
        while self.accept("::"):
            nested.append(self._symbol_name(self.expect_kind("symbol", "nested symbol")))
        return SymbolRefAttr(root, tuple(nested))

    @staticmethod
    def _symbol_name(token: str) -> str:
        return unescape_string(token[1:]) if token[1:2] == '"' else token[1:]

    # -- numbers -------------------------------------------------------------------------
    def _parse_number_attr(self) -> Attribute:
        start = self.i
        kind, text = self.kinds[self.i], self.advance()
        typ = self.parse_type() if self.accept(":") else None
        if typ is None:
            typ = F64 if kind == "float" else I64
        if isinstance(typ, FloatType):
            if kind == "hex":
                return FloatAttr(self.float_from_bits(int(text, 16), typ, start), typ)
            return FloatAttr(float(text), typ)
        if isinstance(typ, (IntegerType, IndexType)):
            if kind == "float":
                raise self.error_at(start, f"floating point value not valid for type {typ}")
            low, high = integer_range(typ)
            value = self.integer_value(start, low, high, str(typ))
            if isinstance(typ, IntegerType) and typ.width == 1:
                return BoolAttr(bool(value))
            return IntegerAttr(_as_signless(value, low, high), typ)
        raise self.error_at(start, f"invalid type {typ} for a number attribute")

    def float_from_bits(self, bits: int, typ: FloatType, index: int) -> float:
        import numpy as np
        dtype = numpy_dtype(typ)
        if bits >= 1 << (8 * dtype.itemsize):
            raise self.error_at(index, f"hexadecimal float literal too large for {typ}")
        raw = np.array([bits], dtype=f"u{dtype.itemsize}").view(dtype)
        return float(raw.astype(np.float64)[0])

    # -- keywords ------------------------------------------------------------------------
    def _parse_keyword_attr(self, text: str, context: str) -> Attribute:
        if text == "true" or text == "false":
            self.i += 1
            return BoolAttr(text == "true")
        if text == "unit":
            self.i += 1
            return UnitAttr()
        if text == "dense":
            return self.parse_dense()
        if text == "array":
            return self._parse_dense_array()
        if text in ("affine_map", "affine_set", "loc", "distinct", "dense_resource",
                    "sparse", "strided"):
            return self._parse_opaque_attr()
        return TypeAttr(self.parse_type(context))

    def _parse_dense_array(self) -> DenseArrayAttr:
        """``array<i64: 1, 2>``, ``array<i1: true>``, ``array<f32: 1.0>``, ``array<i64>``."""
        self.i += 1
        self.expect("<", "after 'array'")
        elem = self.parse_type("as array element type")
        values: list = []
        if self.accept(":"):
            values = self.comma_list(lambda: self._array_element(elem), ">",
                                     "in array attribute")
        else:
            self.expect(">", "to close array attribute")
        return DenseArrayAttr(elem, tuple(values))

    def _array_element(self, elem: Type):
        kind, text = self.kinds[self.i], self.texts[self.i]
        if isinstance(elem, IntegerType) and elem.width == 1:
            if text in ("true", "false"):
                self.i += 1
                return text == "true"
            return bool(self.integer("in i1 array"))
        if isinstance(elem, FloatType):
            if kind in ("float", "int"):
                self.i += 1
                return float(text)
            if kind == "hex":
                self.i += 1
                return self.float_from_bits(int(text, 16), elem, self.i - 1)
            raise self.error(f"expected float in array, found {self.found()}")
        if kind not in ("int", "hex") or not isinstance(elem, (IntegerType, IndexType)):
            raise self.error(f"expected integer in array<{elem}>, found {self.found()}")
        low, high = integer_range(elem)
        self.i += 1
        return _as_signless(self.integer_value(self.i - 1, low, high, str(elem)), low, high)

    # -- #dialect attributes -------------------------------------------------------------
    def _parse_hash_attr(self, text: str) -> Attribute:
        if text in ("#stablehlo", "#chlo") and self.peek_text() == "<":
            return self._parse_enum(text[1:])
        dialect, _, mnemonic = text[1:].partition(".")
        if dialect in ("stablehlo", "chlo") and mnemonic:
            if mnemonic == "conv":
                return self._parse_conv_attr()
            if mnemonic in STRUCT_FIELDS:
                return self._parse_struct(mnemonic, dialect)
            if mnemonic in ENUM_KINDS:
                self.i += 1
                self.expect("<", f"after '{text}'")
                value = self.ident("enum value")
                self.expect(">", "to close enum attribute")
                return EnumAttr(mnemonic, value, dialect)
        if text in self.attr_aliases and self.peek_text() != "<":
            self.i += 1
            return self.attr_aliases[text]
        sharding = self.parse_sdy_attribute()
        if sharding is not None:
            return sharding
        return self._parse_opaque_attr()

    def _parse_opaque_attr(self) -> OpaqueAttr:
        start = self.i
        self.i += 1
        if self.at("<") or self.at("("):
            self.skip_balanced()
        return OpaqueAttr(self.source_since(start))

    def _parse_enum(self, dialect: str) -> EnumAttr:
        """``#stablehlo<comparison_direction LT>``."""
        self.i += 1
        self.expect("<", "after dialect name")
        kind = self.ident("enum kind")
        value = self.ident("enum value")
        self.expect(">", "to close enum attribute")
        return EnumAttr(kind, value, dialect)

    def _parse_struct(self, mnemonic: str, dialect: str) -> StructAttr:
        self.i += 1
        self.expect("<", f"after '#{dialect}.{mnemonic}'")
        return self.parse_struct_body(mnemonic, dialect)

    def parse_struct_body(self, mnemonic: str, dialect: str = "stablehlo") -> StructAttr:
        """``name = value, ...>`` (the ``<`` already consumed) -> canonical StructAttr."""
        self.enter(f"#{dialect}.{mnemonic}")
        try:
            return self._struct_fields(mnemonic, dialect)
        finally:
            self.leave()

    def _struct_fields(self, mnemonic: str, dialect: str) -> StructAttr:
        fields = STRUCT_FIELDS[mnemonic]
        values: dict = {}

        def entry():
            start = self.i
            name = self.ident("struct field name", f"in #{dialect}.{mnemonic}")
            if name not in fields:
                known = ", ".join(fields)
                raise self.error_at(start, f"unknown field '{name}' in #{dialect}.{mnemonic}"
                                    f" (known: {known})")
            if name in values:
                raise self.error_at(start, f"duplicate field '{name}'")
            self.expect("=", f"after '{name}'")
            values[name] = self._struct_value(fields[name])

        start = self.i
        self.comma_list(entry, ">", f"in #{dialect}.{mnemonic}")
        missing = [name for name in fields
                   if name in REQUIRED_FIELDS.get(mnemonic, ()) and name not in values]
        if missing:
            raise self.error_at(start, f"#{dialect}.{mnemonic} is missing field "
                                       f"'{missing[0]}'")
        ordered = tuple((name, values.get(name, default)) for name, default in fields.items())
        return StructAttr(mnemonic, ordered, dialect)

    def _struct_value(self, default):
        if isinstance(default, tuple):
            self.expect("[", "to start dimension list")
            return tuple(self.comma_list(lambda: self.integer("in dimension list"), "]"))
        if isinstance(default, bool):
            text = self.ident("true or false")
            if text not in ("true", "false"):
                raise self.error_at(self.i - 1, f"expected true or false, found '{text}'")
            return text == "true"
        if isinstance(default, int):
            return self.integer()
        if isinstance(default, float):
            if self.kinds[self.i] == "hex":  # how the printer writes what decimals cannot
                start = self.i
                return self.float_from_bits(int(self.advance(), 16), F64, start)
            if self.kinds[self.i] not in ("float", "int"):
                raise self.error(f"expected float, found {self.found()}")
            return float(self.advance())
        if default is None or isinstance(default, Type):
            return self.parse_type()
        return self.parse_attribute()

    def _parse_conv_attr(self) -> ConvDimensionNumbersAttr:
        """``#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>`` (raw form)."""
        self.i += 1
        self.expect("<", "after '#stablehlo.conv'")
        result = self.parse_conv_dims()
        self.expect(">", "to close #stablehlo.conv")
        return result

    def parse_conv_dims(self) -> ConvDimensionNumbersAttr:
        """``[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]`` as in pretty convolution syntax."""
        lhs = self._conv_layout("b", "f")
        if self.kinds[self.i] == "ident" and self.texts[self.i] == "x":
            self.i += 1
        else:
            raise self.error(f"expected 'x' between convolution layouts, found {self.found()}")
        rhs = self._conv_layout("i", "o")
        self.expect("->", "in convolution dimension numbers")
        out = self._conv_layout("b", "f")
        return ConvDimensionNumbersAttr(lhs[0], lhs[1], lhs[2], rhs[0], rhs[1], rhs[2],
                                        out[0], out[1], out[2])

    def _conv_layout(self, first: str, second: str) -> tuple:
        """One ``[b, 0, 1, f]`` list -> (index of first, index of second, spatial dims)."""
        start = self.i
        self.expect("[", "to start convolution layout")
        items = self.comma_list(self._conv_dim, "]", "in convolution layout")
        spatial = {}
        named = {}
        for position, item in enumerate(items):
            table = spatial if isinstance(item, int) else named
            if item in table:
                raise self.error_at(start, f"duplicate '{item}' in convolution layout")
            table[item] = position
        if set(named) != {first, second} or sorted(spatial) != list(range(len(spatial))):
            raise self.error_at(start, f"convolution layout must name '{first}', '{second}' "
                                       "and spatial dimensions 0..N-1 once each")
        return named[first], named[second], tuple(spatial[d] for d in range(len(spatial)))

    def _conv_dim(self):
        if self.kinds[self.i] == "int":
            return self.integer("as convolution dimension")
        return self.ident("convolution dimension (b, f, i, o or a number)")


def _as_signless(value: int, low: int, high: int) -> int:
    """A signless integer written in its unsigned spelling is its two's complement value,
    as in MLIR: ``255 : i8`` and ``array<i8: 255>`` hold -1."""
    return value - (high + 1) if low < 0 and value > high >> 1 else value
