"""Verifiers and type inference of the CHLO ops we accept.

Elementwise CHLO ops reuse elementwise_rules; top_k, ragged_dot and scan have
their own shape rules (from the CHLO op descriptions).
"""
from __future__ import annotations

from stablehlo.ir.attributes import StructAttr
from stablehlo.ir.ops.base import op_error
from stablehlo.ir.ops.elementwise_rules import chlo_rule_for
from stablehlo.ir.ops.shape_inference import (
    Rule, block_arg_types, block_return_types, bool_attr, check_dims, check_in_range,
    check_size, check_type_list, dims_compatible, expect_num_operands, int_attr, is_int,
    region_block, struct_ints, tensor_operand,
)
from stablehlo.ir.types import I32, TensorType


def _infer_top_k(op):
    expect_num_operands(op, 1)
    t = tensor_operand(op, 0)
    k = int_attr(op, "k")
    if t.rank < 1:
        raise op_error(op, f"operand #0 has type {t}, expected rank >= 1")
    last = t.shape[-1]
    if k < 0 or (last is not None and k > last):
        raise op_error(op, f"k = {k} must be in [0, {last}] (the last dimension of {t})")
    shape = tuple(t.shape[:-1]) + (k,)
    return [t.with_shape(shape), TensorType(shape, I32)]


def _ragged_dims(op) -> dict:
    dn = op.attributes.get("ragged_dot_dimension_numbers")
    if not isinstance(dn, StructAttr):
        raise op_error(op, f"requires attribute 'ragged_dot_dimension_numbers' "
                           f"(#chlo.ragged_dot<...>), got {dn}")
    names = ("lhs_batching_dimensions", "rhs_batching_dimensions",
             "lhs_contracting_dimensions", "rhs_contracting_dimensions",
             "lhs_ragged_dimensions", "rhs_group_dimensions")
    return {name: struct_ints(dn, name) for name in names}


def _infer_ragged_dot(op):
    """Three modes by where the lhs ragged dimension sits (see CHLO's description)."""
    expect_num_operands(op, 3)
    lhs, rhs = tensor_operand(op, 0), tensor_operand(op, 1)
    groups = tensor_operand(op, 2, "operand #2 (group_sizes)")
    if not is_int(groups.element_type):
        raise op_error(op, f"operand #2 (group_sizes) has type {groups}, expected integers")
    d = _ragged_dims(op)
    lb, rb = d["lhs_batching_dimensions"], d["rhs_batching_dimensions"]
    lc, rc = d["lhs_contracting_dimensions"], d["rhs_contracting_dimensions"]
    ragged, group = d["lhs_ragged_dimensions"], d["rhs_group_dimensions"]
    check_size(op, "lhs_ragged_dimensions", ragged, 1)
    check_dims(op, "lhs batching + contracting dims", lb + lc, lhs.rank)
    check_dims(op, "rhs batching + contracting + group dims", rb + rc + group, rhs.rank)
    check_in_range(op, "lhs_ragged_dimensions", ragged, 0, lhs.rank)
    for a, b in zip(lb + lc, rb + rc):
        if not dims_compatible(lhs.shape[a], rhs.shape[b]):
            raise op_error(op, f"lhs dimension {a} ({lhs.shape[a]}) and rhs dimension {b} "
                               f"({rhs.shape[b]}) must have the same size")
    r = ragged[0]
    mode1 = r not in lc and r not in lb
    if mode1 != bool(group):
        raise op_error(op, "rhs_group_dimensions must be given exactly when the lhs ragged "
                           "dimension is a non-contracting, non-batch dimension")
    shape = [lhs.shape[i] for i in lb]
    shape += [s for i, s in enumerate(lhs.shape) if i not in lb and i not in lc]
    shape += [s for i, s in enumerate(rhs.shape) if i not in rb + rc + group]
    if r in lc:
        shape = [groups.shape[-1] if groups.rank else None] + shape
    return [TensorType(tuple(shape), lhs.element_type)]


def _scan_split(op) -> int:
    """How many operands are inputs (the rest are initial carries)."""
    segments = op.attributes.get("operandSegmentSizes")
    if segments is not None and hasattr(segments, "values"):
        return int(segments.values[0])
    block = region_block(op, 0, "body")
    args = block_arg_types(block)
    carries = 0
    while (carries < len(op.operands)
           and op.operands[-1 - carries].type == args[-1 - carries]):
        carries += 1
    return len(op.operands) - carries


def _infer_scan(op):
    block = region_block(op, 0, "body")
    n_in = _scan_split(op)
    inputs = [tensor_operand(op, i) for i in range(n_in)]
    inits = [op.operands[i].type for i in range(n_in, len(op.operands))]
    dim = int_attr(op, "dimension")
    bool_attr(op, "is_reverse")
    slices = []
    for t in inputs:
        check_in_range(op, "attribute 'dimension'", [dim], 0, t.rank)
        slices.append(t.with_shape(t.shape[:dim] + t.shape[dim + 1:]))
    check_type_list(op, "body argument", block_arg_types(block), slices + inits)
    rets = block_return_types(op, block, "body")
    n_out = len(rets) - len(inits)
    if n_out < 0:
        raise op_error(op, f"body returns {len(rets)} value(s), expected at least "
                           f"{len(inits)} (one per carry)")
    check_type_list(op, "body carry result", rets[n_out:], inits)
    size = inputs[0].shape[dim] if inputs else None
    outputs = []
    for t in rets[:n_out]:
        if not isinstance(t, TensorType):
            raise op_error(op, f"body output has type {t}, expected a tensor")
        outputs.append(t.with_shape(t.shape[:dim] + (size,) + t.shape[dim:]))
    return outputs + inits


RULES = {
    "top_k": Rule(_infer_top_k),
    "ragged_dot": Rule(_infer_ragged_dot, compare="shape"),
    "scan": Rule(_infer_scan),
}


def rule_for(mnemonic: str) -> Rule:
    return RULES.get(mnemonic) or chlo_rule_for(mnemonic)
