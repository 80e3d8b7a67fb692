"""Attributes of ops as the kernel templates read them: plain Python values."""
from __future__ import annotations

from stablehlo.ir.attributes import StructAttr, attr_to_python


def attr(op, name: str, default=None):
    """``op``'s attribute ``name`` as numbers, lists and strings (a struct as a dict)."""
    value = op.attributes.get(name)
    if value is None:
        return default
    if isinstance(value, StructAttr):
        return {field: attr_to_python(v) for field, v in value.fields}
    return attr_to_python(value)
