"""The cost graph the solver chooses on: groups of ops sharing one strategy choice, the
resharding costs between them, and the values live at each step.

- A **member** is an argument or a top-level op of the entry function; its strategies
  (``strategies.py``) are indexed by its group's choice ``k``.
- A **group** is one choice among ``K`` strategies. An elementwise op, transpose or reshape
  whose largest operand comes from a group with a choice *follows* it (XLA's followers): it
  joins that group, taking for each ``k`` its cheapest strategy that uses the operand as it
  is laid out under ``k`` (a reshape that cannot: its cheapest with the reshard). A chain
  of such ops is then one variable, not one per op.
- A broadcast of a scalar (``strategies.copied_per_use``) used only by ops of the function
  body follows its first user: it joins the user's group, made in the layout the user wants
  under each ``k``. Every later user gets its own copy of the broadcast made in the layout
  it wants (``copied_values``; ``apply_plan`` inserts it), the copy's compute charged to
  that user and its bytes live at that user's step: a shared ``%ones`` or learning rate ties
  no two users' choices together (it would be one choice with hundreds of edges).
- Costs that depend on one group's choice only (its members' compute and collectives, the
  reshards between members of one group, and those from or to a value with one layout) are
  added to that group's cost vector; the others are **edges**: a matrix of reshard seconds
  from each layout the producer's value can have to each layout the consumer can ask for.
- **Lives** (only with a memory limit): the **steps** are the points of the program where a
  value dies (the live set only grows between two such points, so they dominate the
  others); each value is live over a run of steps, with its bytes per device per choice of
  its group.

Everything is built in program order with lists, never from set or dict iteration over
unordered keys, so the same program gives the same problem.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import numpy as np

from stablehlo.ir.core import Func, Operation, Value
from stablehlo.ir.types import TensorType

from xla_core.spmd.annotations import (CONSTRAINT, PER_VALUE, MeshInfo, op_dims, read_dims,
                                       replicated)
from xla_core.spmd.auto_sharding.costs import CostModel
from xla_core.spmd.auto_sharding.strategies import (FOLLOWING, Strategy, argument_strategies,
                                                    copied_per_use, op_strategies)
from xla_core.spmd.op_rules import spmd_rule
from xla_core.spmd.sharding import SpmdUnsupportedError


@dataclass
class Member:
    op: Operation | None  # None: the argument ``values[0]``
    values: tuple
    strategies: list  # per choice k of its group
    position: int  # in program order (arguments: 0, ops from 1)
    fixed: bool = False  # annotated by the user


@dataclass
class Group:
    members: list
    cost: np.ndarray  # seconds per choice

    @property
    def size(self) -> int:
        return len(self.cost)


@dataclass
class Edge:
    src: int  # producer's group
    dst: int  # consumer's group
    src_layout: list  # per src choice: index into the rows of ``costs``
    dst_layout: list  # per dst choice: index into the columns of ``costs``
    costs: np.ndarray


@dataclass(frozen=True)
class Live:
    """A value live at steps ``first`` up to (not including) ``stop``, holding ``nbytes[k]``
    bytes per device under its group's choice ``k``."""
    first: int
    stop: int
    group: int
    nbytes: np.ndarray


@dataclass
class CostGraph:
    groups: list = field(default_factory=list)
    edges: list = field(default_factory=list)
    place: dict = field(default_factory=dict)  # value -> (group, member, result index)
    lives: list = field(default_factory=list)  # Live per value (only with a memory limit)
    step_count: int = 0
    copies: dict = field(default_factory=dict)  # copied value -> {layout: its Strategy}
    first_users: dict = field(default_factory=dict)  # copied value -> the op it follows
    reshard_matrices: dict = field(default_factory=dict)  # (type, rows, cols) -> seconds

    def layout(self, value: Value, k: int) -> tuple:
        g, m, i = self.place[value]
        return self.groups[g].members[m].strategies[k].outs[i]

    def arrival_seconds(self, value: Value, have, want, model: CostModel,
                        user: Operation) -> float:
        """Seconds to give ``user`` ``value`` (laid out ``have``) in layout ``want``: the
        compute of its own copy for a later user of a copied broadcast (see the module
        doc), else the reshard."""
        if value in self.copies and self.first_users[value] is not user:
            return self.copies[value][tuple(want)].compute
        return model.reshard(value.type, have, want)


def build_graph(func: Func, info: MeshInfo, model: CostModel, memory: bool) -> CostGraph:
    """The cost graph of ``func`` (inlined: calls run whole); ``memory`` adds the values'
    lives over the steps."""
    graph = CostGraph()
    for i, arg in enumerate(func.body.arguments):
        if not isinstance(arg.type, TensorType):
            raise SpmdUnsupportedError(f"@{func.name} argument {i} of type {arg.type}: only "
                                       f"tensors are partitioned")
        dims = read_dims(info, func.arg_attrs(i), arg.type.shape, f"@{func.name} argument {i}")
        strategies = argument_strategies(arg.type, model) if dims is None \
            else [Strategy((dims,), (), 0.0, 0.0)]
        _new_group(graph, Member(None, (arg,), strategies, 0, dims is not None))
    ops = func.body.operations[:-1]
    known: dict = {}
    graph.first_users = copied_values(func)
    positions = {}
    for position, op in enumerate(ops, start=1):
        positions[op] = position
        if op.results and op.results[0] in graph.first_users:
            graph.copies[op.results[0]] = {
                s.outs[0]: s for s in _strategies(op, model, info, known)}
            continue  # placed with its first user
        _add_op(graph, op, position, info, model, known)
        for j, v in enumerate(op.operands):
            if graph.first_users.get(v) is op and v not in graph.place:
                _add_copied(graph, v, positions[v.owner], op, j)
    for g, group in enumerate(graph.groups):
        for m, member in enumerate(group.members):
            if member.op is not None:
                _add_operand_costs(graph, g, m, model)
    _add_result_costs(graph, func, info, model)
    if memory:
        graph.lives, graph.step_count = _lives(graph, func, model)
    return graph


def _new_group(graph: CostGraph, member: Member) -> int:
    cost = np.array([s.compute + s.communication for s in member.strategies], dtype=float)
    graph.groups.append(Group([member], cost))
    g = len(graph.groups) - 1
    for i, v in enumerate(member.values):
        graph.place[v] = (g, 0, i)
    return g


def _add_op(graph: CostGraph, op: Operation, position: int, info: MeshInfo,
            model: CostModel, known: dict) -> None:
    strategies = _strategies(op, model, info, known)
    fixed = PER_VALUE in op.attributes
    if fixed:  # the user's sharding of the results is kept
        outs = tuple(op_dims(info, op))
        kept = [s for s in strategies if s.outs == outs]
        ins = tuple(None if not isinstance(v.type, TensorType) else replicated(len(v.type.shape))
                    for v in op.operands)
        strategies = kept or [Strategy(outs, ins, model.compute(op, 1, ins, outs), 0.0,
                                       "whole, then cut")]
    leader = None if fixed else _followed(graph, op)
    if leader is None:
        _new_group(graph, Member(op, tuple(op.results), strategies, position, fixed))
        return
    j = leader
    g, _, _ = graph.place[op.operands[j]]
    group = graph.groups[g]
    t = op.operands[j].type
    chosen = []
    for k in range(group.size):
        have = graph.layout(op.operands[j], k)
        same = [s for s in strategies if s.ins[j] == have]  # a follower keeps the layout
        chosen.append(min(same or strategies, key=lambda s: s.compute + s.communication +
                          model.reshard(t, have, s.ins[j])))
    group.members.append(Member(op, tuple(op.results), chosen, position))
    group.cost = group.cost + np.array([s.compute + s.communication for s in chosen])
    for i, r in enumerate(op.results):
        graph.place[r] = (g, len(group.members) - 1, i)


def copied_values(func: Func) -> dict:
    """The broadcasts of scalars of ``func``'s body that follow their first user (see the
    module doc) -> that user: those the user did not annotate, used only as operands of ops
    of the body (not returned, not read inside a region or by a sharding constraint)."""
    ops = func.body.operations
    candidates = {op.results[0] for op in ops[:-1]
                  if copied_per_use(op) and PER_VALUE not in op.attributes}
    first: dict = {}
    for op in ops[:-1]:
        for v in op.operands:
            if v in candidates:
                first.setdefault(v, op)
        if op.name == CONSTRAINT:  # reshards the value itself (apply_plan leaves it)
            candidates.difference_update(op.operands)
        for region in op.regions:
            for nested in region.walk():
                candidates.difference_update(nested.operands)
    candidates.difference_update(ops[-1].operands)
    return {v: user for v, user in first.items() if v in candidates and user.results}


def _add_copied(graph: CostGraph, v: Value, position: int, user: Operation, j: int) -> None:
    """Put broadcast ``v`` in the group of ``user`` (its first user, operand ``j``), made in
    the layout the user wants under each choice."""
    g, m, _ = graph.place[user.results[0]]
    group = graph.groups[g]
    chosen = [graph.copies[v][tuple(s.ins[j])] for s in group.members[m].strategies]
    group.members.append(Member(v.owner, (v,), chosen, position))
    group.cost = group.cost + np.array([s.compute for s in chosen])
    graph.place[v] = (g, len(group.members) - 1, 0)


def _strategies(op: Operation, model: CostModel, info: MeshInfo, known: dict) -> list:
    """``op_strategies``, computed once per kind of op: the layers of a deep model repeat
    the same ops on the same types, and a strategy depends on nothing else (an op with
    regions, or attributes that cannot be hashed, is computed each time)."""
    if op.regions:
        return op_strategies(op, model, info)
    key = (op.name, tuple(v.type for v in op.operands), tuple(op.result_types),
           tuple(sorted(op.attributes.items())))
    try:
        found = known.get(key)
    except TypeError:  # an unhashable attribute
        return op_strategies(op, model, info)
    if found is None:
        found = known[key] = op_strategies(op, model, info)
    return found


def _followed(graph: CostGraph, op: Operation):
    """The operand ``op`` follows (see the module doc), or None: the first one as large as
    its result whose group has a choice (not a copied broadcast: its later users get
    copies)."""
    if len(op.results) != 1 or spmd_rule(op).split not in FOLLOWING:
        return None
    size = np.prod(op.results[0].type.shape)
    for j, v in enumerate(op.operands):
        if v in graph.place and v not in graph.copies and isinstance(v.type, TensorType) \
                and v.type.shape \
                and np.prod(v.type.shape) == size and graph.groups[graph.place[v][0]].size > 1:
            return j
    return None


def _add_operand_costs(graph: CostGraph, g: int, m: int, model: CostModel) -> None:
    member = graph.groups[g].members[m]
    for j, v in enumerate(member.op.operands):
        if v not in graph.place or not isinstance(v.type, TensorType):
            continue
        wants = [s.ins[j] for s in member.strategies]
        _link(graph, v, g, wants, model, member.op)


def _link(graph: CostGraph, v: Value, dst: int, wants: list, model: CostModel,
          user: Operation) -> None:
    """Charge the reshards of ``v`` to the layouts ``wants[k]`` group ``dst`` asks for."""
    if v in graph.copies and graph.first_users[v] is not user:  # its own copy
        graph.groups[dst].cost += [graph.copies[v][tuple(w)].compute for w in wants]
        return
    src = graph.place[v][0]
    source = graph.groups[src]
    haves = [graph.layout(v, k) for k in range(source.size)]
    if src == dst:
        graph.groups[dst].cost += [model.reshard(v.type, h, w) for h, w in zip(haves, wants)]
        return
    rows, src_index = _distinct(haves)
    cols, dst_index = _distinct(wants)
    key = (v.type, tuple(rows), tuple(cols))  # the layers of a deep model repeat it
    costs = graph.reshard_matrices.get(key)
    if costs is None:
        costs = graph.reshard_matrices[key] = np.array(
            [[model.reshard(v.type, h, w) for w in cols] for h in rows])
    if len(rows) == 1:
        graph.groups[dst].cost += costs[0, dst_index]
    elif len(cols) == 1:
        source.cost += costs[src_index, 0]
    elif costs.any():
        graph.edges.append(Edge(src, dst, src_index, dst_index, costs))


def _distinct(layouts: list) -> tuple:
    """``(distinct layouts in first-seen order, index of each)``."""
    seen: dict = {}
    index = [seen.setdefault(dims, len(seen)) for dims in layouts]
    return list(seen), np.array(index)


def _add_result_costs(graph: CostGraph, func: Func, info: MeshInfo, model: CostModel) -> None:
    """A result the user annotated asks for that layout (a consumer with one strategy)."""
    for i, v in enumerate(func.body.terminator.operands):
        dims = read_dims(info, func.result_attrs(i), v.type.shape, f"@{func.name} result {i}")
        if dims is not None and v in graph.place:
            g = graph.place[v][0]
            graph.groups[g].cost += [model.reshard(v.type, graph.layout(v, k), dims)
                                     for k in range(graph.groups[g].size)]


def last_uses(func: Func, first_users: dict) -> dict:
    """Value -> the position (ops of the body from 1) of the last op reading it, nested
    reads and the return included; a copied broadcast (``copied_values``) is read last by
    its first user (the later ones read their copies, which read its scalar)."""
    ops = func.body.operations
    position_of = {op: position for position, op in enumerate(ops, start=1)}
    last: dict = {}
    for position, op in enumerate(ops, start=1):
        for nested in op.walk():
            for v in nested.operands:
                last[v] = position
    for v, user in first_users.items():
        scalar = v.owner.operands[0]  # the copies read it where v's later users were
        last[scalar] = max(last[scalar], last[v])
        last[v] = position_of[user]
    return last


def _lives(graph: CostGraph, func: Func, model: CostModel) -> tuple:
    """``(lives, step count)``: the steps are the points where a value dies (and the end);
    each value (and each copy of a broadcast, live for its user alone) is live over a run
    of them."""
    last = last_uses(func, graph.first_users)
    spans = []  # (born, dies, group, bytes per choice)
    for v, (g, m, _) in graph.place.items():
        if isinstance(v.type, TensorType):
            born = graph.groups[g].members[m].position
            nbytes = np.array([model.local_bytes(v.type, graph.layout(v, k))
                               for k in range(graph.groups[g].size)])
            spans.append((born, last.get(v, born), g, nbytes))
    for t, found in _later_copies(graph, model).items():
        spans += [(t, t, g, nbytes) for g, nbytes in found]
    ends = sorted({dies for _, dies, _, _ in spans} | {len(func.body.operations)})
    return [Live(bisect.bisect_left(ends, born), bisect.bisect_right(ends, dies), g, nbytes)
            for born, dies, g, nbytes in spans], len(ends)


def _later_copies(graph: CostGraph, model: CostModel) -> dict:
    """Position -> ``[(group, bytes per choice)]`` of the copies of broadcasts made for the
    op there (live for that op alone)."""
    out: dict = {}
    for g, group in enumerate(graph.groups):
        for member in group.members:
            for j, v in enumerate(() if member.op is None else member.op.operands):
                if v in graph.copies and graph.first_users[v] is not member.op:
                    nbytes = np.array([model.local_bytes(v.type, s.ins[j])
                                       for s in member.strategies])
                    out.setdefault(member.position, []).append((g, nbytes))
    return out


__all__ = ["CostGraph", "Edge", "Group", "Live", "Member", "build_graph", "copied_values",
           "last_uses"]
