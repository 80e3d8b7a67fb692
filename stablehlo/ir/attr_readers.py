"""Readers of op attributes as plain Python values, shared by the verifier
(``stablehlo.ir.ops.shape_inference``) and the interpreter
(``stablehlo.interpreter.opattrs``).

An ``AttrReader`` reads one attribute of an op, checks its kind, applies the
caller's default when it is absent and raises ``error(op, message)`` when it is
missing or malformed; ``error`` is the caller's factory (``op_error`` for the
verifier, ``fail`` for the interpreter), so messages name the op, its location
and the attribute.

``strict`` readers (the verifier's) take integer lists only as 1-D dense
values or arrays of ``IntegerAttr``, integers only as non-boolean
``IntegerAttr`` and matrices only as 2-D ``DenseElementsAttr``. Lenient readers
(the interpreter's) also take ``BoolAttr`` and raw Python/NumPy scalars,
flatten dense tensors of any rank and take ``DenseArrayAttr`` matrices.
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional

import numpy as np

from stablehlo.ir.attributes import (ArrayAttr, BoolAttr, DenseArrayAttr, DenseElementsAttr,
                                     EnumAttr, IntegerAttr, StructAttr, UnitAttr)

MISSING = object()
"""The default of a required attribute."""

_RAW_SCALARS = (int, bool, np.integer, np.bool_)
MAX_LIST_ATTRIBUTE_LENGTH = 1 << 20


class AttrReader:
    """Attribute readers that raise ``error(op, message)``; ``missing`` starts
    the message for an absent required attribute."""

    def __init__(self, error: Callable[[object, str], Exception], *, missing: str,
                 strict: bool):
        self.error = error
        self.missing = missing
        self.strict = strict

    def _get(self, op, name: str, default):
        attr = op.attributes.get(name)
        if attr is None and default is MISSING:
            raise self.error(op, f"{self.missing} '{name}'")
        return attr

    def _bad(self, op, name: str, what: str, attr) -> Exception:
        return self.error(op, f"attribute '{name}' must be {what}, got {attr}")

    def _scalar(self, op, name: str, attr, what: str):
        if isinstance(attr, (IntegerAttr, BoolAttr)):
            return attr.value
        if not self.strict and isinstance(attr, _RAW_SCALARS):
            return attr
        raise self._bad(op, name, what, attr)

    def ints(self, op, name: str, attr) -> list:
        """A present 1-D integer array attribute as a list of ints."""
        if isinstance(attr, DenseArrayAttr):
            return [int(v) for v in attr.values]
        if isinstance(attr, DenseElementsAttr) and (not self.strict or attr.array.ndim <= 1):
            self._check_list_length(op, name, attr)
            return [int(v) for v in np.asarray(attr.array).reshape(-1)]
        if isinstance(attr, ArrayAttr):
            if not self.strict:
                return [int(self._scalar(op, name, v, "an integer or boolean"))
                        for v in attr.values]
            if all(isinstance(v, IntegerAttr) for v in attr.values):
                return [int(v.value) for v in attr.values]
        if isinstance(attr, (tuple, list)):
            return [int(v) for v in attr]
        raise self._bad(op, name, "an array of integers", attr)

    def _check_list_length(self, op, name: str, attr) -> None:
        # A list attribute names dimensions, strides or flags: a few entries per dimension.
        # A splat literal can still claim billions of entries in a few bytes of text;
        # refuse it before building a Python list of them.
        if attr.array.size > MAX_LIST_ATTRIBUTE_LENGTH:
            raise self._bad(op, name, f"a list of at most {MAX_LIST_ATTRIBUTE_LENGTH} "
                                      f"entries", f"{attr.type}")

    def int_list(self, op, name: str, default=MISSING) -> list:
        attr = self._get(op, name, default)
        if attr is None:
            return list(default)
        return self.ints(op, name, attr)

    def bool_list(self, op, name: str, default=MISSING) -> list:
        attr = self._get(op, name, default)
        if attr is None:
            return list(default)
        if isinstance(attr, DenseArrayAttr):
            return [bool(v) for v in attr.values]
        if isinstance(attr, DenseElementsAttr):
            self._check_list_length(op, name, attr)
            return [bool(v) for v in np.asarray(attr.array).reshape(-1)]
        raise self._bad(op, name, "an array of booleans", attr)

    def int_value(self, op, name: str, default=MISSING) -> int:
        attr = self._get(op, name, default)
        if attr is None:
            return default
        if self.strict and not (isinstance(attr, IntegerAttr)
                                and not isinstance(attr.value, bool)):
            raise self._bad(op, name, "an integer", attr)
        return int(self._scalar(op, name, attr, "an integer or boolean"))

    def bool_value(self, op, name: str, default=MISSING) -> bool:
        attr = self._get(op, name, default)
        if attr is None:
            return default
        if isinstance(attr, UnitAttr):
            return True
        return bool(self._scalar(op, name, attr, "a boolean"))

    def enum_value(self, op, name: str, default=MISSING, kind: Optional[str] = None,
                   allowed: Optional[Iterable[str]] = None) -> str:
        """An EnumAttr's value; of enum ``kind`` and among ``allowed`` when given."""
        attr = self._get(op, name, default)
        if attr is None:
            return default
        if not isinstance(attr, EnumAttr) or (kind is not None and attr.kind != kind):
            raise self._bad(op, name, f"a #stablehlo<{kind} ...>" if kind else "an enum", attr)
        if allowed is not None:
            allowed = tuple(allowed)
            if attr.value not in allowed:
                raise self.error(op, f"attribute '{name}' has value {attr.value}, "
                                     f"expected one of {', '.join(allowed)}")
        return attr.value

    def struct(self, op, name: str, kind: str) -> StructAttr:
        """A required ``#stablehlo.<kind><...>`` attribute (e.g. gather dimension numbers)."""
        attr = self._get(op, name, MISSING)
        if not isinstance(attr, StructAttr) or attr.kind != kind:
            raise self._bad(op, name, f"a #stablehlo.{kind}<...>", attr)
        return attr

    def int_matrix(self, op, name: str, default_shape=MISSING) -> np.ndarray:
        """A dense integer tensor attribute (padding, replica groups) as an int64
        array; zeros of ``default_shape`` when absent."""
        attr = self._get(op, name, default_shape)
        if attr is None:
            return np.zeros(default_shape, dtype=np.int64)
        if isinstance(attr, DenseElementsAttr):
            self._check_list_length(op, name, attr)
            array = np.asarray(attr.array)
        elif isinstance(attr, DenseArrayAttr) and not self.strict:
            array = np.asarray(attr.values)
        else:
            raise self._bad(op, name, "a dense integer tensor", attr)
        if self.strict and array.ndim != 2:
            raise self.error(op, f"attribute '{name}' must be 2-D, got shape {list(array.shape)}")
        return array.astype(np.int64)


def struct_ints(attr: StructAttr, field: str) -> list:
    """A tuple-of-ints field of a struct attribute (empty when absent)."""
    value = attr.get(field, ())
    if isinstance(value, int):
        return [value]
    return [int(v) for v in value]
