"""Verifiers and type inference of control flow, tokens, I/O and custom calls.

while/if/case regions are checked against their operand and result types;
symbol references (func.call, composite decompositions) need the module's
symbol table and are checked by stablehlo/verify.py instead.
"""
from __future__ import annotations

from stablehlo.ir.attributes import StructAttr
from stablehlo.ir.ops.base import op_error
from stablehlo.ir.ops.shape_inference import (
    Rule, block_arg_types, block_return_types, check_type_list, expect_num_operands,
    int_attr, is_token, region_block, scalar_of, tensor_operand,
)
from stablehlo.ir.types import I1, I32, TensorType, TokenType


def _infer_while(op):
    operand_types = [v.type for v in op.operands]
    cond = region_block(op, 0, "cond")
    body = region_block(op, 1, "body")
    check_type_list(op, "cond argument", block_arg_types(cond), operand_types)
    check_type_list(op, "cond result", block_return_types(op, cond, "cond"), [scalar_of(I1)])
    check_type_list(op, "body argument", block_arg_types(body), operand_types)
    check_type_list(op, "body result", block_return_types(op, body, "body"), operand_types)
    return operand_types


def _branch_types(op, first: int) -> list:
    """The common result types of regions ``first..``, which take no arguments."""
    expected = None
    for i in range(first, len(op.regions)):
        block = region_block(op, i, f"branch #{i - first}")
        if block.arguments:
            raise op_error(op, f"branch #{i - first} must take no arguments, got "
                               f"{len(block.arguments)}")
        types = block_return_types(op, block, f"branch #{i - first}")
        if expected is None:
            expected = types
        else:
            check_type_list(op, f"branch #{i - first} result", types, expected)
    return expected or []


def _infer_if(op):
    expect_num_operands(op, 1)
    pred = tensor_operand(op, 0, "operand #0 (pred)")
    if pred != scalar_of(I1):
        raise op_error(op, f"operand #0 (pred) has type {pred}, expected tensor<i1>")
    if len(op.regions) != 2:
        raise op_error(op, f"expected 2 regions (true and false branches), got "
                           f"{len(op.regions)}")
    return _branch_types(op, 0)


def _infer_case(op):
    expect_num_operands(op, 1)
    index = tensor_operand(op, 0, "operand #0 (index)")
    if index != scalar_of(I32):
        raise op_error(op, f"operand #0 (index) has type {index}, expected tensor<i32>")
    if not op.regions:
        raise op_error(op, "expected at least one branch, got 0")
    return _branch_types(op, 0)


def _infer_optimization_barrier(op):
    return [v.type for v in op.operands]


def _check_tokens(op, operands: bool = True) -> None:
    values = op.operands if operands else op.results
    for i, v in enumerate(values):
        if not is_token(v.type):
            kind = "operand" if operands else "result"
            raise op_error(op, f"{kind} #{i} has type {v.type}, expected !stablehlo.token")


def _infer_after_all(op):
    _check_tokens(op)
    return [TokenType()]


def _infer_create_token(op):
    expect_num_operands(op, 0)
    return [TokenType()]


def _check_data_then_token(op, values, kind: str) -> None:
    """``values`` are tensors followed by one trailing token (infeed/recv results...)."""
    if not values or not is_token(values[-1].type):
        raise op_error(op, f"the last {kind} must be a !stablehlo.token")
    for i, v in enumerate(values[:-1]):
        if not isinstance(v.type, TensorType):
            raise op_error(op, f"{kind} #{i} has type {v.type}, expected a tensor")


def _check_infeed(op):
    expect_num_operands(op, 1)
    _check_tokens(op)
    _check_data_then_token(op, op.results, "result")


def _infer_outfeed(op):
    _check_data_then_token(op, op.operands, "operand")
    return [TokenType()]


def _infer_send(op):
    _check_channel_handle(op)
    return _infer_outfeed(op)


def _check_recv(op):
    expect_num_operands(op, 1)
    _check_channel_handle(op)
    _check_tokens(op)
    _check_data_then_token(op, op.results, "result")


def _check_channel_handle(op):
    """send and recv name their channel: StableHLO declares ``channel_handle`` required."""
    handle = op.attributes.get("channel_handle")
    if not isinstance(handle, StructAttr) or handle.kind != "channel_handle":
        found = "missing" if handle is None else f"{handle}"
        raise op_error(op, f"attribute 'channel_handle' is {found}, expected a "
                           f"#stablehlo.channel_handle<handle = N, type = N>")


def _check_custom_call(op):
    version = int_attr(op, "api_version", 1)
    if not 0 <= version <= 4:
        raise op_error(op, f"attribute 'api_version' is {version}, expected 0 to 4")
    for alias in getattr(op.attributes.get("output_operand_aliases"), "values", ()):
        index = alias.get("operand_index") if hasattr(alias, "get") else None
        if isinstance(index, int) and not 0 <= index < len(op.operands):
            raise op_error(op, f"output_operand_aliases names operand {index}, but the op "
                               f"has {len(op.operands)} operand(s)")


def _check_composite(op):
    name = op.attributes.get("name")
    text = getattr(name, "value", None)
    if not isinstance(text, str) or "." not in text:
        raise op_error(op, f"attribute 'name' is {name}, expected a namespaced op name "
                           f"such as \"my_lib.my_op\"")
    if "decomposition" not in op.attributes:
        raise op_error(op, "requires attribute 'decomposition'")


RULES = {
    "while": Rule(_infer_while),
    "if": Rule(_infer_if),
    "case": Rule(_infer_case),
    "optimization_barrier": Rule(_infer_optimization_barrier),
    "after_all": Rule(_infer_after_all),
    "create_token": Rule(_infer_create_token),
    "infeed": Rule(check=_check_infeed),
    "outfeed": Rule(_infer_outfeed),
    "send": Rule(_infer_send),
    "recv": Rule(check=_check_recv),
    "custom_call": Rule(check=_check_custom_call),
    "composite": Rule(check=_check_composite),
}


def rule_for(mnemonic: str):
    """The Rule declared for ``mnemonic`` in this file, or None."""
    return RULES.get(mnemonic)
