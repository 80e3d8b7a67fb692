"""Op attributes as plain Python values, from which kernel_attrs.encode takes the fields
each native kernel reads (so neither it nor the kernels depend on the IR's attribute
classes). Conversions:

* integer/float/bool/string attributes -> their value; a unit attribute -> True;
* ``array<i64: ...>`` and ``[...]`` of numbers -> list;
* ``dense<...>`` -> numpy array (the op's constant data, storage integers for quantized);
* ``#stablehlo<comparison_direction LT>`` and other enums -> ``"LT"``;
* ``#stablehlo.gather<...>``, ``#stablehlo.dot<...>`` and other structs -> dict of fields
  (tuples of ints become lists);
* ``#stablehlo.conv<...>`` -> dict with the ConvDimensionNumbersAttr field names;
* ``@sym`` -> ``"sym"``; anything else (types, opaque attributes) -> its text.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from stablehlo.ir.attributes import (
    ArrayAttr, Attribute, BoolAttr, ConvDimensionNumbersAttr, DenseArrayAttr,
    DenseElementsAttr, DictAttr, EnumAttr, FloatAttr, IntegerAttr, StringAttr, StructAttr,
    SymbolRefAttr, UnitAttr)


def plain_attrs(op) -> dict:
    """Every attribute of ``op`` (its ``properties`` and discardable ones) as plain values."""
    return {name: plain(value) for name, value in op.attributes.items()}


def plain(value):
    if isinstance(value, (IntegerAttr, FloatAttr, BoolAttr, StringAttr)):
        return value.value
    if isinstance(value, UnitAttr):
        return True
    if isinstance(value, DenseArrayAttr):
        return list(value.values)
    if isinstance(value, ArrayAttr):
        return [plain(v) for v in value.values]
    if isinstance(value, DenseElementsAttr):
        return np.require(value.array, requirements="C")  # keeps 0-d arrays 0-d
    if isinstance(value, EnumAttr):
        return value.value
    if isinstance(value, StructAttr):
        return {name: plain(field) for name, field in value.fields}
    if isinstance(value, ConvDimensionNumbersAttr):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, DictAttr):
        return {name: plain(v) for name, v in value.items}
    if isinstance(value, SymbolRefAttr):
        return value.name
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    if isinstance(value, (bool, int, float, str, np.ndarray)) or value is None:
        return value
    if isinstance(value, Attribute):
        return str(value)
    return str(value)


def region_attrs(op) -> dict:
    """What kernels of region-carrying ops need to know about the region, when it is simple.

    * ``combiner``: ``"stablehlo.add"`` (or multiply/maximum/minimum/and/or/xor) when every
      region of ``op`` combines its argument pairs with that one op (reduce, reduce_window,
      scatter, select_and_scatter's scatter region, all_reduce, reduce_scatter);
    * ``replace``: True when the (update) region returns its second argument (scatter);
    * ``comparator``: ``[direction, compare_type or None]`` when the region is one compare of
      its first two arguments (sort; select_and_scatter's select region);
    * ``pair_picks``: ``ArgReduce.picks`` (stablehlo/ir/regions.py) when the region keeps one
      of two (value, index) pairs, as argmax/argmin and max pooling with indices do (reduce,
      reduce_window); ``region_value_picks`` (6 entries) when it keeps one of two values by
      such a select (max pooling whose indices were dropped).
    Kernels that need a region and find none of these raise Unsupported.
    """
    from stablehlo.interpreter.region_patterns import returned_arguments, single_compare
    from stablehlo.ir.regions import region_argreduce, region_monoid, region_value_picks
    if not op.regions or not _region_types_match(op):
        return {}
    out = {}
    last = op.regions[-1]
    monoid = region_monoid(last)
    if monoid is not None:
        out["combiner"] = monoid.op
    returned = returned_arguments(last)
    if returned is not None and len(returned) == 1 and returned[0] == 1:
        out["replace"] = True
    compare = single_compare(op.regions[0])
    if compare is not None:
        out["comparator"] = list(compare)
    argreduce = region_argreduce(last) if monoid is None else None
    if argreduce is not None and argreduce.picks is not None:
        out["pair_picks"] = list(argreduce.picks)
    has_pair_kernel = op.name in ("stablehlo.reduce", "stablehlo.reduce_window")
    value_picks = region_value_picks(last) if monoid is None and has_pair_kernel else None
    if value_picks is not None:
        out["pair_picks"] = list(value_picks)
    return out


def _region_types_match(op) -> bool:
    """Kernels compute in the operands' element types: a region whose arguments have other
    element types (a promoted reducer) is left to the interpreter."""
    operand_types = {str(getattr(v.type, "element_type", v.type)) for v in op.operands}
    for region in op.regions:
        for block in region.blocks:
            for arg in block.arguments:
                if str(getattr(arg.type, "element_type", arg.type)) not in operand_types:
                    return False
    return True
