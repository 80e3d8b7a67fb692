"""The integer program over a cost graph, solved with HiGHS (``scipy.optimize.milp``).

Variables: one binary per choice of each group that has a choice (one-hot: they sum to 1),
and per edge one variable per (producer layout, consumer layout) pair. The edge variables
need not be integral: their row sums equal the producer's layout indicator and their column
sums the consumer's, and with one-hot indicators the only solution is the one pair both
chose, so they are continuous in [0, 1] and the branching happens on the groups alone.
Objective: group costs (compute, collectives, reshards that depend on one choice) plus edge
costs. With a memory limit, the bytes per device live at each step of the graph stay under
the limit, written as a running sum over the steps (``_Problem._memory``); the memory rows
are only added when the best plan without them does not fit.

The LP relaxation is solved first (dual simplex): on these graphs its optimum is usually a
plan already (every choice 0 or 1), and then it is the integer program's optimum, found
without branch and bound (``Solution.integral_relaxation``); otherwise ``milp`` branches.

The solve has a time limit. When it runs out, the plan is a greedy one (each group in
program order takes its cheapest choice given the choices before it), not HiGHS's best plan
so far: which plan HiGHS holds when the clock stops depends on the machine's load, and the
same program must give the same plan. Under a memory limit whose relaxation is fractional,
the plan priced by the relaxation's duals (``_priced_plan``: it fits, and its objective is
reported against the relaxation's bound) is taken instead when it was found in time. ``Solution.status`` says so and the pass logs it as a
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
PRICED_FALLBACK = "time limit: plan priced by the relaxation's duals"
NODE_LIMIT_PLAN = "node limit: branch and bound's best plan"
# Branch and bound stops after this many nodes (a count, unlike a time limit, gives the same
# plan however loaded the machine is). The 20-layer bench step at 1MiB needs 286 nodes to
# prove its optimum, about 10 s here; after 100 its best plan is 0.6% above it.
NODE_LIMIT = 100


@dataclass(frozen=True)
class Solution:
    choice: tuple  # per group
    status: str
    seconds: float  # wall time of the solve
    variables: int
    constraints: int
    fallback: bool = False  # the greedy plan, not the solver's
    integral_relaxation: bool = False  # the LP relaxation's optimum was a plan: no branching


def memory_lower_bound(graph: CostGraph) -> float:
    """Bytes per device the busiest step holds with every value split as far as it can be
    (no plan holds less there)."""
    return _busiest(graph, lambda live: float(np.min(live.nbytes)))


def _busiest(graph: CostGraph, nbytes) -> float:
    """The most bytes live at one step, ``nbytes(live)`` per value."""
    change = np.zeros(graph.step_count + 1)
    for live in graph.lives:
        held = nbytes(live)
        change[live.first] += held
        change[live.stop] -= held
    return float(np.max(np.cumsum(change[:-1]), initial=0.0))


def solve(graph: CostGraph, memory_limit: float | None, time_limit: float) -> Solution:
    start = time.perf_counter()
    if memory_limit is not None:
        needed = memory_lower_bound(graph)
        if needed > memory_limit:
            raise AutoShardingError(
                f"memory limit {_size(memory_limit)} per device is below what any plan "
                f"needs: {_size(needed)} are live at once even with every value split as far "
                f"as the mesh allows")
    problem = _Problem(graph, None)
    if problem.count == 0:
        return Solution((0,) * len(graph.groups), OPTIMAL, time.perf_counter() - start, 0, 0)
    deadline = start + time_limit
    x, status, integral = _solve(problem, deadline)
    if memory_limit is not None and x is not None and \
            _peak_bytes(graph, problem.offsets, x) > memory_limit * (1 + 1e-9):
        # the best plan overall does not fit: solve again with the memory rows
        free, problem = problem, _Problem(graph, memory_limit)
        x, status, integral = _solve(problem, deadline, lambda relaxed: _priced_plan(
            graph, free, problem, relaxed, memory_limit, deadline))
    if x is None:
        choice = _greedy(graph)
    else:
        choice = tuple(0 if at is None else int(np.argmax(x[at:at + group.size]))
                       for group, at in zip(graph.groups, problem.offsets))
    if status != OPTIMAL:
        LOGGER.warning("auto-sharding: %s", status)
    return Solution(choice, status, time.perf_counter() - start, problem.count,
                    len(problem.lower), x is None, integral)


class _Problem:
    """The integer program's arrays (see the module doc), built with numpy per group and
    edge rather than per entry: the bench's x=4,y=2 step has 140k variables. Costs are in
    microseconds: HiGHS warns of (and stalls on) costs near its tolerances in seconds."""

    def __init__(self, graph: CostGraph, memory_limit: float | None):
        self.offsets, count = [], 0
        for group in graph.groups:
            self.offsets.append(count if group.size > 1 else None)
            count += group.size if group.size > 1 else 0
        self.choices = count  # the group indicators come first
        edge_offsets = []
        for edge in graph.edges:
            edge_offsets.append(count)
            count += edge.costs.size
        self.count = count
        self.cost = np.zeros(count)
        rows, cols, vals, lower, upper = [], [], [], [], []
        n = 0

        def add(row_ids, col_ids, values, lo, hi):
            nonlocal n
            rows.append(np.asarray(row_ids) + n)
            cols.append(np.asarray(col_ids))
            vals.append(np.broadcast_to(np.asarray(values, dtype=float), np.shape(col_ids)))
            lower.append(lo)
            upper.append(hi)
            n += len(lo)

        for group, at in zip(graph.groups, self.offsets):
            if at is not None:
                self.cost[at:at + group.size] = group.cost * 1e6
                add(np.zeros(group.size, dtype=int), at + np.arange(group.size), 1.0,
                    [1.0], [1.0])
        for edge, at in zip(graph.edges, edge_offsets):
            n_rows, n_cols = edge.costs.shape
            self.cost[at:at + edge.costs.size] = edge.costs.reshape(-1) * 1e6
            cells = at + np.arange(edge.costs.size)
            src, dst = self.offsets[edge.src], self.offsets[edge.dst]
            # row r: the pairs (r, *) sum to the producer's choices that lay it out r
            add(np.concatenate([np.repeat(np.arange(n_rows), n_cols), edge.src_layout]),
                np.concatenate([cells, src + np.arange(len(edge.src_layout))]),
                np.concatenate([np.ones(cells.size), -np.ones(len(edge.src_layout))]),
                [0.0] * n_rows, [0.0] * n_rows)
            # column c: the pairs (*, c) sum to the consumer's choices that want c
            add(np.concatenate([np.tile(np.arange(n_cols), n_rows), edge.dst_layout]),
                np.concatenate([cells, dst + np.arange(len(edge.dst_layout))]),
                np.concatenate([np.ones(cells.size), -np.ones(len(edge.dst_layout))]),
                [0.0] * n_cols, [0.0] * n_cols)
        self.bounds = np.ones(count)
        if memory_limit is not None:
            self._memory(graph, memory_limit, add)
        # no rows at all when every group has a single choice left (pruning can leave that)
        self.rows = np.concatenate(rows) if rows else np.zeros(0, dtype=int)
        self.cols = np.concatenate(cols) if cols else np.zeros(0, dtype=int)
        self.vals = np.concatenate(vals) if vals else np.zeros(0)
        self.lower = np.concatenate([np.asarray(lo, dtype=float) for lo in lower] or [[]])
        self.upper = np.concatenate([np.asarray(hi, dtype=float) for hi in upper] or [[]])

    def _memory(self, graph: CostGraph, memory_limit: float, add) -> None:
        """Per step ``i`` a variable ``S_i``, the bytes per device live there in units of the
        limit, at most 1: ``S_i = S_(i-1) + (values born at i) - (values dead after i-1)``.
        This is the rows "the values live at step i fit" written as a running sum: each
        value's indicators appear twice (where it starts and stops), not once per step it
        is live, so the rows stay as sparse as the program (one row per step listing every
        live value, for the bench's 200-layer step, holds 400k (step, group) entries, and
        HiGHS took 19 s on the relaxation with 735 of its 1,406 steps)."""
        steps, at = graph.step_count, self.count
        self.count += steps
        self.cost = np.concatenate([self.cost, np.zeros(steps)])
        self.bounds = np.concatenate([self.bounds, np.ones(steps)])
        constant = np.zeros(steps + 1)
        entries: list = [[] for _ in range(steps + 1)]  # per step: (column, coefficient)
        for live in graph.lives:
            share = live.nbytes / memory_limit
            offset = self.offsets[live.group]
            for index, sign in ((live.first, 1.0), (live.stop, -1.0)):
                if offset is None:
                    constant[index] += sign * float(share[0])
                else:
                    entries[index] += [(offset + k, -sign * float(v))
                                       for k, v in enumerate(share)]
        for i in range(steps):
            found = entries[i] + [(at + i, 1.0)] + ([(at + i - 1, -1.0)] if i else [])
            add(np.zeros(len(found), dtype=int), [c for c, _ in found],
                [v for _, v in found], [constant[i]], [constant[i]])


def _solve(problem: _Problem, deadline: float, priced=None):
    """``(x, status, integral)``: the LP relaxation first (dual simplex, without presolve:
    on the bench's x=4,y=2 step presolve takes twice as long as the solve after it and
    removes nothing); when its choices come out integral it is the integer program's
    optimum (no plan can beat the relaxation), else branch and bound until ``deadline``.
    ``x`` is None when no plan was found. Branch and bound stops after ``NODE_LIMIT``
    nodes with its best plan; when it runs out of time with none, ``priced(relaxed)``
    (given) may still offer a plan (``_priced_plan``), taken then."""
    from scipy.optimize import Bounds, LinearConstraint, linprog, milp
    from scipy.sparse import csr_array
    if deadline <= time.perf_counter():
        return None, TIME_LIMIT_FALLBACK, False
    matrix = csr_array((problem.vals, (problem.rows, problem.cols)),
                       shape=(len(problem.lower), problem.count))
    lower = np.zeros(problem.count)
    relaxed = linprog(problem.cost, A_eq=matrix, b_eq=problem.lower,
                      bounds=np.stack([lower, problem.bounds], axis=1), method="highs-ds",
                      options={"time_limit": deadline - time.perf_counter(),
                               "presolve": False})
    if relaxed.status == 2:
        raise AutoShardingError(_NO_PLAN)
    if relaxed.status != 0:
        return None, TIME_LIMIT_FALLBACK, False
    choices = relaxed.x[:problem.choices]
    if np.all(np.minimum(choices, 1.0 - choices) < 1e-6):
        return relaxed.x, OPTIMAL, True
    offer = priced(relaxed) if priced is not None else None
    left = deadline - time.perf_counter()
    result = None
    if left > 0:
        integrality = np.zeros(problem.count)
        integrality[:problem.choices] = 1
        result = milp(problem.cost, integrality=integrality,
                      bounds=Bounds(lower, problem.bounds),
                      constraints=LinearConstraint(matrix, problem.lower, problem.upper),
                      options={"time_limit": left, "node_limit": NODE_LIMIT, "disp": False})
        if result.status == 0:
            return result.x, OPTIMAL, False
        if result.status == 2:
            raise AutoShardingError(_NO_PLAN)
        if result.x is not None and result.mip_node_count >= NODE_LIMIT:
            # the node budget ran out, not the clock: the same plan on every run
            return result.x, f"{NODE_LIMIT_PLAN} (within {result.mip_gap:.1%} of the optimum)", \
                False
    if offer is not None:
        x, objective = offer
        return x, (f"{PRICED_FALLBACK} ({objective / relaxed.fun - 1:.1%} above the "
                   f"relaxation's bound)"), False
    return None, (TIME_LIMIT_FALLBACK if result is None or result.status == 1 else
                  f"HiGHS gave no plan ({result.message}): greedy fallback"), False


def _priced_plan(graph: CostGraph, free: _Problem, problem: _Problem, relaxed,
                 memory_limit: float, deadline: float):
    """A plan that fits, from the fractional relaxation with memory rows: its duals price a
    byte held at each step, the problem without memory rows is solved with those prices
    added to the choices' costs (its relaxation is integral as a rule), and the prices grow
    until the plan fits. ``(x over free's variables, objective)`` or None."""
    steps = graph.step_count
    price = np.concatenate([[0.0], np.cumsum(-relaxed.upper.marginals[problem.count - steps:])])
    extra = np.zeros(free.count)
    for live in graph.lives:
        at = free.offsets[live.group]
        if at is not None:
            extra[at:at + len(live.nbytes)] += \
                (price[live.stop] - price[live.first]) * live.nbytes / memory_limit
    unpriced = free.cost
    try:
        for scale in (1.0, 1.25, 2.0, 4.0):
            free.cost = unpriced + scale * extra
            x, _, integral = _solve(free, deadline)
            if x is None:
                return None
            if integral and _peak_bytes(graph, free.offsets, x) <= memory_limit * (1 + 1e-9):
                return np.concatenate([x, np.zeros(problem.count - free.count)]), \
                    float(unpriced @ x)
    finally:
        free.cost = unpriced
    return None


_NO_PLAN = ("no plan meets the memory limit (the live values of some steps cannot all be "
            "split far enough at once)")


def _peak_bytes(graph: CostGraph, offsets: list, x: np.ndarray) -> float:
    """Bytes per device the busiest step holds under the choices ``x``."""
    def held(live) -> float:
        at = offsets[live.group]
        return float(live.nbytes[0]) if at is None else \
            float(live.nbytes @ x[at:at + len(live.nbytes)])
    return _busiest(graph, held)


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


__all__ = ["NODE_LIMIT", "NODE_LIMIT_PLAN", "OPTIMAL", "PRICED_FALLBACK", "Solution",
           "TIME_LIMIT_FALLBACK",
           "memory_lower_bound", "solve"]
