"""Attributes and types -> MLIR text, exactly as upstream MLIR prints them.

Floats go through ``literals.format_float``/``format_float_array`` (MLIR's two-attempt float
printing); dense literals follow MLIR's rules: a splat prints one value, more than 100
elements print as a hex blob of raw little-endian bytes (i1/i2/i4 one byte each, narrow ints
masked to their width), an empty tensor prints ``dense<>``, anything else nested lists.
Dictionary entries are printed sorted by name (MLIR's DictionaryAttr is sorted).
"""
from __future__ import annotations

import re

import numpy as np

from stablehlo.ir.attributes import (
    ArrayAttr,
    Attribute,
    BoolAttr,
    ConvDimensionNumbersAttr,
    DenseArrayAttr,
    DenseElementsAttr,
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
    held_as_splat,
)
from stablehlo.ir.sharding import (
    GspmdShardingAttr,
    ManualAxesAttr,
    MeshAttr,
    ShardingAttr,
    ShardingPerValueAttr,
)
from stablehlo.ir.types import (
    F64,
    I64,
    ComplexType,
    FloatType,
    FunctionType,
    IntegerType,
    QuantizedType,
    TensorType,
    TupleType,
    Type,
)
from stablehlo.text import literals
from stablehlo.text.struct_attrs import DOTTED_ENUMS, ELIDE_DEFAULTS, STRUCT_FIELDS

HEX_THRESHOLD = 100  # MLIR prints dense literals with more elements as hex
_BARE_ID_RE = re.compile(r"[A-Za-z_][\w$.]*$")
_SYMBOL_RE = re.compile(r"[A-Za-z_][\w$.\-]*$")


# -- types -------------------------------------------------------------------------------

def print_type(t: Type) -> str:
    if isinstance(t, TensorType):
        dims = "".join(("?" if d is None else str(d)) + "x" for d in t.shape)
        enc = "" if t.encoding is None else ", " + print_attribute(t.encoding)
        return f"tensor<{dims}{print_type(t.element_type)}{enc}>"
    if isinstance(t, QuantizedType):
        return _print_quantized(t)
    if isinstance(t, FunctionType):
        ins = ", ".join(print_type(x) for x in t.inputs)
        return f"({ins}) -> {print_result_types(t.results)}"
    if isinstance(t, TupleType):
        return "tuple<" + ", ".join(print_type(x) for x in t.types) + ">"
    return str(t)


def print_result_types(types) -> str:
    """The right side of ``->``: a lone non-function type bare, anything else in parens."""
    if len(types) == 1 and not isinstance(types[0], FunctionType):
        return print_type(types[0])
    return "(" + ", ".join(print_type(x) for x in types) + ")"


def _print_quantized(t: QuantizedType) -> str:
    storage = print_type(t.storage_type)
    if t.storage_min is not None:
        storage += f"<{t.storage_min}:{t.storage_max}>"
    head = f"{storage}:{print_type(t.expressed_type)}"
    if t.axis is not None:
        head += f":{t.axis}"
    params = []
    for scale, zero_point in zip(t.scales, t.zero_points):
        text = _format_scale(scale)
        params.append(f"{text}:{zero_point}" if zero_point != 0 else text)
    body = "{" + ",".join(params) + "}" if t.axis is not None else params[0]
    return f"!quant.uniform<{head}, {body}>"


def _format_scale(scale: float) -> str:
    """MLIR prints scales with its float printer on the double value (``5.000000e-01``,
    ``0.0039215482917486456``)."""
    return literals.format_float(scale, "f64")


# -- attributes --------------------------------------------------------------------------

def print_attribute(attr: Attribute) -> str:
    printer = _PRINTERS.get(type(attr))
    if printer is None:
        raise TypeError(f"cannot print attribute {attr!r}")
    return printer(attr)


def print_attr_entries(items) -> str:
    """``name = value, flag`` for (name, Attribute) pairs, sorted by name."""
    parts = []
    for name, value in sorted(items, key=lambda item: item[0]):
        key = name if _BARE_ID_RE.match(name) else print_string(name)
        parts.append(key if isinstance(value, UnitAttr) else f"{key} = {print_attribute(value)}")
    return ", ".join(parts)


def print_string(value: str) -> str:
    """A quoted string with MLIR's escapes (``\\\\``, and ``\\XX`` for '"' and non-printables)."""
    data = value.encode("utf-8", "surrogateescape")
    if all(0x20 <= b < 0x7F and b not in (0x22, 0x5C) for b in data):
        return f'"{value}"'
    out = []
    for b in data:
        if b == 0x5C:
            out.append("\\\\")
        elif 0x20 <= b < 0x7F and b != 0x22:
            out.append(chr(b))
        else:
            out.append(f"\\{b:02X}")
    return '"' + "".join(out) + '"'


def print_symbol(name: str) -> str:
    return "@" + (name if _SYMBOL_RE.match(name) else print_string(name))


def _print_integer(attr: IntegerAttr) -> str:
    return f"{attr.value} : {print_type(attr.type)}"


def _print_float(attr: FloatAttr) -> str:
    return f"{literals.format_float(attr.value, attr.type.name)} : {attr.type}"


def _print_array(attr: ArrayAttr) -> str:
    """``[...]``; elements that are i64 integers or (non-hex) f64 floats drop their type,
    as MLIR does inside arrays."""
    items = []
    for value in attr.values:
        if isinstance(value, IntegerAttr) and value.type == I64:
            items.append(str(value.value))
            continue
        if isinstance(value, FloatAttr) and value.type == F64:
            text = literals.format_float(value.value, "f64")
            if not text.startswith("0x"):
                items.append(text)
                continue
        items.append(print_attribute(value))
    return "[" + ", ".join(items) + "]"


def _print_dense_array(attr: DenseArrayAttr) -> str:
    elem = attr.element_type
    if not attr.values:
        return f"array<{print_type(elem)}>"
    if isinstance(elem, FloatType):
        items = literals.format_float_array(np.array(attr.values, dtype=np.float64), elem.name)
    elif isinstance(elem, IntegerType) and elem.width == 1:
        items = ["true" if v else "false" for v in attr.values]
    else:
        items = [str(int(v)) for v in attr.values]
    return f"array<{print_type(elem)}: {', '.join(items)}>"


def _print_struct(attr: StructAttr) -> str:
    elide = ELIDE_DEFAULTS.get(attr.kind, frozenset())
    defaults = STRUCT_FIELDS.get(attr.kind, {})
    parts = []
    for name, value in attr.fields:
        if name in elide and value == defaults.get(name):
            continue
        parts.append(f"{name} = {_struct_value(value)}")
    return f"#{attr.dialect}.{attr.kind}<{', '.join(parts)}>"


def _struct_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return literals.format_float(value, "f64")
    if isinstance(value, tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    if isinstance(value, Type):
        return print_type(value)
    return print_attribute(value)


def print_enum(attr: EnumAttr) -> str:
    if attr.kind in DOTTED_ENUMS:
        return f"#{attr.dialect}.{attr.kind}<{attr.value}>"
    return f"#{attr.dialect}<{attr.kind} {attr.value}>"


def conv_layouts(attr: ConvDimensionNumbersAttr) -> str:
    """``[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]``."""
    def layout(first, second, spatial, names):
        items = [""] * (len(spatial) + 2)
        items[first], items[second] = names
        for index, dim in enumerate(spatial):
            items[dim] = str(index)
        return "[" + ", ".join(items) + "]"

    lhs = layout(attr.input_batch_dimension, attr.input_feature_dimension,
                 attr.input_spatial_dimensions, ("b", "f"))
    rhs = layout(attr.kernel_output_feature_dimension, attr.kernel_input_feature_dimension,
                 attr.kernel_spatial_dimensions, ("o", "i"))
    out = layout(attr.output_batch_dimension, attr.output_feature_dimension,
                 attr.output_spatial_dimensions, ("b", "f"))
    return f"{lhs}x{rhs}->{out}"


# -- dense elements ----------------------------------------------------------------------

def print_dense(attr: DenseElementsAttr) -> str:
    return f"dense<{dense_body(attr)}> : {print_type(attr.type)}"


def dense_body(attr: DenseElementsAttr) -> str:
    """What goes between ``dense<`` and ``>``."""
    arr = attr.array
    if arr.size == 0:
        return ""
    elem = attr.type.element_type
    if isinstance(elem, QuantizedType):
        elem = elem.storage_type
    if held_as_splat(arr):  # one element, whatever the shape: never materialize it
        return _format_elements(np.array([arr[(0,) * arr.ndim]], dtype=arr.dtype), elem)[0]
    flat = np.ascontiguousarray(arr).reshape(-1)
    raw = _raw_bytes(flat, elem)
    itemsize = len(raw) // flat.size
    if raw[:itemsize] * flat.size == raw:  # bitwise splat (also one element)
        return _format_elements(flat[:1], elem)[0]
    if flat.size > HEX_THRESHOLD:
        return '"0x' + literals.bytes_to_hex(raw) + '"'
    return _nest(_format_elements(flat, elem), arr.shape)


def _raw_bytes(flat: np.ndarray, elem: Type) -> bytes:
    if isinstance(elem, IntegerType) and elem.width in (1, 2, 4):
        if elem.width == 1:
            return flat.astype(np.uint8).tobytes()
        mask = (1 << elem.width) - 1
        return (flat.astype(np.int16) & mask).astype(np.uint8).tobytes()
    return flat.tobytes()


def _format_elements(flat: np.ndarray, elem: Type) -> list[str]:
    if isinstance(elem, FloatType):
        return literals.format_float_array(flat, elem.name)
    if isinstance(elem, ComplexType):
        part = elem.element_type.name
        reals = literals.format_float_array(flat.real, part)
        imags = literals.format_float_array(flat.imag, part)
        return [f"({r},{i})" for r, i in zip(reals, imags)]
    if isinstance(elem, IntegerType) and elem.width == 1:
        return ["true" if v else "false" for v in flat.tolist()]
    return [str(v) for v in flat.astype(object if flat.dtype == np.uint64 else np.int64)
            .tolist()]


def _nest(items: list[str], shape: tuple) -> str:
    if not shape:
        return items[0]
    for dim in reversed(shape):
        groups = [items[k:k + dim] for k in range(0, len(items), dim)]
        items = ["[" + ", ".join(group) + "]" for group in groups]
    return items[0]


_PRINTERS = {
    IntegerAttr: _print_integer,
    FloatAttr: _print_float,
    BoolAttr: lambda a: "true" if a.value else "false",
    StringAttr: lambda a: print_string(a.value),
    UnitAttr: lambda a: "unit",
    ArrayAttr: _print_array,
    DenseArrayAttr: _print_dense_array,
    DenseElementsAttr: print_dense,
    DictAttr: lambda a: "{" + print_attr_entries(a.items) + "}",
    SymbolRefAttr: lambda a: "::".join(print_symbol(n) for n in (a.name,) + tuple(a.nested)),
    TypeAttr: lambda a: print_type(a.type),
    EnumAttr: print_enum,
    StructAttr: _print_struct,
    ConvDimensionNumbersAttr: lambda a: f"#stablehlo.conv<{conv_layouts(a)}>",
    OpaqueAttr: lambda a: a.text,
    # Shardings print as they were written (stablehlo/ir/sharding.py).
    MeshAttr: lambda a: a.text,
    ShardingAttr: lambda a: a.text,
    ShardingPerValueAttr: lambda a: a.text,
    ManualAxesAttr: lambda a: a.text,
    GspmdShardingAttr: lambda a: print_string(a.value),
}
