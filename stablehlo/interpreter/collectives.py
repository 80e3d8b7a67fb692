"""Multi-process execution: the process grid, collectives and run_parallel.

Three layers, kept apart so that the runtime can reuse the math on real
devices:

1. Process groups (pure): ``cross_replica``, ``cross_partition``,
   ``cross_replica_and_partition``, ``flattened_ids`` and
   ``process_groups(strategy, groups, num_replicas, num_partitions)``, as in
   the spec's "Collective ops" section; ``strategy_for(op_name, channel_id,
   use_global_device_ids)`` picks the strategy each op uses.
2. Collective math (pure): given the operands of every process of a group, in
   group order, compute one process's results (``all_reduce_values``,
   ``all_gather_values``, ``all_to_all_values``, ``reduce_scatter_values``,
   ``collective_broadcast_values``, ``collective_reduce_values``,
   ``collective_permute_values``).
3. Plumbing: ``ProcessGrid`` (rendezvous with timeout and abort, infeed queue,
   outfeed, send/recv channels), ``Process`` (replica_id, partition_id,
   grid), the kernels, and ``interpreter.run_parallel`` which runs each
   program of its ``num_replicas x num_partitions`` grid in its own thread.

A rendezvous never hangs: it times out (30 s by default) with an error that
names the op and the processes that did not arrive, and when one process
fails the others waiting on it are released with an error at once.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from stablehlo.errors import InterpreterError
from stablehlo.ir.attributes import (ArrayAttr, BoolAttr, DenseElementsAttr, StructAttr,
                                     SymbolRefAttr, UnitAttr)
from stablehlo.ir.regions import region_monoid
from stablehlo.ir.types import numpy_dtype
from stablehlo.limits import collective_timeout_s
from stablehlo.interpreter.kernels import kernel
from stablehlo.interpreter.quantization import zero_storage


ProcessId = tuple  # (replica_id, partition_id)


# ---------------------------------------------------------------------------
# 1. Process groups (pure)

def cross_replica(groups, num_replicas: int, num_partitions: int) -> list:
    return [[(r, p) for r in group] for group in groups for p in range(num_partitions)]


def cross_partition(groups, num_replicas: int, num_partitions: int) -> list:
    return [[(r, p) for p in group] for group in groups for r in range(num_replicas)]


def cross_replica_and_partition(groups, num_replicas: int, num_partitions: int) -> list:
    return [[(r, p) for p in range(num_partitions) for r in group] for group in groups]


def flattened_ids(groups, num_replicas: int, num_partitions: int) -> list:
    return [[divmod(i, num_partitions) for i in group] for group in groups]


STRATEGIES = {
    "cross_replica": cross_replica,
    "cross_partition": cross_partition,
    "cross_replica_and_partition": cross_replica_and_partition,
    "flattened_ids": flattened_ids,
}

# Ops whose strategy depends on use_global_device_ids (the others: channel only).
_GLOBAL_IDS_OPS = frozenset({"stablehlo.all_gather", "stablehlo.all_reduce",
                             "stablehlo.reduce_scatter"})


def strategy_for(op_name: str, channel_id: int, use_global_device_ids: bool) -> str:
    if op_name in _GLOBAL_IDS_OPS:
        if channel_id <= 0:
            if use_global_device_ids:
                raise InterpreterError("use_global_device_ids requires a positive channel_id")
            return "cross_replica"
        return "flattened_ids" if use_global_device_ids else "cross_replica_and_partition"
    return "cross_replica" if channel_id <= 0 else "cross_partition"


def process_groups(strategy: str, groups, num_replicas: int, num_partitions: int) -> list:
    """The process groups of ``strategy`` applied to ``groups`` (ids < 0 are padding).

    Empty ``groups`` mean one group of every replica / partition / process.
    """
    groups = [[int(i) for i in group if int(i) >= 0] for group in groups]
    groups = [g for g in groups if g]
    if not groups:
        count = {"cross_replica": num_replicas, "cross_replica_and_partition": num_replicas,
                 "cross_partition": num_partitions,
                 "flattened_ids": num_replicas * num_partitions}[strategy]
        groups = [list(range(count))]
    return STRATEGIES[strategy](groups, num_replicas, num_partitions)


def group_of(groups: list, process: ProcessId) -> Optional[list]:
    for group in groups:
        if process in group:
            return group
    return None


# ---------------------------------------------------------------------------
# 2. Collective math (pure). ``values[k]`` are the operands of the k-th process
# of the group; ``combine(a, b)`` applies the reduction computation elementwise.

def all_reduce_values(values: Sequence[Sequence[np.ndarray]], combine: Callable) -> list:
    results = []
    for j in range(len(values[0])):
        acc = values[0][j]
        for operands in values[1:]:
            acc = combine(j, acc, operands[j])
        results.append(acc)
    return results


def all_gather_values(values: Sequence[Sequence[np.ndarray]], dim: int) -> list:
    return [np.concatenate([operands[j] for operands in values], axis=dim)
            for j in range(len(values[0]))]


def all_to_all_values(values, split_dimension: int, concat_dimension: int, split_count: int,
                      receiver: int) -> list:
    results = []
    for j in range(len(values[0])):
        parts = [np.split(operands[j], split_count, axis=split_dimension)[receiver]
                 for operands in values]
        results.append(np.concatenate(parts, axis=concat_dimension))
    return results


def reduce_scatter_values(values, scatter_dimension: int, combine: Callable,
                          receiver: int) -> list:
    reduced = all_reduce_values(values, combine)
    return [np.split(r, len(values), axis=scatter_dimension)[receiver] for r in reduced]


def collective_broadcast_values(values, sources: Sequence[int]) -> list:
    """Result j is operand j of the process at group index ``sources[j]``."""
    return [values[source][j] for j, source in enumerate(sources)]


def collective_reduce_values(values, combine: Callable, roots: Sequence[int], receiver: int,
                             zeros: Sequence[np.ndarray]) -> list:
    """The reduction for the root of each result, zeros elsewhere."""
    reduced = all_reduce_values(values, combine)
    return [reduced[j] if roots[j] == receiver else zeros[j] for j in range(len(reduced))]


def collective_permute_values(values_by_process: dict, pairs: Sequence, me, zero) -> np.ndarray:
    """``pairs`` are (source, target) process ids; the target gets the source's operand."""
    for source, target in pairs:
        if target == me:
            return values_by_process[source]
    return zero


# ---------------------------------------------------------------------------
# 3. Plumbing: the grid of processes

class ProcessGrid:
    """Shared state of the processes of one run_parallel."""

    def __init__(self, num_replicas: int, num_partitions: int, infeed: Sequence[str] = (),
                 timeout_s: Optional[float] = None):
        self.num_replicas = num_replicas
        self.num_partitions = num_partitions
        self.timeout_s = collective_timeout_s() if timeout_s is None else timeout_s
        self._cond = threading.Condition()
        self._infeed = list(infeed)
        self.outfeed: list = []
        self._channels: dict = {}
        self._meetings: dict = {}
        self._arrivals: dict = {}
        self._failed: Optional[str] = None

    # -- failure propagation -------------------------------------------------
    def abort(self, reason: str) -> None:
        with self._cond:
            if self._failed is None:
                self._failed = reason
            self._cond.notify_all()

    def _check_failed(self, who) -> None:
        if self._failed is not None:
            raise InterpreterError(f"process {who} stopped: {self._failed}")

    def _wait(self, ready: Callable, what: str, who) -> None:
        deadline = time.monotonic() + self.timeout_s
        while not ready():
            self._check_failed(who)
            left = deadline - time.monotonic()
            if left <= 0:
                raise InterpreterError(f"{what} timed out after {self.timeout_s:g} s "
                                       f"in process {who}")
            self._cond.wait(left)

    # -- rendezvous ----------------------------------------------------------------
    def rendezvous(self, key, group: Sequence, me, value) -> dict:
        """Exchange ``value`` with every process of ``group``; returns {process: value}.

        The n-th call of a process with ``key`` meets the n-th call of the others.
        """
        group = tuple(group)
        if len(group) == 1:
            return {me: value}
        with self._cond:
            self._check_failed(me)
            count_key = (key, group, me)
            n = self._arrivals.get(count_key, 0)
            self._arrivals[count_key] = n + 1
            meeting_key = (key, group, n)
            meeting = self._meetings.setdefault(meeting_key, {"values": {}, "left": len(group)})
            meeting["values"][me] = value
            self._cond.notify_all()

            def ready():
                return len(meeting["values"]) == len(group)
            try:
                self._wait(ready, f"rendezvous of {key[0]} with processes {list(group)} "
                           f"(arrived: {sorted(meeting['values'])})", me)
            finally:
                meeting["left"] -= 1
                if meeting["left"] == 0:
                    del self._meetings[meeting_key]
            return dict(meeting["values"])

    # -- streams and channels --------------------------------------------------------
    def pop_infeed(self, who) -> str:
        with self._cond:
            if not self._infeed:
                raise InterpreterError(f"infeed queue is empty in process {who}")
            return self._infeed.pop(0)

    def push_outfeed(self, values: list) -> None:
        with self._cond:
            self.outfeed.append(values)

    def send(self, channel: int, values: list) -> None:
        with self._cond:
            self._channels.setdefault(channel, []).append(values)
            self._cond.notify_all()

    def recv(self, channel: int, who) -> list:
        with self._cond:
            queue = self._channels.setdefault(channel, [])
            self._wait(lambda: bool(queue), f"recv on channel {channel}", who)
            return queue.pop(0)


@dataclass
class Process:
    """The position of one program in the grid, and the grid it shares."""
    replica_id: int
    partition_id: int
    grid: ProcessGrid = field(repr=False)

    @property
    def id(self) -> ProcessId:
        return (self.replica_id, self.partition_id)

    @property
    def num_replicas(self) -> int:
        return self.grid.num_replicas

    @property
    def num_partitions(self) -> int:
        return self.grid.num_partitions


def single_process() -> Process:
    """The process of an ordinary single-device evaluation."""
    return Process(0, 0, ProcessGrid(1, 1))


# ---------------------------------------------------------------------------
# Attribute helpers

def channel_id(op) -> int:
    handle = op.attributes.get("channel_handle")
    if isinstance(handle, StructAttr):
        return int(handle.get("handle", 0))
    return 0


def _flag(op, name: str) -> bool:
    attr = op.attributes.get(name)
    if isinstance(attr, BoolAttr):
        return attr.value
    return isinstance(attr, UnitAttr)


def _int(op, name: str, default=None) -> int:
    attr = op.attributes.get(name)
    if attr is None:
        if default is None:
            raise InterpreterError(f"missing attribute '{name}'")
        return default
    return int(attr.value)


def _groups_attr(op, name: str = "replica_groups") -> list:
    attr = op.attributes.get(name)
    if attr is None:
        return []
    if not isinstance(attr, DenseElementsAttr):
        raise InterpreterError(f"'{name}' must be a dense tensor of ids, got {attr}")
    array = np.asarray(attr.array, dtype=np.int64)
    return array.reshape(array.shape[0], -1).tolist() if array.size else []


def _my_groups(ctx, op) -> tuple:
    """(my process group, my index in it) for an op using replica_groups."""
    process = ctx.process
    strategy = strategy_for(op.name, channel_id(op), _flag(op, "use_global_device_ids"))
    groups = process_groups(strategy, _groups_attr(op), process.num_replicas,
                            process.num_partitions)
    group = group_of(groups, process.id)
    if group is not None:
        _check_in_grid(process, group)
    return group, (group.index(process.id) if group is not None else None)


def _check_in_grid(process, members) -> None:
    """Fail at once, not by timeout, on groups naming processes that do not exist."""
    for r, p in members:
        if not (0 <= r < process.num_replicas and 0 <= p < process.num_partitions):
            raise InterpreterError(
                f"process group {list(members)} names process ({r}, {p}), but the grid has "
                f"{process.num_replicas} replica(s) x {process.num_partitions} partition(s)")


def _exchange(ctx, op, group, value) -> list:
    """The values of every process of ``group``, in group order."""
    process = ctx.process
    key = (op.name, channel_id(op))
    got = process.grid.rendezvous(key, group, process.id, value)
    return [got[p] for p in group]


def _combiner(ctx, op) -> Callable:
    """combine(j, a, b) applying the op's reduction region elementwise."""
    if len(op.regions) != 1:
        raise InterpreterError(f"{op.name} needs one reduction region")
    return elementwise_combiner(ctx, op.regions[0])


# Bodies that are one of these monoids of the two block arguments run as one numpy call.
_UFUNCS = {
    "stablehlo.add": np.add, "stablehlo.multiply": np.multiply,
    "stablehlo.maximum": np.maximum, "stablehlo.minimum": np.minimum,
    "stablehlo.and": np.bitwise_and, "stablehlo.or": np.bitwise_or,
    "stablehlo.xor": np.bitwise_xor,
}


def elementwise_combiner(ctx, region) -> Callable:
    """combine(j, a, b): the binary computation ``region`` applied elementwise.

    Operands are first converted to the computation's argument type (the spec's
    ``to_destination_type``). A body that is a single add/multiply/max/min/
    and/or/xor of its two arguments runs vectorized; any other body runs per
    element through the evaluator.
    """
    block = region.blocks[0]
    if len(block.arguments) != 2:
        raise InterpreterError(f"a reduction computation takes 2 arguments, got "
                               f"{len(block.arguments)}")
    dtype = numpy_dtype(block.arguments[0].type.element_type)
    monoid = region_monoid(region)
    ufunc = _UFUNCS[monoid.op] if monoid is not None else None

    def combine(j, a, b):
        a = np.asarray(a).astype(dtype, copy=False)
        b = np.asarray(b).astype(dtype, copy=False)
        if ufunc is not None:
            return ufunc(a, b).astype(dtype, copy=False)
        out = None
        for index in np.ndindex(a.shape):
            value = ctx.run_region(region, [np.asarray(a[index]),
                                            np.asarray(b[index])])[0]
            if out is None:
                out = np.empty(a.shape, dtype=np.asarray(value).dtype)
            out[index] = value
        return out if out is not None else np.empty(a.shape, dtype=dtype)
    return combine


def _zeros(op) -> list:
    return [zero_storage(r.type) for r in op.results]


# ---------------------------------------------------------------------------
# Kernels

@kernel("stablehlo.replica_id")
def replica_id(ctx, op):
    return np.asarray(ctx.process.replica_id, dtype=np.uint32)


@kernel("stablehlo.partition_id")
def partition_id(ctx, op):
    return np.asarray(ctx.process.partition_id, dtype=np.uint32)


@kernel("stablehlo.all_reduce", multi=True)
def all_reduce(ctx, op, *operands):
    group, _ = _my_groups(ctx, op)
    if group is None:
        raise InterpreterError(f"process {ctx.process.id} is in no replica group")
    values = _exchange(ctx, op, group, list(operands))
    return all_reduce_values(values, _combiner(ctx, op))


@kernel("stablehlo.all_gather", multi=True)
def all_gather(ctx, op, *operands):
    group, _ = _my_groups(ctx, op)
    if group is None:
        raise InterpreterError(f"process {ctx.process.id} is in no replica group")
    values = _exchange(ctx, op, group, list(operands))
    return all_gather_values(values, _int(op, "all_gather_dim"))


@kernel("stablehlo.reduce_scatter", multi=True)
def reduce_scatter(ctx, op, *operands):
    group, index = _my_groups(ctx, op)
    if group is None:
        raise InterpreterError(f"process {ctx.process.id} is in no replica group")
    values = _exchange(ctx, op, group, list(operands))
    return reduce_scatter_values(values, _int(op, "scatter_dimension"), _combiner(ctx, op),
                                 index)


@kernel("stablehlo.all_to_all", multi=True)
def all_to_all(ctx, op, *operands):
    group, index = _my_groups(ctx, op)
    if group is None:
        raise InterpreterError(f"process {ctx.process.id} is in no replica group")
    split_count = _int(op, "split_count")
    if len(group) != split_count:
        raise InterpreterError(f"split_count {split_count} differs from the process group size "
                               f"{len(group)}")
    values = _exchange(ctx, op, group, list(operands))
    return all_to_all_values(values, _int(op, "split_dimension"), _int(op, "concat_dimension"),
                             split_count, index)


def _roots(op, operands) -> tuple:
    """(data operands, root index per data operand) honouring has_dynamic_root."""
    if _flag(op, "has_dynamic_root"):
        roots = [int(r) for r in np.asarray(operands[-1]).reshape(-1)]
        data = list(operands[:-1])
        if len(roots) != len(data):
            raise InterpreterError(f"has_dynamic_root needs one root per operand: got "
                                   f"{len(roots)} roots for {len(data)} operands")
        return data, roots
    return list(operands), [0] * len(operands)


@kernel("stablehlo.collective_broadcast", multi=True)
def collective_broadcast(ctx, op, *operands):
    data, roots = _roots(op, operands)
    group, _ = _my_groups(ctx, op)
    if group is None:
        return _zeros(op)
    for root in roots:
        if not 0 <= root < len(group):
            raise InterpreterError(f"root index {root} is outside the process group {group}")
    values = _exchange(ctx, op, group, data)
    return collective_broadcast_values(values, roots)


@kernel("stablehlo.collective_reduce", multi=True)
def collective_reduce(ctx, op, *operands):
    data, roots = _roots(op, operands)
    group, index = _my_groups(ctx, op)
    if group is None:
        return _zeros(op)
    values = _exchange(ctx, op, group, data)
    return collective_reduce_values(values, _combiner(ctx, op), roots, index, _zeros(op))


@kernel("stablehlo.collective_permute")
def collective_permute(ctx, op, operand):
    process = ctx.process
    attr = op.attributes.get("source_target_pairs")
    pairs = np.asarray(attr.array, dtype=np.int64).reshape(-1, 2).tolist() if attr else []
    if channel_id(op) <= 0:   # cross_replica: pairs of replica ids within my partition
        pairs = [((s, process.partition_id), (t, process.partition_id)) for s, t in pairs]
    else:                     # cross_partition: pairs of partition ids within my replica
        pairs = [((process.replica_id, s), (process.replica_id, t)) for s, t in pairs]
    zero = zero_storage(op.results[0].type)
    members = sorted({p for pair in pairs for p in pair})
    if process.id not in members:
        return zero
    _check_in_grid(process, members)
    got = process.grid.rendezvous((op.name, channel_id(op)), members, process.id, operand)
    return collective_permute_values(got, pairs, process.id, zero)


# ---------------------------------------------------------------------------
# interpreter.run_parallel

def _symbols(attr, what: str) -> list:
    if not isinstance(attr, ArrayAttr):
        raise InterpreterError(f"'{what}' must be an array of symbol references")
    names = []
    for item in attr.values:
        if not isinstance(item, SymbolRefAttr):
            raise InterpreterError(f"'{what}' must hold symbol references, got {item}")
        names.append(item.name)
    return names


@kernel("interpreter.run_parallel", multi=True)
def run_parallel(ctx, op, *inputs):
    programs_attr = op.attributes.get("programs")
    if not isinstance(programs_attr, ArrayAttr) or not programs_attr.values:
        raise InterpreterError("'programs' must be a non-empty array of arrays of functions")
    programs = [_symbols(row, "programs") for row in programs_attr.values]
    num_partitions = len(programs[0])
    if num_partitions == 0 or any(len(row) != num_partitions for row in programs):
        raise InterpreterError("every row of 'programs' must name the same, non-zero number "
                               "of functions")
    infeed = op.attributes.get("infeed")
    grid = ProcessGrid(len(programs), num_partitions,
                       _symbols(infeed, "infeed") if infeed is not None else ())
    jobs = _split_inputs(ctx, programs, list(inputs))
    outputs = _run_threads(ctx, grid, jobs)
    results = [value for out in outputs for value in out]
    if len(results) != len(op.results):
        raise InterpreterError(f"the programs returned {len(results)} values, but the op has "
                               f"{len(op.results)} results")
    return results


def _split_inputs(ctx, programs, inputs) -> list:
    """[(replica, partition, function, args)] with inputs dealt out in grid order."""
    jobs = []
    at = 0
    for r, row in enumerate(programs):
        for p, name in enumerate(row):
            func = ctx.function(name)
            count = len(func.type.inputs)
            jobs.append((r, p, func, inputs[at:at + count]))
            at += count
    if at != len(inputs):
        raise InterpreterError(f"the programs take {at} inputs in all, but run_parallel has "
                               f"{len(inputs)}")
    return jobs


def _run_threads(ctx, grid: ProcessGrid, jobs) -> list:
    outputs: list = [None] * len(jobs)
    errors: list = [None] * len(jobs)

    def work(k, r, p, func, args):
        child = ctx.fork(Process(r, p, grid))
        try:
            with np.errstate(all="ignore"):
                outputs[k] = child.call_func(func, args)
        except BaseException as exc:  # noqa: BLE001 - reported to the caller below
            errors[k] = exc
            grid.abort(f"process ({r}, {p}) failed: {exc}")

    threads = [threading.Thread(target=work, args=(k, *job), name=f"process{job[:2]}",
                                daemon=True) for k, job in enumerate(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failures = [e for e in errors if e is not None]
    if failures:
        # The first failure that is not just "another process stopped" is the cause.
        root = next((e for e in failures if "stopped: process" not in str(e)), failures[0])
        raise root
    return outputs
