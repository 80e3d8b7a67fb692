"""Verifiers and type inference of the cross-replica / cross-partition ops.

Only what is knowable without the device configuration is checked: replica
groups are 2-D, their ids unique (``-1`` pads uneven groups), and result
shapes follow from the group size. An empty ``replica_groups`` means "all
processes", whose number is not known here, so the affected dimension is
inferred as dynamic.
"""
from __future__ import annotations

import numpy as np

from stablehlo.ir.ops.base import op_error
from stablehlo.ir.ops.shape_inference import (
    Rule, bool_attr, check_in_range, expect_num_operands, int_attr, int_matrix, is_promotable,
    reducer_types, shapes_compatible, tensor_operand, tensor_operands,
)
from stablehlo.ir.types import TensorType, UI32


def _group_size(op, name: str = "replica_groups"):
    """Size of each replica group, or None when the groups are implicit."""
    groups = int_matrix(op, name, (0, 0))
    ids = groups[groups >= 0]
    if len(np.unique(ids)) != len(ids):
        raise op_error(op, f"attribute '{name}' lists a device id more than once: "
                           f"{groups.tolist()}")
    if groups.size == 0:
        return None
    return int(groups.shape[1])


def _channel_id(op) -> int:
    handle = op.attributes.get("channel_handle")
    value = handle.get("handle") if hasattr(handle, "get") else None
    return value if isinstance(value, int) else 0


def _process_group_size(op):
    """Processes per group, or None when it depends on the device configuration.

    With a channel and without ``use_global_device_ids`` the mode is
    ``cross_replica_and_partition``: every replica group spans all partitions,
    whose number is not known here.
    """
    group = _group_size(op)
    global_ids = bool_attr(op, "use_global_device_ids")
    if global_ids and _channel_id(op) <= 0:
        raise op_error(op, "use_global_device_ids requires a channel_handle with "
                           "handle > 0")
    if _channel_id(op) > 0 and not global_ids:
        return None
    return group


def _binary_reducer(op, types: list) -> object:
    """The element type E of a ``(tensor<E>, tensor<E>) -> tensor<E>`` computation
    applied to every operand (all_reduce and friends)."""
    (elem,) = reducer_types(op, 0, types[:1], types[:1], "computation", "operand")
    for i, t in enumerate(types[1:], start=1):
        if not is_promotable(t.element_type, elem):
            raise op_error(op, f"operand #{i} has element type {t.element_type}, which cannot "
                               f"be promoted to the computation's {elem}")
    return elem


def _scaled(size, factor, divide: bool):
    if size is None or factor is None:
        return None
    return size // factor if divide else size * factor


def _infer_id(op):
    expect_num_operands(op, 0)
    return [TensorType((), UI32)]


def _infer_all_gather(op):
    types = tensor_operands(op)
    if not types:
        raise op_error(op, "expected at least 1 operand, got 0")
    dim = int_attr(op, "all_gather_dim")
    group = _process_group_size(op)
    results = []
    for t in types:
        check_in_range(op, "attribute 'all_gather_dim'", [dim], 0, t.rank)
        shape = list(t.shape)
        shape[dim] = _scaled(shape[dim], group, divide=False)
        results.append(t.with_shape(shape))
    return results


def _infer_all_reduce(op):
    types = tensor_operands(op)
    if not types:
        raise op_error(op, "expected at least 1 operand, got 0")
    _process_group_size(op)
    elem = _binary_reducer(op, types)
    return [t.with_element_type(elem) for t in types]


def _infer_reduce_scatter(op):
    """StableHLO's reduce_scatter takes one operand; more are read as XLA's variadic
    reduce-scatter (what reduce-scatter-combiner makes): each operand is scattered alike."""
    types = tensor_operands(op)
    if not types:
        raise op_error(op, "expected at least 1 operand, got 0")
    dim = int_attr(op, "scatter_dimension")
    group = _process_group_size(op)
    elem = _binary_reducer(op, types)
    results = []
    for i, t in enumerate(types):
        check_in_range(op, "attribute 'scatter_dimension'", [dim], 0, t.rank)
        if group is not None and t.shape[dim] is not None and t.shape[dim] % group:
            raise op_error(op, f"operand #{i} dimension {dim} has size {t.shape[dim]}, which "
                               f"is not a multiple of the replica group size {group}")
        shape = list(t.shape)
        shape[dim] = _scaled(shape[dim], group, divide=True)
        results.append(t.with_shape(shape).with_element_type(elem))
    return results


def _infer_all_to_all(op):
    types = tensor_operands(op)
    if not types:
        raise op_error(op, "expected at least 1 operand, got 0")
    split, concat = int_attr(op, "split_dimension"), int_attr(op, "concat_dimension")
    count = int_attr(op, "split_count")
    if count <= 0:
        raise op_error(op, f"attribute 'split_count' is {count}, expected a positive value")
    group = _group_size(op)
    if group is not None and group != count:
        raise op_error(op, f"replica groups have size {group}, expected split_count {count}")
    results = []
    for t in types:
        check_in_range(op, "attribute 'split_dimension'", [split], 0, t.rank)
        check_in_range(op, "attribute 'concat_dimension'", [concat], 0, t.rank)
        shape = list(t.shape)
        if shape[split] is not None and shape[split] % count:
            raise op_error(op, f"operand dimension {split} has size {shape[split]}, which is "
                               f"not a multiple of split_count {count}")
        shape[split] = _scaled(shape[split], count, divide=True)
        shape[concat] = _scaled(shape[concat], count, divide=False)
        results.append(t.with_shape(shape))
    return results


def _infer_collective_permute(op):
    expect_num_operands(op, 1)
    pairs = int_matrix(op, "source_target_pairs")
    if pairs.size and pairs.shape[1] != 2:
        raise op_error(op, f"attribute 'source_target_pairs' has shape {list(pairs.shape)}, "
                           f"expected [N, 2]")
    for column, what in ((0, "source"), (1, "target")):
        ids = pairs[:, column] if pairs.size else pairs.reshape(-1)
        if len(np.unique(ids)) != len(ids):
            raise op_error(op, f"attribute 'source_target_pairs' repeats a {what} id: "
                               f"{pairs.tolist()}")
    return [tensor_operand(op, 0)]


def _infer_collective_reduce(op):
    types = tensor_operands(op)
    _group_size(op)
    elem = _binary_reducer(op, types)
    return [t.with_element_type(elem) for t in types]


def _check_collective_broadcast(op):
    """Results mirror the operands; a trailing root operand may have no result."""
    _group_size(op)
    for i, (v, r) in enumerate(zip(op.operands, op.results)):
        if isinstance(v.type, TensorType) and isinstance(r.type, TensorType):
            if not shapes_compatible(v.type.shape, r.type.shape):
                raise op_error(op, f"result #{i} has type {r.type}, expected the shape of "
                                   f"operand {v.type}")


RULES = {
    "replica_id": Rule(_infer_id),
    "partition_id": Rule(_infer_id),
    "all_gather": Rule(_infer_all_gather),
    "all_reduce": Rule(_infer_all_reduce),
    "reduce_scatter": Rule(_infer_reduce_scatter),
    "all_to_all": Rule(_infer_all_to_all),
    "collective_permute": Rule(_infer_collective_permute),
    "collective_broadcast": Rule(check=_check_collective_broadcast),
    "collective_reduce": Rule(_infer_collective_reduce),
}


def rule_for(mnemonic: str):
    """The Rule declared for ``mnemonic`` in this file, or None."""
    return RULES.get(mnemonic)
