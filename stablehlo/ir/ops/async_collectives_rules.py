"""Verifiers of ``openhlo.async_start`` / ``openhlo.async_done`` (async_collectives.py).

A start's region is one block whose arguments have the start's operand types and whose
ops are exactly one collective of ``ASYNC_COLLECTIVES`` applied to those arguments in
order, then ``stablehlo.return`` of its results; the start's one result is a future of
those result types. Its handle is used exactly once, by a done in the same block (so a
done can always be matched to its start, a pair never spans a loop iteration or a
branch, and no start is left running when its block ends). A done takes one future made
by a start of its block and returns the future's types.
"""
from __future__ import annotations

from stablehlo.ir.ops.base import op_error
from stablehlo.ir.ops.shape_inference import Rule, expect_num_operands, expect_num_results
from stablehlo.ir.types import FutureType

ASYNC_COLLECTIVES = frozenset({
    "stablehlo.all_gather", "stablehlo.all_reduce", "stablehlo.reduce_scatter",
    "stablehlo.all_to_all", "stablehlo.collective_permute",
})
_START, _DONE = "openhlo.async_start", "openhlo.async_done"


def _types(types) -> str:
    return "(" + ", ".join(str(t) for t in types) + ")"


def _check_region(op):
    blocks = op.regions[0].blocks
    if len(blocks) != 1:
        raise op_error(op, f"expected a region of 1 block, got {len(blocks)}")
    block = blocks[0]
    arg_types = [a.type for a in block.arguments]
    if arg_types != op.operand_types:
        raise op_error(op, f"region arguments have types {_types(arg_types)}, expected the "
                           f"operand types {_types(op.operand_types)}")
    ops = block.operations
    if len(ops) != 2 or ops[0].name not in ASYNC_COLLECTIVES:
        names = ", ".join(o.name for o in ops[:-1]) or "nothing"
        raise op_error(op, f"the region must hold exactly one collective (one of "
                           f"{', '.join(sorted(ASYNC_COLLECTIVES))}) before its return, "
                           f"found {names}")
    collective, ret = ops
    if collective.operands != block.arguments:
        raise op_error(op, f"{collective.name} must take the region's arguments, in order")
    if ret.operands != collective.results:
        raise op_error(op, f"the region must return the results of {collective.name}")
    return collective


def _uses(block, value) -> list:
    """Ops of ``block`` (nested ones included) that use ``value``."""
    return [o for o in block.walk() if any(v is value for v in o.operands)]


def _check_start(op):
    expect_num_results(op, 1)
    collective = _check_region(op)
    handle = op.results[0]
    expected = FutureType(tuple(collective.result_types))
    if handle.type != expected:
        raise op_error(op, f"result has type {handle.type}, expected {expected}")
    if op.parent is None:
        return
    users = _uses(op.parent, handle)
    if len(users) != 1 or users[0].name != _DONE or users[0].parent is not op.parent:
        where = ", ".join(u.where() for u in users) or "nothing"
        raise op_error(op, f"its handle must be used by exactly one {_DONE} in the same "
                           f"block, used by: {where}")


def _check_done(op):
    expect_num_operands(op, 1)
    handle = op.operands[0]
    if not isinstance(handle.type, FutureType):
        raise op_error(op, f"operand has type {handle.type}, expected a !openhlo.future")
    start = handle.owner
    if handle.is_block_argument or start.name != _START or start.parent is not op.parent:
        raise op_error(op, f"operand must be the result of a {_START} in the same block")
    if op.result_types != list(handle.type.types):
        raise op_error(op, f"results have types {_types(op.result_types)}, expected "
                           f"{_types(handle.type.types)} (the started collective's)")


RULES = {
    _START: Rule(check=_check_start),
    _DONE: Rule(check=_check_done),
}


def rule_for(name: str):
    """The Rule declared for ``name`` in this file, or None."""
    return RULES.get(name)
