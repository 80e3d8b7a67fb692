"""The solver's shortcuts against plain enumeration, and the bench's training step.

The shortcuts (the LP relaxation taken when it is integral, memory rows written as a running
sum and added only when the unconstrained plan does not fit, scalar broadcasts copied per
user instead of shared, dominated choices pruned) must give the optimum of the integer
program they stand for. The
reference is every plan of a small program enumerated, its objective summed from the cost
graph's vectors and matrices and its peak from the values' lives, step by step.
"""
from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

import stablehlo
from tools.bench_auto_sharding import training_step
from xla_core.cost import hardware
from xla_core.spmd.auto_sharding import apply_plan, auto_shard, parse_mesh
from xla_core.spmd.auto_sharding.auto_shard import _mesh_info
from xla_core.spmd.auto_sharding.costs import CostModel
from xla_core.spmd.auto_sharding.graph import build_graph
from xla_core.spmd.auto_sharding.prune import prune_dominated
from xla_core.spmd.auto_sharding import solver
from xla_core.spmd.auto_sharding.solver import memory_lower_bound, solve
from xla_core.spmd.auto_sharding.tests.test_auto_sharding import (SGD_STEP, _assert_close,
                                                                  _inputs, _run_sharded,
                                                                  _run_unsharded)

HW = "generic-cpu"


def _graph(text: str, mesh, memory: bool = True):
    module = stablehlo.parse(text)
    info = _mesh_info(module, parse_mesh(mesh) if mesh else None)
    return build_graph(module.lookup("main"), info, CostModel(hardware(HW), info.mesh),
                       memory=memory)


def _objective(graph, choice) -> float:
    total = sum(float(group.cost[k]) for group, k in zip(graph.groups, choice))
    return total + sum(float(e.costs[e.src_layout[choice[e.src]], e.dst_layout[choice[e.dst]]])
                       for e in graph.edges)


def _peak(graph, choice) -> float:
    """The most bytes live at one step, each step summed on its own."""
    return max(sum(float(live.nbytes[choice[live.group]]) for live in graph.lives
                   if live.first <= step < live.stop) for step in range(graph.step_count))


def _enumerated(graph, limit):
    plans = itertools.product(*(range(group.size) for group in graph.groups))
    return min(_objective(graph, c) for c in plans if limit is None or _peak(graph, c) <= limit)


@pytest.mark.parametrize("text, mesh", [(SGD_STEP, None), (training_step(1), "model=8")])
def test_solver_finds_the_enumerated_optimum_with_and_without_a_memory_limit(text, mesh):
    graph = _graph(text, mesh)
    free = solve(graph, None, 10.0)
    assert free.status == "optimal" and free.integral_relaxation
    assert _objective(graph, free.choice) == pytest.approx(_enumerated(graph, None), rel=1e-9)
    # between the least any plan needs and the unconstrained optimum's peak: the rows bind
    limit = (memory_lower_bound(graph) + _peak(graph, free.choice)) / 2
    assert limit < _peak(graph, free.choice)
    tight = solve(graph, limit, 10.0)
    assert tight.status == "optimal" and _peak(graph, tight.choice) <= limit
    assert _objective(graph, tight.choice) == pytest.approx(_enumerated(graph, limit),
                                                            rel=1e-9)
    assert _objective(graph, tight.choice) > _objective(graph, free.choice)


@pytest.mark.parametrize("text, mesh", [(SGD_STEP, None), (training_step(1), "model=8"),
                                        (training_step(1), "x=2,y=2")])
def test_pruning_dominated_choices_keeps_the_optimum(text, mesh):
    whole = _graph(text, mesh)
    pruned = _graph(text, mesh)
    removed = prune_dominated(pruned)
    assert removed > 0
    assert sum(g.size for g in pruned.groups) == sum(g.size for g in whole.groups) - removed
    best = solve(whole, None, 10.0)
    limit = (memory_lower_bound(whole) + _peak(whole, best.choice)) / 2
    for memory_limit in (None, limit):
        reference = solve(whole, memory_limit, 10.0)
        found = solve(pruned, memory_limit, 10.0)
        assert reference.status == found.status == "optimal"
        assert _objective(pruned, found.choice) == pytest.approx(
            _objective(whole, reference.choice), rel=1e-9)
        if memory_limit is not None:
            assert _peak(pruned, found.choice) <= memory_limit


def _broadcast_per_use(text: str) -> str:
    """``text`` with ``%ones`` and ``%lrs`` made by a broadcast before each use instead."""
    out = []
    for n, line in enumerate(text.splitlines()):
        if line.startswith(("  %ones =", "  %lrs =")):
            continue
        for name, scalar in (("%ones", "%one"), ("%lrs", "%lr")):
            if f" {name}, " in line:
                result_type = line.rsplit(": ", 1)[1]
                out.append(f"  {name}_{n} = stablehlo.broadcast_in_dim {scalar}, dims = [] : "
                           f"(tensor<f32>) -> {result_type}")
                line = line.replace(f" {name}, ", f" {name}_{n}, ")
        out.append(line)
    return "\n".join(out) + "\n"


def test_a_shared_scalar_broadcast_costs_what_one_broadcast_per_use_costs():
    # %ones is read by every layer's backward and %lrs by every weight update: shared, they
    # are no choice tied to all their users; the plan is the one for a program that
    # broadcasts anew for each use, and the program computes the unsharded results
    text = training_step(3, batch=16, width=64)
    shared_graph = _graph(text, "model=8")
    assert len(shared_graph.copies) == 2
    module = stablehlo.parse(text)
    shared = auto_shard(module, "model=8", hardware=HW)
    per_use = auto_shard(stablehlo.parse(_broadcast_per_use(text)), "model=8", hardware=HW)
    assert len(shared_graph.edges) == len(_graph(_broadcast_per_use(text), "model=8").edges)
    assert shared.arguments == per_use.arguments
    assert shared.step_seconds == pytest.approx(per_use.step_seconds, rel=1e-9)
    assert shared.peak_memory_bytes == pytest.approx(per_use.peak_memory_bytes, rel=1e-9)
    count = len(module.lookup("main").body.operations)
    apply_plan(module, shared)
    broadcasts = sum(op.name == "stablehlo.broadcast_in_dim"
                     for op in module.lookup("main").body.operations)
    assert broadcasts == 2 + 2 * 2  # 3 users each, the first reads the original
    assert len(module.lookup("main").body.operations) >= count + 4
    inputs = _inputs(module)
    _assert_close(_run_sharded(module, inputs), _run_unsharded(text, inputs))


def test_a_returned_scalar_broadcast_is_an_ordinary_value():
    # returned, the broadcast is needed whole at the end: it is not copied, and its users
    # share it as any value
    text = """
func.func public @main(%x: tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>) {
  %c = stablehlo.constant dense<2.0> : tensor<f32>
  %twos = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<64x64xf32>
  %y = stablehlo.multiply %x, %twos : tensor<64x64xf32>
  %z = stablehlo.dot_general %y, %twos, contracting_dims = [1] x [0] :
      (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  return %z, %twos : tensor<64x64xf32>, tensor<64x64xf32>
}
"""
    assert not _graph(text, "model=8").copies
    module = stablehlo.parse(text)
    plan = auto_shard(module, "model=8", hardware=HW)
    assert plan.solution.status == "optimal"
    apply_plan(module, plan)
    inputs = _inputs(module)
    _assert_close(_run_sharded(module, inputs), _run_unsharded(text, inputs))


@pytest.mark.parametrize("mesh", ["model=8", "x=4,y=2"])
def test_deep_training_step_solves_by_its_lp_relaxation_and_repeats(mesh):
    text = training_step(20)
    plans = [auto_shard(stablehlo.parse(text), mesh, hardware=HW) for _ in range(3)]
    assert all(p.solution.status == "optimal" and p.solution.integral_relaxation
               for p in plans)
    first = plans[0]
    assert all(p.arguments == first.arguments and p.layouts() == first.layouts()
               for p in plans[1:])
    # the plan's objective is what the (pruned, as auto_shard's) cost graph gives its choices
    graph = _graph(text, mesh, memory=False)
    prune_dominated(graph)
    assert first.step_seconds == pytest.approx(_objective(graph, first.solution.choice),
                                               rel=1e-9)
    assert np.isfinite(first.peak_memory_bytes)


def test_a_fractional_relaxation_gives_a_priced_plan_that_fits_and_a_node_limited_one():
    text, mesh = training_step(4), "model=8"
    graph = _graph(text, mesh)
    free_plan = solve(graph, None, 10.0)
    limit = (memory_lower_bound(graph) + _peak(graph, free_plan.choice)) / 2
    free, problem = solver._Problem(graph, None), solver._Problem(graph, limit)
    deadline = time.perf_counter() + 30.0
    offers = []

    def priced(relaxed):
        offers.append(solver._priced_plan(graph, free, problem, relaxed, limit, deadline))
        return offers[-1]
    x, status, integral = solver._solve(problem, deadline, priced)
    assert status == "optimal" and not integral and len(offers) == 1  # it branched
    best = tuple(0 if at is None else int(np.argmax(x[at:at + g.size]))
                 for g, at in zip(graph.groups, problem.offsets))
    offer, objective = offers[0]
    choice = tuple(0 if at is None else int(np.argmax(offer[at:at + g.size]))
                   for g, at in zip(graph.groups, problem.offsets))
    assert _peak(graph, choice) <= limit
    assert objective == pytest.approx(1e6 * _objective(graph, choice), rel=1e-9)
    assert _objective(graph, choice) >= _objective(graph, best) - 1e-15


def test_branch_and_bound_stops_at_the_node_limit_with_its_best_plan(monkeypatch):
    graph = _graph(training_step(4), "model=8")
    free_plan = solve(graph, None, 10.0)
    limit = (memory_lower_bound(graph) + _peak(graph, free_plan.choice)) / 2
    optimum = solve(graph, limit, 30.0)
    monkeypatch.setattr(solver, "NODE_LIMIT", 1)
    plans = [solve(graph, limit, 30.0) for _ in range(2)]
    assert all(p.status.startswith(solver.NODE_LIMIT_PLAN) for p in plans)
    assert plans[0].choice == plans[1].choice
    assert _peak(graph, plans[0].choice) <= limit
    assert _objective(graph, plans[0].choice) >= _objective(graph, optimum.choice) - 1e-15
