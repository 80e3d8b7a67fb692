"""Which results of an op may be written into the storage of an operand.

``inplace_pairs(op)`` lists ``(result_index, operand_index)`` pairs for which
writing result element i over operand element i is safe, whatever else the
program does: the op reads operand element i only to compute result element i
(after which it is not read again), and the two have the same shape and byte
size. Whether the operand's storage may actually be taken is the caller's
question (it must die at this op and not be a caller-owned parameter):
buffer assignment asks it of the schedule, the cpu runtime of its reference
counts.

Ops that qualify:

* an elementwise op (``ELEMENTWISE`` trait): any operand with the result's
  shape and byte size (a convert f32 -> i32 qualifies, f32 -> f64 does not);
* a fusion whose kind writes in place (``FusionKind.writes_in_place``: the loop kind of
  xla_core/fusion/kinds.py): a parameter whose every
  use inside the decomposition, transitively, is an elementwise op producing a
  value of the parameter's shape (or the return), paired with every result of
  that shape and byte size. A broadcast, transpose, slice, reshape or
  concatenate on the way would read element i for some other result element,
  so any of them disqualifies the parameter.
"""
from __future__ import annotations

from stablehlo.ir.attributes import SymbolRefAttr
from stablehlo.ir.core import Module, Operation, Value
from stablehlo.ir.ops.base import ELEMENTWISE, TERMINATOR
from stablehlo.ir.types import TensorType
from xla_core.buffers.liveness import BuffersError, is_fusion, module_of, same_storage
from xla_core.fusion.kinds import kind_of_fusion


def inplace_pairs(op: Operation, module: Module | None = None) -> list[tuple[int, int]]:
    """``(result_index, operand_index)`` pairs legal to share storage (see the module doc).

    Sorted by result, then operand: a result may list several candidate operands, of
    which the caller takes the first whose storage is free. ``module`` (default: found
    through ``op``'s parents) holds a fusion's decomposition.
    """
    if is_fusion(op):
        return _fusion_pairs(op, module if module is not None else module_of(op))
    opdef = op.opdef
    if opdef is None or not opdef.has(ELEMENTWISE):
        return []
    return [(r, k) for r, result in enumerate(op.results)
            for k, operand in enumerate(op.operands) if same_storage(result.type, operand.type)]


def _fusion_pairs(op: Operation, module: Module | None) -> list[tuple[int, int]]:
    kind = kind_of_fusion(op)
    if kind is None or not kind.writes_in_place:
        return []
    target = op.attributes.get("decomposition")
    if not isinstance(target, SymbolRefAttr) or module is None or \
            not module.has_function(target.name):
        raise BuffersError(f"{op.where()}: fusion decomposition not found in the module")
    body = module.lookup(target.name).body
    if body is None:
        raise BuffersError(f"{op.where()}: fusion decomposition @{target.name} has no body")
    readers: dict[Value, list[Operation]] = {}
    for inner in body.operations:
        for v in inner.operands:
            readers.setdefault(v, []).append(inner)
    pairs = []
    for k, param in enumerate(body.arguments):
        if not _read_at_same_index(param, readers):
            continue
        pairs.extend((r, k) for r, result in enumerate(op.results)
                     if same_storage(result.type, op.operands[k].type))
    return sorted(pairs)


def _read_at_same_index(param: Value, readers: dict) -> bool:
    """Whether every value computed from ``param`` is elementwise, at ``param``'s shape."""
    shape = param.type.shape if isinstance(param.type, TensorType) else None
    seen, stack = {param}, [param]
    while stack:
        for reader in readers.get(stack.pop(), ()):
            opdef = reader.opdef
            if opdef is not None and opdef.has(TERMINATOR):
                continue
            if opdef is None or not opdef.has(ELEMENTWISE):
                return False
            for result in reader.results:
                if not isinstance(result.type, TensorType) or result.type.shape != shape:
                    return False
                if result not in seen:
                    seen.add(result)
                    stack.append(result)
    return True
