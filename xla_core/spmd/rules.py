"""How shardings pass through ops, dimension by dimension: the rules propagation applies and
the partitioner relies on (a sharding these rules map is one the op can run on locally).

Every function takes and returns per-dimension axis tuples (see ``annotations``).
"""
from __future__ import annotations

import math

from stablehlo.ir.core import Operation
from stablehlo.ir.ops.base import ELEMENTWISE


def is_elementwise(op: Operation) -> bool:
    """Elementwise ops (convert, compare, select, clamp included) map dims one to one."""
    opdef = op.opdef
    return opdef is not None and ELEMENTWISE in opdef.traits


def dot_dims(op: Operation) -> tuple:
    """``(lhs_batch, rhs_batch, lhs_contracting, rhs_contracting, lhs_free, rhs_free)``;
    the result's dimensions are batch, then lhs free, then rhs free."""
    dnums = op.attributes["dot_dimension_numbers"]
    lb = tuple(dnums.get("lhs_batching_dimensions", ()) or ())
    rb = tuple(dnums.get("rhs_batching_dimensions", ()) or ())
    lc = tuple(dnums.get("lhs_contracting_dimensions", ()) or ())
    rc = tuple(dnums.get("rhs_contracting_dimensions", ()) or ())
    lhs_rank = len(op.operands[0].type.shape)
    rhs_rank = len(op.operands[1].type.shape)
    lf = tuple(d for d in range(lhs_rank) if d not in lb + lc)
    rf = tuple(d for d in range(rhs_rank) if d not in rb + rc)
    return lb, rb, lc, rc, lf, rf


def dot_result_positions(op: Operation) -> tuple:
    """Result dimension of each lhs and rhs dimension (None for contracting ones)."""
    lb, rb, _, _, lf, rf = dot_dims(op)
    lhs = {d: i for i, d in enumerate(lb)}
    rhs = {d: i for i, d in enumerate(rb)}
    lhs.update({d: len(lb) + i for i, d in enumerate(lf)})
    rhs.update({d: len(lb) + len(lf) + i for i, d in enumerate(rf)})
    return lhs, rhs


def transpose_forward(dims, permutation) -> tuple:
    return tuple(dims[p] for p in permutation)


def transpose_backward(dims, permutation) -> tuple:
    out = [()] * len(dims)
    for k, p in enumerate(permutation):
        out[p] = dims[k]
    return tuple(out)


def broadcast_forward(dims, operand_shape, result_shape, mapping) -> tuple:
    """Operand dims keep their axes where they are not expanded; new dims are whole."""
    out = [()] * len(result_shape)
    for i, d in enumerate(mapping):
        if operand_shape[i] == result_shape[d]:
            out[d] = dims[i]
    return tuple(out)


def broadcast_backward(dims, operand_shape, result_shape, mapping) -> tuple:
    return tuple(dims[d] if operand_shape[i] == result_shape[d] else ()
                 for i, d in enumerate(mapping))


def reduce_forward(dims, reduced) -> tuple:
    return tuple(axes for d, axes in enumerate(dims) if d not in reduced)


def reduce_backward(dims, rank: int, reduced) -> tuple:
    kept = iter(dims)
    return tuple(() if d in reduced else next(kept) for d in range(rank))


def reshape_groups(source, target) -> list:
    """Runs of dimensions with equal element counts: ``[(source dims, target dims)]``."""
    groups, i, j = [], 0, 0
    while i < len(source) or j < len(target):
        gi, gj, pi, pj = [], [], 1, 1
        if i < len(source):
            gi.append(i)
            pi *= source[i]
            i += 1
        if j < len(target):
            gj.append(j)
            pj *= target[j]
            j += 1
        while pi != pj:
            if pi < pj and i < len(source):
                gi.append(i)
                pi *= source[i]
                i += 1
            elif j < len(target):
                gj.append(j)
                pj *= target[j]
                j += 1
            else:
                break
        groups.append((gi, gj))
    return groups


def reshape_map(dims, source, target, axis_size) -> tuple:
    """The sharding of a reshape's other side: within each run of dimensions of equal element
    count, a split of the run's major (first non-1) dimension maps to the other side's major
    dimension when it divides it: each device then holds one contiguous chunk of the run on
    both sides. Splits of minor dimensions map to nothing (the partitioner gathers them)."""
    out = [()] * len(target)
    for gi, gj in reshape_groups(source, target):
        major = next((d for d in gi if source[d] > 1), None)
        if major is None or any(dims[d] for d in gi if d != major) or not dims[major]:
            continue
        pieces = math.prod(axis_size(a) for a in dims[major])
        goal = next((d for d in gj if target[d] > 1), None)
        if goal is not None and target[goal] % pieces == 0:
            out[goal] = dims[major]
    return tuple(out)


__all__ = ["broadcast_backward", "broadcast_forward", "dot_dims", "dot_result_positions",
           "is_elementwise", "reduce_backward", "reduce_forward", "reshape_groups", "reshape_map",
           "transpose_backward", "transpose_forward"]
