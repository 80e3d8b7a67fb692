"""Rebuilding a function op by op: the one rewrite loop of the quantizer, its lowering pass,
and the calibration/debugging instrumentation.

``rebuild(module, func, rewrite, extra_results=...)`` replaces ``func`` by a copy built with a
``Builder``: each op of the body is offered to ``rewrite(op, b, operands)`` (``operands``: the
op's operands in the new function); a list of Values returned replaces the op's results, None
copies the op unchanged. Nested regions are copied as they are (the quantizer works on the
function's own block). ``extra_results(mapping)`` may name more values the new function
returns after its own results (calibration observes intermediate values that way).
"""
from __future__ import annotations

from typing import Callable, Optional

from stablehlo.builder import Builder
from stablehlo.ir.attributes import ArrayAttr, DictAttr
from stablehlo.ir.core import Func, Module, Operation
from xla_core.ir_utils import clone_operation

RewriteFn = Callable[[Operation, Builder, list], Optional[list]]


def rebuild(module: Module, func: Func, rewrite: RewriteFn,
            extra_results: Optional[Callable[[dict], list]] = None,
            arg_types: Optional[list] = None) -> Func:
    """Replace ``func`` in ``module`` by its rewritten copy; returns the new function.
    ``arg_types``: the new function's argument types (default: the old ones)."""
    b = Builder(Module())
    mapping: dict = {}
    body = func.body
    signature = arg_types or func.type.inputs
    with b.at(func.op.location), b.function(func.name, signature) as (new, args):
        for old, fresh in zip(body.arguments, args):
            mapping[old] = fresh
        for op in body.operations[:-1]:
            operands = [mapping.get(v, v) for v in op.operands]
            with b.at(op.location):
                replaced = rewrite(op, b, operands)
            if replaced is None:
                b.block.append(clone_operation(op, mapping))
                continue
            for old, fresh in zip(op.results, replaced):
                mapping[old] = fresh
        returned = [mapping.get(v, v) for v in body.terminator.operands]
        extra = extra_results(mapping) if extra_results is not None else []
        with b.at(body.terminator.location):
            b.return_(*returned, *extra)
    for key, value in func.op.attributes.items():
        if key in ("function_type", "sym_name"):
            continue
        if key == "res_attrs" and extra:
            value = ArrayAttr(tuple(value.values) + (DictAttr(),) * len(extra))
        new.op.attributes[key] = value
    operations = module.body.operations
    new.op.parent = module.body
    operations[operations.index(func.op)] = new.op
    return new
