"""transpose-folding: fold transposes around ``dot_general`` into its dimension numbers.

Two rewrites, as XLA's TransposeFolding and its algebraic simplifier do:

* an operand ``transpose(x, p)`` of a dot_general is replaced by ``x``, each
  batching and contracting dimension ``d`` becoming ``p[d]``, when that keeps
  the result's layout: the result lists the operand's free (neither batching
  nor contracting) dimensions in increasing order, so ``p`` must keep their
  relative order;
* ``transpose(dot_general(a, b), p)``, where the dot has no other use and
  ``p`` reorders only the batch dimensions, and either keeps the free
  dimensions or puts ``b``'s free dimensions before ``a``'s, becomes one
  dot_general with the batching lists reordered and, in the second case,
  ``a`` and ``b`` swapped (with their precision configs).

Why: on the cpu backend a dot_general reads an operand in place (BLAS
transpose flags absorb ``[B, K, M]`` layouts) or packs it once, so a separate
transpose kernel is a memory round trip for nothing; and an output fusion
takes its dot's operands straight from parameters, so a transpose before a
dot would otherwise stay a kernel of its own. JAX emits both patterns
(attention's ``q @ k.T`` after the head split, the ``transpose(dot)`` of
every weight gradient).

Results are the same products summed over the same contracting elements;
only the order in which a BLAS kernel accumulates them may change, so values
agree to rounding (not bit for bit) with the unfolded program.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from stablehlo.ir.attributes import ArrayAttr, StructAttr
from stablehlo.ir.core import Block, Module, Operation, Value
from stablehlo.ir.ops import OPS
from stablehlo.ir.ops.shape_inference import int_list, struct_ints
from xla_core.ir_utils import blocks_of, replace_uses
from xla_core.passes.base import Pass, PassContext

_DOT = "stablehlo.dot_general"
_TRANSPOSE = "stablehlo.transpose"
_FIELDS = ("lhs_batching_dimensions", "rhs_batching_dimensions",
           "lhs_contracting_dimensions", "rhs_contracting_dimensions")


@dataclass(frozen=True)
class TransposeFoldingPass(Pass):
    name = "transpose-folding"

    def run(self, module: Module, ctx: PassContext) -> bool:
        changed = False
        for func in module.functions():
            if func.body is None:
                continue
            uses = Counter(v for op in func.op.walk() for v in op.operands)
            replacements: dict[Value, Value] = {}
            for block in list(blocks_of(func.op)):
                changed |= _fold_block(block, uses, replacements)
            replace_uses(func.op, replacements)
        return changed


def _fold_block(block: Block, uses: Counter, replacements: dict) -> bool:
    changed = False
    kept: list[Operation] = []
    replaced_dots: set[Operation] = set()  # their one use, a transpose, became a new dot
    for op in block.operations:
        if op.name == _DOT:
            changed |= _fold_operands(op, uses)
        elif op.name == _TRANSPOSE and (new := _fold_result(op, uses)) is not None:
            new.parent = block
            kept.append(new)
            replacements[op.result] = new.result
            replaced_dots.add(op.operands[0].owner)
            op.parent = None
            changed = True
            continue
        kept.append(op)
    if changed:
        for dot in replaced_dots:
            dot.parent = None
            uses.subtract(dot.operands)
        block.operations[:] = [op for op in kept if op not in replaced_dots]
    return changed


def _dims(op: Operation) -> dict[str, list]:
    attr = op.attributes["dot_dimension_numbers"]
    return {f: list(struct_ints(attr, f)) for f in _FIELDS}


def _with_dims(op: Operation, dims: dict) -> StructAttr:
    attr = op.attributes["dot_dimension_numbers"]
    fields = [(k, v) for k, v in attr.fields if k not in _FIELDS]
    fields += [(f, tuple(dims[f])) for f in _FIELDS]
    return StructAttr(attr.kind, tuple(fields), attr.dialect)


def _fold_operands(op: Operation, uses: Counter) -> bool:
    # dot_general(transpose(x, p), y) -> dot_general(x, y) with lhs dims d -> p[d] (same for rhs)
    changed = False
    for index, side in enumerate(("lhs", "rhs")):
        operand = op.operands[index]
        transpose = operand.owner
        if not isinstance(transpose, Operation) or transpose.name != _TRANSPOSE:
            continue
        if transpose.parent is None:
            # this transpose became a dot itself (_fold_result, earlier in the block): its
            # operand, that dot's old form, is gone; the use is redirected to the new dot
            continue
        p = int_list(transpose, "permutation")
        dims = _dims(op)
        batch = dims[f"{side}_batching_dimensions"]
        contract = dims[f"{side}_contracting_dimensions"]
        free = [d for d in range(len(p)) if d not in batch and d not in contract]
        mapped_free = [p[d] for d in free]
        if mapped_free != sorted(mapped_free):
            continue  # the result would list the free dimensions in another order
        dims[f"{side}_batching_dimensions"] = [p[d] for d in batch]
        dims[f"{side}_contracting_dimensions"] = [p[d] for d in contract]
        source = transpose.operands[0]
        op.operands[index] = source
        op.attributes["dot_dimension_numbers"] = _with_dims(op, dims)
        uses[operand] -= 1
        uses[source] += 1
        changed = True
    if changed:
        OPS.get(_DOT).verify(op)
    return changed


def _fold_result(transpose: Operation, uses: Counter) -> Operation | None:
    # transpose(dot_general(a, b), p) -> dot_general(a, b) or dot_general(b, a),
    # the batching lists reordered
    dot = transpose.operands[0].owner
    if not isinstance(dot, Operation) or dot.name != _DOT or uses[dot.result] != 1:
        return None
    if "algorithm" in dot.attributes:
        return None  # its lhs/rhs fields would need swapping too: left alone
    dims = _dims(dot)
    a, b = dot.operands
    nb = len(dims["lhs_batching_dimensions"])
    nl = a.type.rank - nb - len(dims["lhs_contracting_dimensions"])
    nr = b.type.rank - nb - len(dims["rhs_contracting_dimensions"])
    p = int_list(transpose, "permutation")
    order = p[:nb]
    if sorted(order) != list(range(nb)):
        return None
    lhs_free = list(range(nb, nb + nl))
    rhs_free = list(range(nb + nl, nb + nl + nr))
    if p[nb:] == lhs_free + rhs_free:
        swap = False
    elif p[nb:] == rhs_free + lhs_free:
        swap = True
    else:
        return None
    new_dims = {f: [dims[f][i] for i in order] for f in _FIELDS[:2]}
    new_dims.update({f: dims[f] for f in _FIELDS[2:]})
    operands = [a, b]
    attributes = dict(dot.attributes)
    if swap:
        operands = [b, a]
        new_dims = {f: new_dims[_other(f)] for f in _FIELDS}
        precision = attributes.get("precision_config")
        if isinstance(precision, ArrayAttr) and len(precision.values) == 2:
            attributes["precision_config"] = ArrayAttr(precision.values[::-1])
    new = Operation(_DOT, operands, [transpose.result.type], attributes, (), dot.location)
    new.attributes["dot_dimension_numbers"] = _with_dims(dot, new_dims)
    new.results[0].name_hint = transpose.result.name_hint
    OPS.get(_DOT).verify(new)
    uses.subtract([dot.result])
    uses.update(operands)
    return new


def _other(field: str) -> str:
    return field.replace("lhs", "@").replace("rhs", "lhs").replace("@", "rhs")
