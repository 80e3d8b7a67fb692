"""The scheduling report: every collective of a scheduled per-device program, what it
overlaps and how much of it stays exposed, as JSON-ready data.

``schedule_report(module, estimator)`` simulates each block of each function in its
current order (timeline.py; a module the ``latency-hiding-scheduler`` ordered, e.g. the cpu
pipeline's output) and returns::

    {"collectives": [{"kind": "all-gather", "bytes": 4096, "overlaps": ["%3", ...],
                      "estimated_s": 1.2e-05, "exposed_s": 2e-06,
                      "function": "main", "iterations": 1}, ...],
     "exposed_fraction": 0.17, "overlaps_compute": true, "estimator": "cost model"}

``bytes`` are the collective's per-device result bytes (as xla_core/spmd/summary.py counts
them); ``overlaps`` the printed names (``print_module``'s SSA names) of the ops the
executing thread ran while it communicated; ``iterations`` how often its block runs per
call (a loop body: the loop's trip count, else xla_core.cost's default guess).
``exposed_fraction`` is the exposed time over all collective time, each collective weighted
by its iterations (0.0 without collectives). ``overlaps_compute`` says whether the
estimator's hardware lets a started collective overlap compute at all (where it does not,
as for devices oversubscribing the host's cores, every collective is exposed whatever the
order: timeline.py). ``estimator`` says what the times are:
``"cost model"``, or ``"profile"`` (a ``MeasuredEstimator``), whose report adds
``"replaced": [{"key": ..., "estimated_s": ..., "measured_s": ...}, ...]``, every estimate
a measured time replaced (keys as in the profile; a collective's communication is listed
under its start's ``KEY [communication thread]`` or its synchronous collective's key).
"""
from __future__ import annotations

from stablehlo.ir.core import Block, Module, Operation
from stablehlo.ir.ops.async_collectives import ASYNC_START
from stablehlo.text.names import printed_names
from xla_core.cost.estimates import DEFAULT_TRIP_COUNT, type_bytes, while_trip_count
from xla_core.scheduling.estimator import LatencyEstimator, MeasuredEstimator
from xla_core.scheduling.timeline import simulate
from xla_core.spmd.summary import KINDS


def _name(op: Operation, names: dict) -> str:
    if not op.results:
        return op.name
    return names.get(op.results[0], op.name).split("#")[0]


def _blocks(block: Block, iterations: int):
    """(block, times it runs) for ``block`` and every block nested in it."""
    yield block, iterations
    for op in block.operations:
        if op.name == ASYNC_START:
            continue
        trips = 1
        if op.name == "stablehlo.while":
            trips = while_trip_count(op) or DEFAULT_TRIP_COUNT
        for region in op.regions:
            for inner in region.blocks:
                yield from _blocks(inner, iterations * trips)


def schedule_report(module: Module, estimator: LatencyEstimator) -> dict:
    """The report of the module doc for ``module`` as it is ordered now."""
    names = printed_names(module.op)
    entries = []
    total = exposed = 0.0
    for func in module.functions():
        if func.body is None:
            continue
        for block, iterations in _blocks(func.body, 1):
            if not any(op.name in KINDS or op.name == ASYNC_START for op in block.operations):
                continue
            for run in simulate(block.operations, estimator).finish():
                entries.append({
                    "kind": KINDS[run.collective.name],
                    "bytes": sum(type_bytes(r.type) for r in run.collective.results),
                    "overlaps": [_name(op, names) for op in run.overlaps],
                    "estimated_s": run.seconds, "exposed_s": run.exposed,
                    "function": func.name, "iterations": iterations})
                total += run.seconds * iterations
                exposed += run.exposed * iterations
    report = {"collectives": entries, "exposed_fraction": exposed / total if total else 0.0,
              "overlaps_compute": bool(estimator.overlaps_compute), "estimator": "cost model"}
    if isinstance(estimator, MeasuredEstimator):
        report["estimator"] = "profile"
        report["replaced"] = estimator.replaced_estimates()
    return report
