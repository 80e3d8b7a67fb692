"""The attributes each native kernel reads, declared once: the typed boundary to native code.

For every op whose native kernel reads attributes, ``SCHEMAS`` lists the fields it needs, in
order. The lowering encodes an op's attributes into a *record* by that schema (``encode``):
a flat list with one value per field, of the field's kind. The C++ side receives it as an
``AttrRecord`` (native/kernel.h) and decodes it into the op's struct, generated from these
schemas into native/_generated/kernel_attrs.h (``python -m pjrt.plugins.cpu.codegen.headers``;
tests/test_kernel_attrs.py checks that the committed header is current and that the built
library decodes the same fields in the same order). Kernels thus read typed members, never
attributes by name.

A field's ``path`` is looked up in the op's plain attributes (attrs.py: ``plain_attrs``
plus ``region_attrs`` and, for collectives, ``collective_attrs``); dots step into structured
attributes (``dimension_numbers.offset_dims``) and into lists (``comparator.0``).
A field whose attribute is absent takes its ``default``; a required one (``REQUIRED``)
raises ``Unsupported`` naming the op and the attribute, so the op falls back to the
interpreter as it always has. ``OPTIONAL`` fields arrive in C++ as a ``std::optional``
(their default depends on shapes the kernel knows). A value of the wrong kind is a
VerificationError naming the op and the attribute.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from stablehlo.errors import VerificationError
from xla_core.quantization.weight_only_dot import WEIGHT_ONLY_DOT


class Kind(enum.Enum):
    """What one field holds (``text``, for errors), its C++ member type and the AttrReader
    method that decodes it from a record (native/kernel.h)."""
    INT = ("an integer", "int64_t", "integer")
    INTS = ("a list of integers", "std::vector<int64_t>", "ints")
    INT_ROWS = ("a list of integer lists", "std::vector<std::vector<int64_t>>", "int_rows")
    BOOL = ("a bool", "bool", "boolean")
    FLOAT = ("a number", "double", "real")
    STR = ("a string", "std::string", "string")  # enums (comparison_direction), names
    PRESENT = ("whether it is there", "bool", "boolean")

    def __init__(self, text: str, cpp: str, getter: str):
        self.text = text
        self.cpp = cpp
        self.getter = getter


REQUIRED = object()   # absent: Unsupported (the op falls back to the interpreter)
OPTIONAL = object()   # absent: std::nullopt in C++


@dataclass(frozen=True)
class Field:
    member: str           # the C++ member name
    kind: Kind
    path: str             # where in the plain attributes the value comes from
    default: object = REQUIRED


@dataclass(frozen=True)
class Schema:
    op: str               # "stablehlo.gather"
    struct: str           # "GatherAttrs"
    fields: tuple


def _ints(member, path=None, default=REQUIRED):
    return Field(member, Kind.INTS, path or member, default)


def _int(member, path=None, default=REQUIRED):
    return Field(member, Kind.INT, path or member, default)


_COMBINER = Field("combiner", Kind.STR, "combiner", "")
# region_attrs' pair_picks: the (value, index) selection table of an argmax-like body
_PAIR_PICKS = _ints("pair_picks", default=[])
# region_attrs' comparator: [direction, compare_type or None]
_COMPARATOR = (Field("comparator_direction", Kind.STR, "comparator.0", OPTIONAL),
               Field("comparator_type", Kind.STR, "comparator.1", ""))
# collective_attrs (collectives.py): the grid and the process groups
_GROUPS = (_int("num_replicas"), _int("num_partitions"), _int("channel_id", default=0),
           Field("collective_groups", Kind.INT_ROWS, "collective_groups"))
_WINDOW = (_ints("window_dimensions"), _ints("window_strides", default=OPTIONAL))
_PADDING = Field("padding", Kind.INT_ROWS, "padding", OPTIONAL)
# "i4"/"ui4" where an operand or result is a 4-bit integer (held in raw bytes, whose native
# type does not say so; lowering.py's four_bit_attrs), else ""
_FOUR_BIT = (Field("four_bit_operand", Kind.STR, "four_bit_operand", ""),
             Field("four_bit_result", Kind.STR, "four_bit_result", ""))


def _gather_fields():
    dn = "dimension_numbers."
    return (_ints("offset_dims", dn + "offset_dims"),
            _ints("collapsed_slice_dims", dn + "collapsed_slice_dims"),
            _ints("operand_batching_dims", dn + "operand_batching_dims", []),
            _ints("start_indices_batching_dims", dn + "start_indices_batching_dims", []),
            _ints("start_index_map", dn + "start_index_map"),
            _int("index_vector_dim", dn + "index_vector_dim", 0),
            _ints("slice_sizes"))


def _scatter_fields():
    dn = "scatter_dimension_numbers."
    return (_ints("update_window_dims", dn + "update_window_dims"),
            _ints("inserted_window_dims", dn + "inserted_window_dims"),
            _ints("input_batching_dims", dn + "input_batching_dims", []),
            _ints("scatter_indices_batching_dims", dn + "scatter_indices_batching_dims", []),
            _ints("scatter_dims_to_operand_dims", dn + "scatter_dims_to_operand_dims"),
            _int("index_vector_dim", dn + "index_vector_dim", 0),
            Field("replace", Kind.BOOL, "replace", False), _COMBINER)


def _dot_general_fields():
    dn = "dot_dimension_numbers."
    return tuple(_ints(name, dn + name, []) for name in (
        "lhs_batching_dimensions", "rhs_batching_dimensions", "lhs_contracting_dimensions",
        "rhs_contracting_dimensions")) + (Field("has_algorithm", Kind.PRESENT, "algorithm"),)


def _convolution_fields():
    dn = "dimension_numbers."
    numbers = tuple(
        (_ints if name.endswith("spatial_dimensions") else _int)(name, dn + name)
        for name in ("input_batch_dimension", "input_feature_dimension",
                     "input_spatial_dimensions", "kernel_input_feature_dimension",
                     "kernel_output_feature_dimension", "kernel_spatial_dimensions",
                     "output_batch_dimension", "output_feature_dimension",
                     "output_spatial_dimensions"))
    return numbers + (
        _ints("window_strides", default=OPTIONAL), _ints("lhs_dilation", default=OPTIONAL),
        _ints("rhs_dilation", default=OPTIONAL), _ints("window_reversal", default=OPTIONAL),
        _PADDING, _int("feature_group_count", default=1), _int("batch_group_count", default=1))


def _schemas() -> dict[str, Schema]:
    table = {
        "iota": (_int("iota_dimension"),),
        "broadcast_in_dim": (_ints("broadcast_dimensions"),),
        "transpose": (_ints("permutation"),),
        "reverse": (_ints("dimensions"),),
        "slice": (_ints("start_indices"), _ints("limit_indices"),
                  _ints("strides", default=OPTIONAL)),
        "concatenate": (_int("dimension"),),
        "pad": (_ints("edge_padding_low"), _ints("edge_padding_high"),
                _ints("interior_padding")),
        "compare": (Field("comparison_direction", Kind.STR, "comparison_direction"),
                    Field("compare_type", Kind.STR, "compare_type", "")),
        "dynamic_slice": (_ints("slice_sizes"),),
        "convert": _FOUR_BIT,
        "bitcast_convert": _FOUR_BIT,
        "gather": _gather_fields(),
        "scatter": _scatter_fields(),
        "dot_general": _dot_general_fields(),
        "convolution": _convolution_fields(),
        "reduce": (_COMBINER, _ints("dimensions"), _PAIR_PICKS),
        "reduce_window": (_COMBINER, _PAIR_PICKS) + _WINDOW + (
            _ints("base_dilations", default=OPTIONAL),
            _ints("window_dilations", default=OPTIONAL), _PADDING),
        "select_and_scatter": _COMPARATOR + (_COMBINER,) + _WINDOW + (_PADDING,),
        "sort": (_int("dimension", default=-1),) + _COMPARATOR,
        "all_reduce": _GROUPS + (_COMBINER,),
        "all_gather": _GROUPS + (_int("all_gather_dim"),),
        "reduce_scatter": _GROUPS + (_int("scatter_dimension"), _COMBINER),
        "all_to_all": _GROUPS + (_int("split_dimension"), _int("concat_dimension"),
                                 _int("split_count")),
        "collective_permute": _GROUPS + (_ints("permute_sources", default=OPTIONAL),),
        "collective_broadcast": _GROUPS + (
            Field("has_dynamic_root", Kind.BOOL, "has_dynamic_root", False),),
    }
    schemas = {f"stablehlo.{name}": Schema(f"stablehlo.{name}", _struct_name(name), fields)
               for name, fields in table.items()}
    # Composites with a native kernel (keyed by the composite's name): their
    # composite_attributes, as stablehlo/attention.py writes them.
    attention = tuple(
        Field(member, kind, f"composite_attributes.{member}")
        for member, kind in (("scale", Kind.FLOAT), ("causal", Kind.BOOL),
                             ("has_bias", Kind.BOOL), ("has_mask", Kind.BOOL),
                             ("fill", Kind.FLOAT)))
    for name in ("attention", "attention_grad"):
        schemas[f"openhlo.{name}"] = Schema(f"openhlo.{name}", _struct_name(name), attention)
    # as xla_core/quantization/weight_only_dot.py writes them
    schemas[WEIGHT_ONLY_DOT] = Schema(WEIGHT_ONLY_DOT, "WeightOnlyDotAttrs", tuple(
        Field(member, Kind.INT, f"composite_attributes.{member}")
        for member in ("bits", "group_size", "weight_contracting")))
    return schemas


def _struct_name(op: str) -> str:
    return "".join(part.capitalize() for part in op.split("_")) + "Attrs"


SCHEMAS: dict[str, Schema] = _schemas()

_MISSING = object()


def _lookup(attrs: dict, path: str):
    value = attrs
    for step in path.split("."):
        if isinstance(value, dict):
            value = value.get(step, _MISSING)
        elif isinstance(value, (list, tuple)) and step.isdigit() and int(step) < len(value):
            value = value[int(step)]
        else:
            return _MISSING
        if value is None:
            return _MISSING
    return value


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _as_ints(value):
    """A list of integers (bools of array<i1> as 0/1), or None."""
    if isinstance(value, np.ndarray) and value.ndim == 1:
        value = value.tolist()
    if isinstance(value, (list, tuple)) and all(
            _is_int(v) or isinstance(v, (bool, np.bool_)) for v in value):
        return [int(v) for v in value]
    return None


def _as_int_rows(value):
    """A list of integer lists (a dense [n, k] array or nested lists), or None."""
    if isinstance(value, np.ndarray) and value.ndim == 2 and value.dtype.kind in "iu":
        return value.tolist()
    if isinstance(value, (list, tuple)):
        rows = [_as_ints(row) for row in value]
        if all(row is not None for row in rows):
            return rows
    return None


def _convert(kind: Kind, value):
    """``value`` as the record holds a field of ``kind``, or _MISSING if it is not one."""
    if kind is Kind.INT:
        return int(value) if _is_int(value) else _MISSING
    if kind is Kind.BOOL:
        return bool(value) if isinstance(value, (bool, np.bool_)) else _MISSING
    if kind is Kind.FLOAT:
        is_number = isinstance(value, (float, np.floating)) or _is_int(value)
        return float(value) if is_number else _MISSING
    if kind is Kind.STR:
        return value if isinstance(value, str) else _MISSING
    converted = (_as_ints if kind is Kind.INTS else _as_int_rows)(value)
    return _MISSING if converted is None else converted


def encode(op_name: str, where: str, attrs: dict) -> list:
    """The record of op ``op_name`` (at ``where``) from its plain attributes: one value per
    field of its schema, ``[]`` for ops without one."""
    schema = SCHEMAS.get(op_name)
    if schema is None:
        return []
    record = []
    for field in schema.fields:
        value = _lookup(attrs, field.path)
        if field.kind is Kind.PRESENT:
            record.append(value is not _MISSING)
            continue
        if value is _MISSING:
            if field.default is REQUIRED:
                from pjrt.plugins.cpu.native_module import native
                raise native().Unsupported(f"{where}: {op_name} has no attribute {field.path}")
            record.append(None if field.default is OPTIONAL else field.default)
            continue
        converted = _convert(field.kind, value)
        if converted is _MISSING:
            raise VerificationError(
                f"{where}: attribute {field.path} of {op_name} is {value!r}, not "
                f"{field.kind.text}")
        record.append(converted)
    return record
