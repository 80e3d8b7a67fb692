"""Quantizable units: the dot_generals and convolutions of the entry function, with why not.

A unit is one op of the entry function's own block whose lhs, rhs and result are f32 and whose
rhs (the weight) is a ``stablehlo.constant``. Its id is ``<op>#<n>`` in program order (the
report and ``--skip`` use it). The weight's channel axis, along which per-channel scales run,
is the last free rhs dimension of a dot (the output features of a ``x @ W``) and the kernel's
output-feature dimension of a convolution; ``result_axis`` is where that dimension lands in
the result. Ops that are not units get a reason (the report lists them).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from stablehlo.ir.attr_readers import struct_ints
from stablehlo.ir.attributes import DenseElementsAttr
from stablehlo.ir.core import Func, Operation
from stablehlo.ir.types import F32, TensorType

KINDS = ("stablehlo.dot_general", "stablehlo.convolution")


@dataclass
class Unit:
    """One quantizable op; ``reason`` is set (and ``weight`` None) when it cannot be."""
    id: str
    op: Operation
    location: str
    weight: Optional[np.ndarray] = None
    weight_axis: Optional[int] = None
    result_axis: Optional[int] = None
    contracting: tuple = ()
    reason: Optional[str] = None

    @property
    def kind(self) -> str:
        return self.op.name.split(".", 1)[1]


def find_units(func: Func) -> list[Unit]:
    """Every dot_general/convolution of ``func``'s block, quantizable or with a reason."""
    counts: dict = {}
    units = []
    for op in func.body.operations:
        if op.name not in KINDS:
            continue
        kind = op.name.split(".", 1)[1]
        unit_id = f"{kind}#{counts.get(kind, 0)}"
        counts[kind] = counts.get(kind, 0) + 1
        unit = Unit(unit_id, op, str(op.location) if op.location else "")
        unit.reason = _refusal(op)
        if unit.reason is None:
            _fill(unit)
        units.append(unit)
    return units


def _refusal(op: Operation) -> Optional[str]:
    types = [*op.operand_types, *op.result_types]
    if not all(isinstance(t, TensorType) and t.element_type == F32 and t.is_static
               for t in types):
        return "not an op on static f32 tensors"
    weight = op.operands[1].owner
    if not (isinstance(weight, Operation) and weight.name == "stablehlo.constant"
            and isinstance(weight.attr("value"), DenseElementsAttr)):
        return "the rhs (weight) is not a constant"
    if op.name == "stablehlo.convolution":
        groups = (op.attr("feature_group_count"), op.attr("batch_group_count"))
        if any(g is not None and g.value != 1 for g in groups):
            return "grouped convolution"
    return None


def _fill(unit: Unit) -> None:
    op = unit.op
    unit.weight = np.asarray(op.operands[1].owner.attr("value").array, dtype=np.float32)
    if op.name == "stablehlo.dot_general":
        dnums = op.attr("dot_dimension_numbers")
        rhs_batch = struct_ints(dnums, "rhs_batching_dimensions")
        rhs_contract = struct_ints(dnums, "rhs_contracting_dimensions")
        lhs_batch = struct_ints(dnums, "lhs_batching_dimensions")
        lhs_contract = struct_ints(dnums, "lhs_contracting_dimensions")
        rhs_free = [d for d in range(unit.weight.ndim) if d not in rhs_batch + rhs_contract]
        lhs_free = op.operands[0].type.rank - len(lhs_batch) - len(lhs_contract)
        unit.contracting = tuple(rhs_contract)
        if rhs_free:
            unit.weight_axis = rhs_free[-1]
            unit.result_axis = len(lhs_batch) + lhs_free + len(rhs_free) - 1
        return
    dnums = op.attr("dimension_numbers")
    unit.weight_axis = dnums.kernel_output_feature_dimension
    unit.result_axis = dnums.output_feature_dimension
    unit.contracting = (dnums.kernel_input_feature_dimension, *dnums.kernel_spatial_dimensions)


def is_skipped(unit: Unit, skip: tuple) -> bool:
    """Whether a ``--skip`` entry names ``unit``: its id, its op name, or a location fragment."""
    for entry in skip:
        name = entry.removeprefix("stablehlo.")
        if entry == unit.id or name == unit.kind:
            return True
        if ":" in entry and "#" not in entry and entry in unit.location:
            return True
    return False
