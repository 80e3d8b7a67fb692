"""Choices removed from a cost graph before the solve because another one of the same group
is never worse (dead-end elimination): exact, the optimum stays.

Choice ``k`` of a group goes when a choice ``k2`` of it costs no more whatever its
neighbours choose: ``cost[k2] - cost[k] + sum over its edges of max over the neighbour's
choices j of (edge[k2, j] - edge[k, j]) <= 0``, and (with a memory limit) ``k2`` holds no
more bytes than ``k`` in any value of the group. A plan using ``k`` becomes one using ``k2``
at no extra cost, so some optimal plan never uses ``k``. Two choices that cost the same in
every respect keep the first (the solver then has no tie to break between them). A group
whose neighbour lost choices is looked at again: fewer neighbour choices can make more of
its own dominated.

Afterwards the groups, their members' strategies, the edges (rows and columns no choice
uses any more dropped; an edge left with one row or one column folded into the other
group's cost) and the values' lives hold only the remaining choices.
"""
from __future__ import annotations

import numpy as np

from xla_core.spmd.auto_sharding.graph import CostGraph, Live

_TOLERANCE = 1e-15  # seconds: below any cost difference the model makes


def prune_dominated(graph: CostGraph) -> int:
    """Remove the dominated choices of ``graph``'s groups; how many went."""
    alive = [np.ones(group.size, dtype=bool) for group in graph.groups]
    incident: list = [[] for _ in graph.groups]
    for edge in graph.edges:
        incident[edge.src].append(edge)
        incident[edge.dst].append(edge)
    held: list = [[] for _ in graph.groups]  # per group: bytes per choice of each value
    for live in graph.lives:
        held[live.group].append(live.nbytes)
    removed = 0
    dirty = np.array([group.size > 1 for group in graph.groups])
    while dirty.any():
        for g in np.flatnonzero(dirty):  # in group order: the same graph, the same result
            dirty[g] = False
            if alive[g].sum() < 2:
                continue
            worse = _dominated(graph, g, alive, incident[g], held[g])
            if worse.any():
                alive[g] &= ~worse
                removed += int(worse.sum())
                for edge in incident[g]:  # their choices may be dominated now
                    dirty[edge.dst if edge.src == g else edge.src] = True
    if removed:
        _keep(graph, alive)
    return removed


def _dominated(graph: CostGraph, g: int, alive: list, edges: list, held: list) -> np.ndarray:
    """Per choice of group ``g``: whether a remaining choice dominates it."""
    cost = graph.groups[g].cost
    # gain[k2, k]: the most switching from k to k2 can cost, whatever the neighbours choose
    gain = cost[:, None] - cost[None, :]
    for edge in edges:
        mine = edge.src_layout if edge.src == g else edge.dst_layout
        other = edge.dst if edge.src == g else edge.src
        theirs = (edge.dst_layout if edge.src == g else edge.src_layout)[alive[other]]
        block = edge.costs[mine][:, theirs] if edge.src == g else edge.costs[theirs][:, mine].T
        gain = gain + np.max(block[:, None, :] - block[None, :, :], axis=2)
    better = gain < -_TOLERANCE
    index = np.arange(len(cost))
    better |= (gain <= _TOLERANCE) & (index[:, None] < index[None, :])  # a tie: keep the first
    for nbytes in held:  # no more bytes in any value
        better &= nbytes[:, None] <= nbytes[None, :]
    np.fill_diagonal(better, False)
    better &= alive[g][:, None]
    return better.any(axis=0) & alive[g]


def _keep(graph: CostGraph, alive: list) -> None:
    """Restrict ``graph`` to the ``alive`` choices (see the module doc)."""
    for group, keep in zip(graph.groups, alive):
        group.cost = group.cost[keep]
        for member in group.members:
            member.strategies = [s for s, k in zip(member.strategies, keep) if k]
    edges = []
    for edge in graph.edges:
        src_layout = edge.src_layout[alive[edge.src]]
        dst_layout = edge.dst_layout[alive[edge.dst]]
        rows, src_index = np.unique(src_layout, return_inverse=True)
        cols, dst_index = np.unique(dst_layout, return_inverse=True)
        costs = edge.costs[rows][:, cols]
        if len(rows) == 1:
            graph.groups[edge.dst].cost = graph.groups[edge.dst].cost + costs[0, dst_index]
        elif len(cols) == 1:
            graph.groups[edge.src].cost = graph.groups[edge.src].cost + costs[src_index, 0]
        else:
            edge.src_layout, edge.dst_layout, edge.costs = src_index, dst_index, costs
            edges.append(edge)
    graph.edges = edges
    graph.lives = [Live(live.first, live.stop, live.group, live.nbytes[alive[live.group]])
                   for live in graph.lives]


__all__ = ["prune_dominated"]
