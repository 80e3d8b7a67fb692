"""The integer program over a cost graph, solved with HiGHS (``scipy.optimize.milp``).

Variables: one binary per choice of each group that has a choice (one-hot: they sum to 1),
and per edge one variable per (producer layout, consumer layout) pair. The edge variables
need not be integral: their row sums equal the producer's layout indicator and their column
sums the consumer's, and with one-hot indicators the only solution is the one pair both
chose, so they are continuous in [0, 1] and the branching happens on the groups alone.
Objective: group costs (compute, collectives, reshards that depend on one choice) plus edge
costs. With a memory limit, one row per step of the graph: the bytes per device of the
values live there stay under the limit.

The solve has a time limit. When it runs out, the plan is a greedy one (each group in
program order takes its cheapest choice given the choices before it), not HiGHS's best plan
so far: which plan HiGHS holds when the clock stops depends on the machine's load, and the
same program must give the same plan. ``Solution.status`` says so and the pass logs it as a
warning. scipy is imported here, when a solve runs: it is not needed to import the package.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from xla_core.spmd.auto_sharding.graph import CostGraph
from xla_core.spmd.auto_sharding.layouts import AutoShardingError

LOGGER = logging.getLogger("openhlo.spmd")

OPTIMAL = "optimal"
TIME_LIMIT_FALLBACK = "time limit: greedy fallback"


@dataclass(frozen=True)
class Solution:
    choice: tuple  # per group
    status: str
    seconds: float  # wall time of the solve
    variables: int
    constraints: int
    fallback: bool = False  # the greedy plan, not the solver's


def memory_lower_bound(graph: CostGraph) -> float:
    """The fewest bytes per device the busiest step can hold, over all plans."""
    return max((sum(float(np.min(b)) for _, b in step) for step in graph.steps), default=0.0)


def solve(graph: CostGraph, memory_limit: float | None, time_limit: float) -> Solution:
    start = time.perf_counter()
    if memory_limit is not None:
        needed = memory_lower_bound(graph)
        if needed > memory_limit:
            raise AutoShardingError(
                f"memory limit {_size(memory_limit)} per device is below what any plan "
                f"needs: {_size(needed)} are live at once even with every value split as far "
                f"as the mesh allows")
    offsets, count = [], 0
    for group in graph.groups:
        offsets.append(count if group.size > 1 else None)
        count += group.size if group.size > 1 else 0
    edge_offsets = []
    for edge in graph.edges:
        edge_offsets.append(count)
        count += edge.costs.size
    if count == 0:
        return Solution((0,) * len(graph.groups), OPTIMAL, time.perf_counter() - start, 0, 0)
    rows, cols, vals, lower, upper = [], [], [], [], []

    def row(entries, lo, hi):
        for c, v in entries:
            rows.append(len(lower))
            cols.append(c)
            vals.append(v)
        lower.append(lo)
        upper.append(hi)

    cost = np.zeros(count)
    for group, at in zip(graph.groups, offsets):
        if at is not None:
            cost[at:at + group.size] = group.cost
            row([(at + k, 1.0) for k in range(group.size)], 1.0, 1.0)
    for edge, at in zip(graph.edges, edge_offsets):
        n_rows, n_cols = edge.costs.shape
        cost[at:at + edge.costs.size] = edge.costs.reshape(-1)
        src, dst = offsets[edge.src], offsets[edge.dst]
        for r in range(n_rows):
            row([(at + r * n_cols + c, 1.0) for c in range(n_cols)] +
                [(src + k, -1.0) for k, l in enumerate(edge.src_layout) if l == r], 0.0, 0.0)
        for c in range(n_cols):
            row([(at + r * n_cols + c, 1.0) for r in range(n_rows)] +
                [(dst + k, -1.0) for k, l in enumerate(edge.dst_layout) if l == c], 0.0, 0.0)
    if memory_limit is not None:
        for step in graph.steps:
            fixed = sum(float(b[0]) for g, b in step if offsets[g] is None)
            entries = [(offsets[g] + k, float(v)) for g, b in step if offsets[g] is not None
                       for k, v in enumerate(b)]
            if entries:
                row(entries, -np.inf, memory_limit - fixed)
    x, status = _milp(cost, rows, cols, vals, lower, upper, graph, offsets, time_limit)
    if x is None:
        choice = _greedy(graph)
        LOGGER.warning("auto-sharding: %s", status)
    else:
        choice = tuple(0 if at is None else int(np.argmax(x[at:at + group.size]))
                       for group, at in zip(graph.groups, offsets))
    return Solution(choice, status, time.perf_counter() - start, count, len(lower), x is None)


def _milp(cost, rows, cols, vals, lower, upper, graph, offsets, time_limit: float):
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import csr_array
    integrality = np.zeros(len(cost))
    for group, at in zip(graph.groups, offsets):
        if at is not None:
            integrality[at:at + group.size] = 1
    matrix = csr_array((vals, (rows, cols)), shape=(len(lower), len(cost)))
    result = milp(cost, integrality=integrality, bounds=Bounds(0, 1),
                  constraints=LinearConstraint(matrix, lower, upper),
                  options={"time_limit": time_limit, "disp": False})
    if result.status == 0:
        return result.x, OPTIMAL
    if result.status == 2:
        raise AutoShardingError("no plan meets the memory limit (the live values of some "
                                "steps cannot all be split far enough at once)")
    return None, TIME_LIMIT_FALLBACK if result.status == 1 else \
        f"HiGHS gave no plan ({result.message}): greedy fallback"


def _greedy(graph: CostGraph) -> tuple:
    """Each group in program order takes its cheapest choice given the earlier choices."""
    incoming: dict = {}
    for edge in graph.edges:
        incoming.setdefault(edge.dst, []).append(edge)
    choice = []
    for g, group in enumerate(graph.groups):
        total = group.cost.copy()
        for edge in incoming.get(g, []):
            if edge.src < g:
                total += edge.costs[edge.src_layout[choice[edge.src]], edge.dst_layout]
        choice.append(int(np.argmin(total)))
    return tuple(choice)


def _size(nbytes: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.2f} {unit}"
    return f"{nbytes:.0f} B"


__all__ = ["OPTIMAL", "Solution", "TIME_LIMIT_FALLBACK",
           "memory_lower_bound", "solve"]
