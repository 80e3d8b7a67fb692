"""Process groups of collective ops, for the cpu backend's native kernels.

A native collective (native/collectives.cc) exchanges arrays between the instances of a
multi-device execution: instance ``k`` is replica ``k // num_partitions``, partition
``k % num_partitions``. Which instances meet is fixed by the op's attributes and the grid,
so the lowering computes it once, here, with the reference interpreter's own rules
(``stablehlo/interpreter/collectives.py``: ``strategy_for``, ``process_groups``, and its
collective_permute pairing); both backends thus form the same groups.
"""
from __future__ import annotations

import numpy as np

from stablehlo.errors import InterpreterError
from stablehlo.interpreter import collectives as reference

from pjrt.plugins.cpu.attrs import plain
from pjrt.plugins.cpu.native_module import native


def collective_attrs(op, num_replicas: int, num_partitions: int) -> dict:
    """What the native kernel of collective ``op`` needs besides the op's attributes.

    ``num_replicas``, ``num_partitions``, ``channel_id`` and ``collective_groups``: for each
    instance, the instances it exchanges with (flattened ids in the interpreter's group
    order; ``[]`` when it is in no group). collective_permute also gets
    ``permute_sources``: for each instance, the instance whose operand it receives, or -1.

    Raises ``Unsupported`` where the interpreter fails at run time (a group naming a process
    outside the grid, use_global_device_ids without a channel): the op then falls back and
    fails there with the interpreter's error.
    """
    channel = reference.channel_id(op)
    try:
        if op.name == "stablehlo.collective_permute":
            groups, sources = _permute_groups(op, channel, num_replicas, num_partitions)
        else:
            groups, sources = _replica_groups(op, channel, num_replicas, num_partitions), None
    except InterpreterError as exc:
        raise native().Unsupported(str(exc)) from None
    count = num_replicas * num_partitions
    for group in groups:
        if any(not 0 <= k < count for k in group):
            raise native().Unsupported(
                f"a process group names a process outside the grid of {num_replicas} "
                f"replica(s) x {num_partitions} partition(s)")
    attrs = {"num_replicas": num_replicas, "num_partitions": num_partitions,
             "channel_id": channel, "collective_groups": groups}
    if sources is not None:
        attrs["permute_sources"] = sources
    return attrs


def _flat(process, num_partitions: int) -> int:
    replica, partition = process
    if not 0 <= partition < num_partitions:
        return -1  # outside the grid: rejected by the caller
    return replica * num_partitions + partition


def _replica_groups(op, channel: int, num_replicas: int, num_partitions: int) -> list:
    use_global_ids = bool(plain(op.attributes.get("use_global_device_ids")))
    strategy = reference.strategy_for(op.name, channel, use_global_ids)
    attr = plain(op.attributes.get("replica_groups"))
    array = np.asarray(attr if attr is not None else [], dtype=np.int64)
    ids = array.reshape(array.shape[0], -1).tolist() if array.size else []
    processes = reference.process_groups(strategy, ids, num_replicas, num_partitions)
    groups = []
    for k in range(num_replicas * num_partitions):
        group = reference.group_of(processes, divmod(k, num_partitions))
        groups.append([] if group is None else [_flat(p, num_partitions) for p in group])
    return groups


def _permute_groups(op, channel: int, num_replicas: int, num_partitions: int) -> tuple:
    """(members, source) per instance, as the interpreter's collective_permute pairs them:
    ids are replicas within the instance's partition without a channel, partitions within
    its replica with one; the members are every process named in a pair (sorted)."""
    attr = plain(op.attributes.get("source_target_pairs"))
    pairs = np.asarray(attr, dtype=np.int64).reshape(-1, 2).tolist() if attr is not None else []
    groups, sources = [], []
    for k in range(num_replicas * num_partitions):
        replica, partition = me = divmod(k, num_partitions)
        if channel <= 0:
            mine = [((s, partition), (t, partition)) for s, t in pairs]
        else:
            mine = [((replica, s), (replica, t)) for s, t in pairs]
        members = sorted({p for pair in mine for p in pair})
        if me not in members:
            groups.append([])
            sources.append(-1)
            continue
        groups.append([_flat(p, num_partitions) for p in members])
        source = next((s for s, t in mine if t == me), None)
        sources.append(-1 if source is None else _flat(source, num_partitions))
    return groups, sources
