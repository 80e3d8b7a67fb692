"""A custom call's attributes, both ways.

JAX's ``ffi_call`` puts a typed-FFI call's attributes in the custom_call's
``mhlo.backend_config`` dictionary (StableHLO's own spelling with ``api_version = 4`` puts
the dictionary in ``backend_config``); ``ir_attributes`` builds that dictionary from typed
Python values (torch's lowering and ``call_module``), and ``call_attributes`` reads it into
the records the native call step lays out for the handler: ``(name, kind, element type,
payload bytes)`` with kind ``"scalar"``, ``"array"`` or ``"string"``.
"""
from __future__ import annotations

import numpy as np

from stablehlo.ir.attributes import (BoolAttr, DenseArrayAttr, DenseElementsAttr, DictAttr,
                                     FloatAttr, IntegerAttr, StringAttr)
from stablehlo.ir.types import element_type_for_dtype, numpy_dtype

from pjrt.errors import ArgumentError


def ir_attributes(values: dict) -> DictAttr:
    """``{name: numpy scalar | str | bool | 1-D numpy array}`` as a DictAttr."""
    items = []
    for name, value in sorted(values.items()):
        if isinstance(value, str):
            attr = StringAttr(value)
        elif isinstance(value, (bool, np.bool_)):
            attr = BoolAttr(bool(value))
        elif isinstance(value, np.ndarray):
            attr = DenseArrayAttr(element_type_for_dtype(value.dtype), tuple(value.tolist()))
        elif isinstance(value, np.floating):
            attr = FloatAttr(float(value), element_type_for_dtype(value.dtype))
        elif isinstance(value, np.integer):
            attr = IntegerAttr(int(value), element_type_for_dtype(value.dtype))
        else:
            raise ArgumentError(f"custom-call attribute {name!r}: give a numpy scalar, a "
                                f"string or a 1-D numpy array, not {type(value).__name__}")
        items.append((name, attr))
    return DictAttr(tuple(items))


def _dictionary(op) -> DictAttr:
    for key in ("mhlo.backend_config", "backend_config"):
        attr = op.attributes.get(key)
        if isinstance(attr, DictAttr):
            return attr
    return DictAttr(())


def call_attributes(op) -> list:
    """The native records of custom_call ``op``'s attributes (see the module docstring)."""
    records = []
    for name, attr in _dictionary(op).items:
        if isinstance(attr, StringAttr):
            records.append((name, "string", "", attr.value.encode()))
        elif isinstance(attr, BoolAttr):
            records.append((name, "scalar", "i1", np.bool_(attr.value).tobytes()))
        elif isinstance(attr, (FloatAttr, IntegerAttr)):
            dtype = numpy_dtype(attr.type)
            records.append((name, "scalar", str(attr.type), dtype.type(attr.value).tobytes()))
        elif isinstance(attr, DenseArrayAttr):
            array = np.asarray(attr.values, numpy_dtype(attr.element_type))
            records.append((name, "array", str(attr.element_type), array.tobytes()))
        elif isinstance(attr, DenseElementsAttr) and attr.array.ndim <= 1:
            records.append((name, "array", str(attr.type.element_type),
                            np.ascontiguousarray(attr.array).reshape(-1).tobytes()))
        else:
            raise ArgumentError(f"{op.where()}: attribute {name!r} ({type(attr).__name__}) "
                                "cannot be passed to an FFI handler (scalars, strings and "
                                "1-D arrays can)")
    return records
