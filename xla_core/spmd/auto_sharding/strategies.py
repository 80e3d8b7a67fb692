"""Strategies: the ways one op can run over the mesh, each with what it costs.

A ``Strategy`` fixes the layout of every result (``outs``) and the layout every operand must
arrive in (``ins``), with the seconds one device computes and communicates inside the op.
They are derived from the op's SPMD rule (``op_rules.SPMD_RULES``) and the dimension maps of
``rules.py``, the same facts propagation and the partitioner use, so a strategy is a way the
partitioner runs the op once its operands arrive as ``ins`` (the auto-sharding pass puts a
sharding constraint where they do not):

- elementwise, transpose, broadcast_in_dim: one strategy per layout of the result, the
  operands mapped back to it (a broadcast's new dims are cut locally);
- reshape: per result layout, the operand layout that maps to it (else the whole operand,
  reshaped and cut: the partitioner's fallback);
- reduce: per layout of the input; reduced dims split over axes (when the init is the
  reducer's identity) leave partial results, all-reduced over those axes;
- dot_general and convolution (no groups): each mesh axis splits one batch dim, one free dim
  of either side, one contracting pair (an all-reduce of the partial sums over it) or
  nothing; a convolution's spatial dims stay whole;
- constants and iotas: replicated; sharding constraints: their sharding;
- every other op (control flow, gather, scatter, slices, collectives, custom calls, ...):
  replicated operands and results, the op computed whole on every device.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from stablehlo.ir.core import Operation
from stablehlo.ir.types import TensorType

from xla_core.spmd import rules
from xla_core.spmd.annotations import CONSTRAINT, op_dims, replicated
from xla_core.spmd.auto_sharding.costs import CostModel
from xla_core.spmd.auto_sharding.layouts import layouts, pieces
from xla_core.spmd.op_rules import Split, spmd_rule
from xla_core.spmd.partitioner import identity_init


@dataclass(frozen=True)
class Strategy:
    outs: tuple  # per result: its layout
    ins: tuple  # per operand: the layout it must arrive in (None: not a tensor)
    compute: float  # seconds one device computes
    communication: float  # seconds of the op's own collectives
    note: str = ""  # what the op's collectives are, for explanations


def _rank(v) -> int | None:
    return len(v.type.shape) if isinstance(v.type, TensorType) else None


def _whole(op: Operation, model: CostModel) -> list:
    ins = tuple(None if _rank(v) is None else replicated(_rank(v)) for v in op.operands)
    outs = tuple(None if _rank(r) is None else replicated(_rank(r)) for r in op.results)
    return [Strategy(outs, ins, model.compute(op, 1, ins, outs), 0.0, "whole on every device")]


def op_strategies(op: Operation, model: CostModel, info) -> list:
    """The strategies of ``op`` (an op of the entry function, not a terminator); ``info`` is
    the program's ``MeshInfo`` (to read a constraint's sharding)."""
    if any(_rank(r) is None for r in op.results) or not op.results:
        return _whole(op, model)
    if op.name == CONSTRAINT:
        dims = op_dims(info, op)[0]
        return [Strategy((dims,), (dims,), 0.0, 0.0, "sharding constraint")]
    split = spmd_rule(op).split
    build = _BUILDERS.get(split)
    if build is None:
        return _whole(op, model)
    found = build(op, model)
    return found if found else _whole(op, model)


def _per_result_layout(op: Operation, model: CostModel, back) -> list:
    """One strategy per layout of the (single-shaped) result, ``back(layout, i)`` giving
    operand ``i``'s layout."""
    out = []
    for dims in layouts(op.results[0].type.shape, model.mesh):
        ins = tuple(None if _rank(v) is None else back(dims, i) for i, v in enumerate(op.operands))
        outs = (dims,) * len(op.results)
        out.append(Strategy(outs, ins, model.compute(op, pieces(dims, model.mesh), ins, outs),
                            0.0))
    return out


def _elementwise(op: Operation, model: CostModel) -> list:
    return _per_result_layout(
        op, model, lambda dims, i: dims if _rank(op.operands[i]) else ())


def _transpose(op: Operation, model: CostModel) -> list:
    perm = list(op.attributes["permutation"].values)
    return _per_result_layout(op, model, lambda dims, i: rules.transpose_backward(dims, perm))


def _broadcast(op: Operation, model: CostModel) -> list:
    mapping = list(op.attributes["broadcast_dimensions"].values)
    source, result = op.operands[0].type.shape, op.results[0].type.shape
    return _per_result_layout(
        op, model, lambda dims, i: rules.broadcast_backward(dims, source, result, mapping))


def _reshape(op: Operation, model: CostModel) -> list:
    source, result = op.operands[0].type.shape, op.results[0].type.shape
    size = model.mesh.axis_size
    out = []
    for dims in layouts(result, model.mesh):
        back = rules.reshape_map(dims, result, source, size)
        if rules.reshape_map(back, source, result, size) != dims:
            back = replicated(len(source))  # reshaped whole, then cut
        parts = pieces(dims, model.mesh)
        out.append(Strategy((dims,), (back,), model.compute(op, parts, (back,), (dims,)), 0.0))
    return out


def _reduce(op: Operation, model: CostModel) -> list:
    n = len(op.operands) // 2
    reduced = set(op.attributes["dimensions"].values)
    partials = n == 1 and identity_init(op)
    out = []
    for dims in layouts(op.operands[0].type.shape, model.mesh):
        summed = tuple(a for d in sorted(reduced) for a in dims[d])
        if summed and not partials:
            continue  # the same result as the layout with the reduced dims whole
        result = rules.reduce_forward(dims, reduced)
        nbytes = model.local_bytes(op.results[0].type, result)
        comm = model.collective("stablehlo.all_reduce", nbytes, summed) if summed else 0.0
        note = f"all-reduce over {', '.join(summed)}" if summed else ""
        ins, outs = (dims,) * n + ((),) * n, (result,) * n
        out.append(Strategy(outs, ins, model.compute(op, pieces(dims, model.mesh), ins, outs),
                            comm, note))
    return out


def _contraction(op: Operation, model: CostModel) -> list:
    mapped = rules.contraction(op)
    if mapped is None:
        return []
    lhs_at, rhs_at, pairs = mapped
    if op.name == "stablehlo.convolution":  # windowed spatial dims stay whole
        halo, sums = rules.conv_halo(op), rules.conv_window_sums(op)
        lhs_at = {d: r for d, r in lhs_at.items() if d not in halo}
        pairs = [(d, e) for d, e in pairs if d not in sums]
    lhs_shape, rhs_shape = op.operands[0].type.shape, op.operands[1].type.shape
    result = op.results[0].type.shape
    slots = sorted(set(lhs_at.values()) | set(rhs_at.values()))
    slots = [("result", r, result[r]) for r in slots] + \
        [("pair", k, lhs_shape[d]) for k, (d, _) in enumerate(pairs)]
    mesh = model.mesh
    out = []
    for choice in itertools.product(range(-1, len(slots)), repeat=len(mesh.names)):
        axes = [tuple(a for a, c in zip(mesh.names, choice) if c == s)
                for s in range(len(slots))]
        if any(extent % math.prod(mesh.axis_size(a) for a in on) for (_, _, extent), on
               in zip(slots, axes)):
            continue
        res = [()] * len(result)
        summed = [()] * len(pairs)
        for (kind, index, _), on in zip(slots, axes):
            if kind == "result":
                res[index] = on
            else:
                summed[index] = on
        lhs = [res[lhs_at[d]] if d in lhs_at else () for d in range(len(lhs_shape))]
        rhs = [res[rhs_at[e]] if e in rhs_at else () for e in range(len(rhs_shape))]
        for (d, e), on in zip(pairs, summed):
            lhs[d], rhs[e] = on, on
        contracted = tuple(a for on in summed for a in on)
        res = tuple(res)
        nbytes = model.local_bytes(op.results[0].type, res)
        comm = model.collective("stablehlo.all_reduce", nbytes, contracted) if contracted \
            else 0.0
        note = f"all-reduce over {', '.join(contracted)}" if contracted else ""
        parts = math.prod(mesh.axis_size(a) for on in axes for a in on)
        ins = (tuple(lhs), tuple(rhs))
        out.append(Strategy((res,), ins, model.compute(op, parts, ins, (res,)), comm, note))
    return out


_BUILDERS = {
    Split.ELEMENTWISE: _elementwise,
    Split.TRANSPOSE: _transpose,
    Split.BROADCAST: _broadcast,
    Split.RESHAPE: _reshape,
    Split.REDUCE: _reduce,
    Split.CONTRACTION: _contraction,
    Split.REPLICATED: _whole,
}

# Ops whose strategies can share their operand's choice (``graph.py``): their result is as
# large as that operand and follows its layout.
FOLLOWING = frozenset({Split.ELEMENTWISE, Split.TRANSPOSE, Split.RESHAPE})


def copied_per_use(op: Operation) -> bool:
    """A broadcast of a scalar (``%ones``, a learning rate) is made in whatever layout each
    user wants by a copy of the broadcast next to it (nothing moves: every device holds the
    scalar), so it is no shared choice that hundreds of users pull on."""
    return op.name == "stablehlo.broadcast_in_dim" and _rank(op.operands[0]) == 0 \
        and _rank(op.results[0]) is not None


def argument_strategies(t: TensorType, model: CostModel) -> list:
    """An unannotated argument may arrive in any layout; it costs nothing itself."""
    return [Strategy((dims,), (), 0.0, 0.0) for dims in layouts(t.shape, model.mesh)]


__all__ = ["FOLLOWING", "Strategy", "argument_strategies", "copied_per_use", "op_strategies"]
