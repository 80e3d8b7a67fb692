"""latency-hiding-scheduler: order each block so collectives overlap independent compute.

Wraps ``memory-schedule`` (xla_core/buffers/scheduler.py): every block is first scheduled
for memory as that pass does (its order is the baseline, its peak the memory limit unless
``memory-limit`` is given). A block with ``openhlo.async_start``/``async_done`` pairs is
then list-scheduled top-down (Note [top-down list scheduling]) on the block's graph without
the async-window rules (``BlockGraph(async_windows=False)``: data dependencies, effect
order, and the starts in their original order, so every device still runs the collectives
in one order). The new order is kept only if its peak stays within the limit and its
simulated time (xla_core/scheduling/timeline.py) is below the baseline's; else the
baseline stays. Inner blocks (loop and branch bodies) are scheduled first, on their own.
Where the hardware leaves no core for a communication thread beside the computing ones
(``LatencyEstimator.overlaps_compute`` false: e.g. 8 devices on 2 cores), the timeline runs
a started collective whole at its start, so no order beats the baseline: the block keeps
its memory schedule (``convert-async-to-sync`` with the same hardware then makes every pair
synchronous).

Options: ``hardware`` (an xla_core.cost description, default ``cpu``), ``devices-per-host``
(the devices running at once on the host, ``hardware(name, devices_per_host)``; 0: as
the description says, one device for the built-in ones), ``transport``
(``shared-memory`` or ``network``), ``max-in-flight`` (collectives of one kind started and
not yet done, default 1 as XLA's overlap limits), ``memory-limit`` (bytes; 0 = each
block's memory-schedule peak), ``profile`` (a Chrome trace of a run, ``openhlo run
--trace``: its measured times replace the estimates of the ops it measured,
``MeasuredEstimator.from_profile``).

Note [top-down list scheduling]
The scheduler advances the estimated clock of timeline.py as it emits ops. Among the ready
ops it emits, in this order of preference:
1. a done whose collective has already ended (it costs nothing and unblocks its readers);
2. a start, if fewer than ``max-in-flight`` collectives of its kind are in flight and its
   bytes fit the memory limit (starts go early);
3. a compute op that fits the limit with room left for the results of the pending dones,
   preferring those the earliest pending start depends on (so the next collective can
   start), then the baseline order;
4. the done that ends first (dones go late: only once there is no compute left to run);
5. whatever is ready and frees the most bytes (nothing fits the limit: the final check
   decides).
XLA schedules bottom-up; top-down lets the clock say when a collective has ended, so a
done is emitted as soon as the compute run so far covers it, and the compute left after it
stays available for the next collective.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from stablehlo.ir.core import Block, Module
from stablehlo.ir.ops.async_collectives import (ASYNC_DONE, ASYNC_START, start_of,
                                                 wrapped_collective)
from xla_core.buffers.liveness import BlockGraph, BuffersError, NestedPeaks, is_fusion
from xla_core.buffers.scheduler import best_schedule, sink
from xla_core.passes.base import Pass, PassContext
from xla_core.scheduling.estimator import CostModelEstimator, LatencyEstimator, \
    MeasuredEstimator, SchedulingError
from xla_core.scheduling.timeline import Clock, simulate


@dataclass
class _Memory:
    """Live bytes of a partial order, as ``BlockGraph.peak`` counts them."""
    graph: BlockGraph
    limit: float

    def __post_init__(self):
        self.remaining = [len(u) for u in self.graph.users]
        self.live = 0

    def need(self, i: int) -> int:
        graph = self.graph
        return self.live + graph.def_bytes[i] + graph.scratch[i] - graph.handover[i]

    def fits(self, i: int) -> bool:
        return self.need(i) <= self.limit

    def net_freed(self, i: int) -> int:
        """Bytes emitting ``i`` frees (operands it reads last) minus the bytes it defines."""
        graph = self.graph
        freed = sum(graph.sizes[v] for v in graph.uses[i] if self.remaining[v] == 1)
        return freed - graph.def_bytes[i]

    def emit(self, i: int) -> None:
        graph = self.graph
        self.live += graph.def_bytes[i]
        for v in graph.uses[i]:
            self.remaining[v] -= 1
            if self.remaining[v] == 0:
                self.live -= graph.sizes[v]
        self.live -= sum(graph.sizes[v] for v in graph.defs[i] if not graph.users[v])


def _feeds(graph: BlockGraph, base_pos: list[int], succs: list[list[int]]) -> list[float]:
    """Per op, the baseline position of the earliest start that depends on it (inf: none)."""
    feeds = [math.inf] * len(graph.ops)
    for i in sorted(range(len(graph.ops)), key=lambda k: -base_pos[k]):
        own = base_pos[i] if graph.ops[i].name == ASYNC_START else math.inf
        feeds[i] = min([own] + [feeds[s] for s in succs[i]])
    return feeds


def latency_schedule(graph: BlockGraph, base: list[int], estimator: LatencyEstimator,
                     limit: float, max_in_flight: int, follow_base: bool = False) -> list[int]:
    """A top-down list schedule of ``graph`` (built with ``async_windows=False``); ``base``
    is the baseline order (Note [top-down list scheduling]). ``follow_base``: compute in
    the baseline order, without preferring what the next start needs."""
    n = len(graph.ops)
    ops = graph.ops
    base_pos = [0] * n
    for k, i in enumerate(base):
        base_pos[i] = k
    succs: list[list[int]] = [[] for _ in range(n)]
    for i, preds in enumerate(graph.preds):
        for p in preds:
            succs[p].append(i)
    feeds = [0.0] * n if follow_base else _feeds(graph, base_pos, succs)
    waiting = [len(p) for p in graph.preds]
    ready = {i for i in range(n) if waiting[i] == 0 and i != graph.terminator}
    memory, clock = _Memory(graph, limit), Clock(estimator)
    in_flight: dict[str, int] = {}
    order: list[int] = []
    while ready:
        i = _pick(ready, ops, clock, memory, in_flight, max_in_flight, feeds, base_pos)
        ready.discard(i)
        op = ops[i]
        if op.name == ASYNC_START:
            kind = wrapped_collective(op).name
            in_flight[kind] = in_flight.get(kind, 0) + 1
        elif op.name == ASYNC_DONE:
            in_flight[wrapped_collective(start_of(op)).name] -= 1
        clock.step(op)
        memory.emit(i)
        order.append(i)
        for s in succs[i]:
            waiting[s] -= 1
            if waiting[s] == 0 and s != graph.terminator:
                ready.add(s)
    if graph.terminator is not None:
        order.append(graph.terminator)
    if len(order) != n:
        raise BuffersError("dependency cycle in block")
    return order


def _pick(ready, ops, clock: Clock, memory: _Memory, in_flight, max_in_flight,
          feeds, base_pos) -> int:
    """The op to emit next (Note [top-down list scheduling])."""
    dones = [i for i in ready if ops[i].name == ASYNC_DONE]
    ended = [i for i in dones if clock.end_of(start_of(ops[i])) <= clock.now]
    if ended:
        return min(ended, key=lambda i: base_pos[i])
    starts = [i for i in ready if ops[i].name == ASYNC_START and memory.fits(i)
              and in_flight.get(wrapped_collective(ops[i]).name, 0) < max_in_flight]
    if starts:
        return min(starts, key=lambda i: base_pos[i])
    compute = [i for i in ready if ops[i].name not in (ASYNC_START, ASYNC_DONE)]
    # room for the largest pending done's results, defined while its future is still live
    reserve = max((memory.graph.def_bytes[i] for i in dones), default=0)
    fitting = [i for i in compute if memory.need(i) + reserve <= memory.limit]
    if fitting:
        return min(fitting, key=lambda i: (feeds[i], base_pos[i]))
    if dones:
        return min(dones, key=lambda i: (clock.end_of(start_of(ops[i])), base_pos[i]))
    return min(ready, key=lambda i: (-memory.net_freed(i), base_pos[i]))


def _sink_free(graph: BlockGraph, order: list[int], estimator: LatencyEstimator) -> list[int]:
    """``order`` with each op that depends on nothing in the block, takes no time and is
    read (a constant) moved to just before its first reader: the same timeline, shorter
    lives."""
    movable = {i for i, op in enumerate(graph.ops)
               if not graph.preds[i] and not graph.ordered[i] and i != graph.terminator
               and any(graph.users[v] for v in graph.defs[i])
               and estimator.op_seconds(op) == 0}
    out: list[int] = []
    placed: set[int] = set()
    for i in order:
        if i in movable:
            continue
        for p in graph.preds[i]:
            if p in movable and p not in placed:
                out.append(p)
                placed.add(p)
        out.append(i)
    return out


def _within_limit(graph: BlockGraph, base: list[int], estimator: LatencyEstimator,
                  limit: int, max_in_flight: int, tries: int = 4) -> list[int] | None:
    """A latency schedule whose peak is at most ``limit``, or None. The greedy checks only
    the op it emits, so a schedule may still overshoot (when nothing fits, something must
    go). Each schedule is tried as is, then with the expanding ops (constants, broadcasts)
    sunk to their first readers as the memory scheduler does; each retry emits compute in
    the baseline order (which stays within the limit) and lowers the limit the greedy sees
    by the last overshoot. Before the memory scheduler's sinking, which moves compute and
    so can undo the overlap, only the ops the clock does not see are sunk (``_sink_free``):
    the greedy emits constants as soon as they are ready, and a few bytes held from the
    start to the last reader must not cost the whole schedule."""
    greedy_limit = limit
    for attempt in range(tries):
        candidate = latency_schedule(graph, base, estimator, greedy_limit, max_in_flight,
                                     follow_base=attempt > 0)
        for order in (candidate, _sink_free(graph, candidate, estimator),
                      sink(graph, candidate)):
            graph.check_order(order)
            peak = graph.peak(order)
            if peak <= limit:
                return order
        greedy_limit -= peak - limit
    return None


def schedule_block(block: Block, nested: NestedPeaks, estimator: LatencyEstimator,
                   max_in_flight: int = 1, memory_limit: int = 0) -> bool:
    """Schedule ``block`` (inner blocks first); returns whether any order changed."""
    changed = False
    for op in block.operations:
        for region in op.regions:
            if op.name == ASYNC_START:
                continue  # the wrapped collective alone
            for inner in region.blocks:
                changed |= schedule_block(inner, nested, estimator, max_in_flight,
                                          memory_limit)
    try:
        windowed = BlockGraph(block, nested)
    except BuffersError:
        return changed  # a dynamically shaped value: keep program order, as memory-schedule
    order, peak = best_schedule(windowed)
    ops = windowed.ops
    if estimator.overlaps_compute and any(op.name == ASYNC_START for op in ops):
        free = BlockGraph(block, nested, async_windows=False)
        candidate = _within_limit(free, order, estimator, memory_limit or peak, max_in_flight)
        if candidate is not None and simulate([ops[i] for i in candidate], estimator).now < \
                simulate([ops[i] for i in order], estimator).now:
            order = candidate
    if order != list(range(len(ops))):
        block.operations[:] = [ops[i] for i in order]
        changed = True
    return changed


def schedule_module(module: Module, estimator: LatencyEstimator, max_in_flight: int = 1,
                    memory_limit: int = 0) -> bool:
    """Schedule every function body (fusion bodies excepted) of ``module`` with
    ``estimator``; the pass with an estimator of the caller's (e.g. one a profile feeds)."""
    if max_in_flight < 1:
        raise SchedulingError(f"latency-hiding-scheduler: max-in-flight must be >= 1, "
                              f"got {max_in_flight}")
    if memory_limit < 0:
        raise SchedulingError(f"latency-hiding-scheduler: memory-limit must be >= 0, "
                              f"got {memory_limit}")
    nested = NestedPeaks(module)
    # A fusion body's values live in registers while its kernel runs: no order to pick.
    fused = {op.attributes["decomposition"].name for op in module.walk() if is_fusion(op)}
    changed = False
    for func in module.functions():
        if func.body is not None and func.name not in fused:
            changed |= schedule_block(func.body, nested, estimator, max_in_flight,
                                      memory_limit)
    return changed


@dataclass(frozen=True)
class LatencyHidingSchedulerPass(Pass):
    """Overlap async collectives with compute within in-flight and memory limits; the
    memory schedule elsewhere (see the module doc)."""
    name = "latency-hiding-scheduler"
    hardware: str = "cpu"
    devices_per_host: int = 0
    transport: str = "shared-memory"
    max_in_flight: int = 1
    memory_limit: int = 0
    profile: str = ""

    def run(self, module: Module, ctx: PassContext) -> bool:
        from xla_core.cost.hardware import hardware
        if self.devices_per_host < 0:
            raise SchedulingError(f"latency-hiding-scheduler: devices-per-host must be >= 0, "
                                  f"got {self.devices_per_host}")
        estimator = CostModelEstimator(hardware(self.hardware, self.devices_per_host), module,
                                       self.transport)
        if self.profile:
            from xla_core.cost.profile import read_profile
            estimator = MeasuredEstimator.from_profile(estimator, module,
                                                       read_profile(self.profile))
        return schedule_module(module, estimator, self.max_in_flight, self.memory_limit)
