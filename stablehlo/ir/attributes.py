"""MLIR attributes as used by StableHLO programs.

Attributes are immutable values. Their text form is produced by
``stablehlo.text.printer.print_attribute`` (printing needs the float rules of
``stablehlo.text.literals``), and ``str(attr)`` delegates there.

Anything we do not model (Shardy ``#sdy.*`` attributes, foreign dialect
attributes) is an ``OpaqueAttr`` holding its text verbatim, so sharding and
other annotations survive a round trip unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from stablehlo.ir.types import Type, TensorType


class Attribute:
    def __str__(self) -> str:
        from stablehlo.text.printer import print_attribute
        return print_attribute(self)


@dataclass(frozen=True)
class IntegerAttr(Attribute):
    """``5 : i64``; ``type`` is an IntegerType or IndexType."""
    value: int
    type: Type



@dataclass(frozen=True)
class FloatAttr(Attribute):
    """``1.000000e+00 : f32``."""
    value: float
    type: Type



@dataclass(frozen=True)
class BoolAttr(Attribute):
    value: bool



@dataclass(frozen=True)
class StringAttr(Attribute):
    value: str



@dataclass(frozen=True)
class UnitAttr(Attribute):
    """Present-or-absent flag: ``{use_global_device_ids}``."""



@dataclass(frozen=True)
class ArrayAttr(Attribute):
    """``[a, b, ...]`` of attributes."""
    values: tuple



@dataclass(frozen=True)
class DenseArrayAttr(Attribute):
    """``array<i64: 1, 2>``; ``values`` are Python ints/bools/floats."""
    element_type: Type
    values: tuple



@dataclass(frozen=True, eq=False)
class DenseElementsAttr(Attribute):
    """``dense<...> : tensor<...>``.

    ``array`` is a numpy array of ``numpy_dtype(type.element_type)`` with the
    tensor's shape (quantized element types hold their storage values). The parser holds a
    splat (``dense<1.0> : tensor<100000x100000xf32>``) as a read-only view of one element
    broadcast to the shape (every stride 0; see ``held_as_splat``): it costs one element
    however large the shape. Consumers treat ``array`` as read-only and call
    ``np.ascontiguousarray`` where they need contiguous memory, after checking its size.
    """
    type: TensorType
    array: np.ndarray

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DenseElementsAttr) or other.type != self.type:
            return False
        a, b = self.array, other.array
        if a.shape != b.shape:
            return False
        if held_as_splat(a) or held_as_splat(b):
            splat = splat_bytes(a)
            return splat is not None and splat == splat_bytes(b)
        return a.tobytes() == b.tobytes()

    def __reduce__(self):
        # Pickled (the compile cache, worker processes) as what it is: a splat held as one
        # element stays one element, instead of numpy writing out every broadcast copy.
        if held_as_splat(self.array):
            element = np.ascontiguousarray(self.array[(0,) * self.array.ndim])
            return (_splat_attribute, (self.type, element, self.array.shape))
        return (DenseElementsAttr, (self.type, self.array))

    def __hash__(self) -> int:
        # A splat hashes by its one element whether it is held as a view or materialized,
        # so that equal attributes hash equal.
        splat = splat_bytes(self.array)
        return hash((self.type, self.array.tobytes() if splat is None else splat))


def _splat_attribute(type, element: np.ndarray, shape: tuple) -> "DenseElementsAttr":
    view = np.broadcast_to(element, shape)
    return DenseElementsAttr(type, view)


def held_as_splat(array: np.ndarray) -> bool:
    """Whether ``array`` is one element broadcast to its shape (every stride 0), as the
    parser holds a splat literal."""
    return array.size > 1 and not any(array.strides)


def splat_bytes(array: np.ndarray) -> Optional[bytes]:
    """The bytes of the one value every element of ``array`` holds, None when its elements
    differ (bitwise) or it has none. Costs one element for a view ``held_as_splat``."""
    if array.size == 0:
        return None
    first = np.ascontiguousarray(array[(0,) * array.ndim]).tobytes()
    if held_as_splat(array) or array.size == 1:
        return first
    flat = np.ascontiguousarray(array).reshape(-1)
    rows = flat.view(np.uint8).reshape(flat.size, flat.itemsize)
    return first if bool((rows == rows[0]).all()) else None



@dataclass(frozen=True)
class DictAttr(Attribute):
    """``{name = value, flag}``; ``items`` is a tuple of (name, Attribute)."""
    items: tuple = ()

    def get(self, name: str, default=None):
        for key, value in self.items:
            if key == name:
                return value
        return default

    def as_dict(self) -> dict:
        return dict(self.items)



@dataclass(frozen=True)
class SymbolRefAttr(Attribute):
    """``@name`` or ``@root::@nested``."""
    name: str
    nested: tuple = ()



@dataclass(frozen=True)
class TypeAttr(Attribute):
    type: Type



@dataclass(frozen=True)
class EnumAttr(Attribute):
    """``#stablehlo<comparison_direction LT>``: ``kind`` and ``value``.

    ``dialect`` is the prefix (``stablehlo`` or ``chlo``).
    """
    kind: str
    value: str
    dialect: str = "stablehlo"



@dataclass(frozen=True)
class StructAttr(Attribute):
    """``#stablehlo.gather<offset_dims = [1], ...>`` and friends.

    ``kind`` is the mnemonic (``gather``, ``scatter``, ``dot``, ``channel_handle``,
    ``output_operand_alias``, ``result_accuracy``, ``dot_algorithm``, ...).
    ``fields`` is a tuple of (name, value) where a value is an int, a bool, a
    tuple of ints, a Type, or an Attribute, in canonical order.
    """
    kind: str
    fields: tuple
    dialect: str = "stablehlo"

    def get(self, name: str, default=None):
        for key, value in self.fields:
            if key == name:
                return value
        return default



@dataclass(frozen=True)
class ConvDimensionNumbersAttr(Attribute):
    """``#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>``."""
    input_batch_dimension: int
    input_feature_dimension: int
    input_spatial_dimensions: tuple
    kernel_input_feature_dimension: int
    kernel_output_feature_dimension: int
    kernel_spatial_dimensions: tuple
    output_batch_dimension: int
    output_feature_dimension: int
    output_spatial_dimensions: tuple



@dataclass(frozen=True)
class OpaqueAttr(Attribute):
    """An attribute we keep verbatim (``#sdy.sharding<...>``, ``#foo.bar``)."""
    text: str



# ---------------------------------------------------------------------------
# Small constructors used by the builder and the interpreter

def i64_array(values) -> DenseArrayAttr:
    from stablehlo.ir.types import I64
    return DenseArrayAttr(I64, tuple(int(v) for v in values))


def bool_array(values) -> DenseArrayAttr:
    from stablehlo.ir.types import I1
    return DenseArrayAttr(I1, tuple(bool(v) for v in values))


def i64_attr(value: int) -> IntegerAttr:
    from stablehlo.ir.types import I64
    return IntegerAttr(int(value), I64)


def dense(array, type: Optional[TensorType] = None) -> DenseElementsAttr:
    """A DenseElementsAttr from a numpy array (type inferred from its dtype)."""
    from stablehlo.ir.types import element_type_for_dtype, numpy_dtype
    array = np.asarray(array)
    if type is None:
        type = TensorType(array.shape, element_type_for_dtype(array.dtype))
    return DenseElementsAttr(type, np.asarray(array, dtype=numpy_dtype(type.element_type)))


def attr_to_python(attr: Attribute):
    """Plain Python value of a simple attribute (ints, bools, lists, strings).

    Used by kernels and verifiers that just want numbers. DenseElementsAttr
    returns its numpy array.
    """
    if isinstance(attr, (IntegerAttr, FloatAttr, BoolAttr, StringAttr)):
        return attr.value
    if isinstance(attr, DenseArrayAttr):
        return list(attr.values)
    if isinstance(attr, ArrayAttr):
        return [attr_to_python(a) for a in attr.values]
    if isinstance(attr, DenseElementsAttr):
        return attr.array
    if isinstance(attr, UnitAttr):
        return True
    if isinstance(attr, EnumAttr):
        return attr.value
    if isinstance(attr, SymbolRefAttr):
        return attr.name
    return attr


def nested_values(attr):
    """``attr`` and every value nested in it, outermost first: the elements of an
    ``ArrayAttr``, the values of a ``DictAttr`` and the fields of a ``StructAttr`` (which
    may be plain ints, bools, tuples of ints or Types as well as Attributes), recursively.
    The one walker for passes that look for something anywhere inside an attribute."""
    yield attr
    if isinstance(attr, ArrayAttr):
        children = attr.values
    elif isinstance(attr, DictAttr):
        children = [value for _, value in attr.items]
    elif isinstance(attr, StructAttr):
        children = [value for _, value in attr.fields]
    else:
        return
    for child in children:
        yield from nested_values(child)
