"""Verifiers and type inference of gather, dynamic_gather and scatter.

The dimension-number constraints follow the spec's gather (C1-C23) and
scatter (C1-C25) sections; the result shape of gather is rebuilt from the
start indices' batch dimensions and the kept slice sizes.
"""
from __future__ import annotations

from stablehlo.ir.ops.base import op_error
from stablehlo.ir.ops.shape_inference import (
    Rule, check_dims, check_in_range, constant_ints, check_size, check_sorted, check_unique,
    dims_compatible, fmt_shape, int_list, is_index_like, reducer_types, struct_attr,
    struct_ints, tensor_operand,
)


def _indices_operand(op, index: int, what: str):
    t = tensor_operand(op, index, f"operand #{index} ({what})")
    if not is_index_like(t.element_type):
        raise op_error(op, f"operand #{index} ({what}) has type {t}, expected integer "
                           f"elements")
    return t


def _batch_shape(indices, index_vector_dim: int) -> list:
    """The indices' shape without the index vector dimension."""
    return [s for d, s in enumerate(indices.shape) if d != index_vector_dim]


def _index_count(indices, index_vector_dim: int):
    if index_vector_dim < indices.rank:
        return indices.shape[index_vector_dim]
    return 1


def _check_batching(op, names: tuple, operand, indices, operand_batch: list,
                    indices_batch: list, index_vector_dim: int) -> None:
    """Batching dims of operand and indices pair up with equal sizes."""
    operand_name, indices_name = names
    check_sorted(op, operand_name, operand_batch)
    check_in_range(op, operand_name, operand_batch, 0, operand.rank)
    check_dims(op, indices_name, indices_batch, indices.rank)
    if index_vector_dim in indices_batch:
        raise op_error(op, f"{indices_name} contains index_vector_dim {index_vector_dim}")
    check_size(op, indices_name, indices_batch, len(operand_batch), f"the size of "
               f"{operand_name}")
    for od, idd in zip(operand_batch, indices_batch):
        if not dims_compatible(operand.shape[od], indices.shape[idd]):
            raise op_error(op, f"operand dimension {od} has size {operand.shape[od]}, but "
                               f"indices batching dimension {idd} has size "
                               f"{indices.shape[idd]}; they must be equal")


# ---------------------------------------------------------------------------
# gather

def _gather_dims(op, operand, indices, rank_slice_sizes: int):
    dn = struct_attr(op, "dimension_numbers", "gather")
    offset = struct_ints(dn, "offset_dims")
    collapsed = struct_ints(dn, "collapsed_slice_dims")
    operand_batch = struct_ints(dn, "operand_batching_dims")
    indices_batch = struct_ints(dn, "start_indices_batching_dims")
    start_map = struct_ints(dn, "start_index_map")
    ivd = struct_ints(dn, "index_vector_dim")[0]
    if operand.rank != len(offset) + len(collapsed) + len(operand_batch):
        raise op_error(op, f"operand {operand} has rank {operand.rank}, expected "
                           f"size(offset_dims) + size(collapsed_slice_dims) + "
                           f"size(operand_batching_dims) = "
                           f"{len(offset) + len(collapsed) + len(operand_batch)}")
    check_in_range(op, "index_vector_dim", [ivd], 0, indices.rank + 1)
    count = _index_count(indices, ivd)
    if count is not None and len(start_map) != count:
        raise op_error(op, f"start_index_map has size {len(start_map)}, expected {count} "
                           f"(the size of the index vector dimension of {indices})")
    check_unique(op, "offset_dims", offset)
    check_sorted(op, "offset_dims", offset)
    check_unique(op, "collapsed_slice_dims + operand_batching_dims", collapsed + operand_batch)
    check_sorted(op, "collapsed_slice_dims", collapsed)
    check_in_range(op, "collapsed_slice_dims", collapsed, 0, operand.rank)
    _check_batching(op, ("operand_batching_dims", "start_indices_batching_dims"), operand,
                    indices, operand_batch, indices_batch, ivd)
    check_unique(op, "start_index_map + operand_batching_dims", start_map + operand_batch)
    check_in_range(op, "start_index_map", start_map, 0, operand.rank)
    check_size(op, "slice_sizes", range(rank_slice_sizes), operand.rank,
               f"the rank of operand {operand}")
    return offset, collapsed, operand_batch, ivd


def _gather_result_shape(op, indices, sizes: list, offset: list, dropped: set, ivd: int):
    batch = _batch_shape(indices, ivd)
    kept = [s for d, s in enumerate(sizes) if d not in dropped]
    rank = len(batch) + len(offset)
    check_in_range(op, "offset_dims", offset, 0, rank)
    shape, batch_it, kept_it = [], iter(batch), iter(kept)
    for d in range(rank):
        shape.append(next(kept_it) if d in offset else next(batch_it))
    return shape


def _infer_gather(op):
    operand = tensor_operand(op, 0)
    indices = _indices_operand(op, 1, "start_indices")
    return [_gather_result(op, operand, indices, int_list(op, "slice_sizes"))]


def _gather_result(op, operand, indices, sizes: list):
    """The result type of gather; ``sizes`` may hold None for unknown slice sizes."""
    offset, collapsed, operand_batch, ivd = _gather_dims(op, operand, indices, len(sizes))
    for d, (want, size) in enumerate(zip(sizes, operand.shape)):
        if want is not None and (want < 0 or (size is not None and want > size)):
            raise op_error(op, f"slice_sizes is {sizes}, expected 0 <= slice_sizes <= "
                               f"{fmt_shape(operand.shape)} (dimension {d})")
    for d in collapsed + operand_batch:
        if sizes[d] is not None and sizes[d] > 1:
            raise op_error(op, f"slice_sizes[{d}] is {sizes[d]}, expected <= 1 (dimension "
                               f"{d} is collapsed or a batching dimension)")
    shape = _gather_result_shape(op, indices, sizes, offset, set(collapsed + operand_batch),
                                 ivd)
    return operand.with_shape(shape)


def _infer_dynamic_gather(op):
    """dynamic_gather: slice sizes are an operand, known only when it is a constant."""
    operand = tensor_operand(op, 0)
    indices = _indices_operand(op, 1, "start_indices")
    sizes = tensor_operand(op, 2, "operand #2 (slice_sizes)")
    if sizes.rank != 1 or sizes.shape[0] is None or not is_index_like(sizes.element_type):
        raise op_error(op, f"operand #2 (slice_sizes) has type {sizes}, expected a static "
                           f"1-D integer tensor")
    values = constant_ints(op.operands[2])
    if values is None:
        values = [None] * sizes.shape[0]
    return [_gather_result(op, operand, indices, values)]


# ---------------------------------------------------------------------------
# scatter

def _scatter_operands(op):
    count = len(op.operands)
    if count < 3 or count % 2 == 0:
        raise op_error(op, f"expected 2N+1 operands (inputs, scatter_indices, updates), "
                           f"got {count}")
    n = (count - 1) // 2
    inputs = [tensor_operand(op, i) for i in range(n)]
    indices = _indices_operand(op, n, "scatter_indices")
    updates = [tensor_operand(op, n + 1 + i) for i in range(n)]
    for i, t in enumerate(inputs[1:], start=1):
        if not _same_shape(t, inputs[0]):
            raise op_error(op, f"input #{i} has type {t}, expected the shape of {inputs[0]}")
    for i, t in enumerate(updates[1:], start=1):
        if not _same_shape(t, updates[0]):
            raise op_error(op, f"update #{i} has type {t}, expected the shape of "
                               f"{updates[0]}")
    return inputs, indices, updates


def _same_shape(a, b) -> bool:
    return a.rank == b.rank and all(dims_compatible(x, y) for x, y in zip(a.shape, b.shape))


def _check_scatter_dims(op, operand, indices, update):
    dn = struct_attr(op, "scatter_dimension_numbers", "scatter")
    window = struct_ints(dn, "update_window_dims")
    inserted = struct_ints(dn, "inserted_window_dims")
    operand_batch = struct_ints(dn, "input_batching_dims")
    indices_batch = struct_ints(dn, "scatter_indices_batching_dims")
    to_operand = struct_ints(dn, "scatter_dims_to_operand_dims")
    ivd = struct_ints(dn, "index_vector_dim")[0]
    if operand.rank != len(window) + len(inserted) + len(operand_batch):
        raise op_error(op, f"input {operand} has rank {operand.rank}, expected "
                           f"size(update_window_dims) + size(inserted_window_dims) + "
                           f"size(input_batching_dims) = "
                           f"{len(window) + len(inserted) + len(operand_batch)}")
    check_in_range(op, "index_vector_dim", [ivd], 0, indices.rank + 1)
    check_unique(op, "update_window_dims", window)
    check_sorted(op, "update_window_dims", window)
    check_in_range(op, "update_window_dims", window, 0, update.rank)
    check_unique(op, "inserted_window_dims + input_batching_dims", inserted + operand_batch)
    check_sorted(op, "inserted_window_dims", inserted)
    check_in_range(op, "inserted_window_dims", inserted, 0, operand.rank)
    _check_batching(op, ("input_batching_dims", "scatter_indices_batching_dims"), operand,
                    indices, operand_batch, indices_batch, ivd)
    count = _index_count(indices, ivd)
    if count is not None and len(to_operand) != count:
        raise op_error(op, f"scatter_dims_to_operand_dims has size {len(to_operand)}, "
                           f"expected {count} (the size of the index vector dimension of "
                           f"{indices})")
    check_unique(op, "scatter_dims_to_operand_dims + input_batching_dims",
                 to_operand + operand_batch)
    check_in_range(op, "scatter_dims_to_operand_dims", to_operand, 0, operand.rank)
    _check_update_shape(op, operand, indices, update, window,
                        set(inserted + operand_batch), ivd)


def _check_update_shape(op, operand, indices, update, window, dropped, ivd) -> None:
    batch = _batch_shape(indices, ivd)
    expected_rank = len(batch) + len(window)
    if update.rank != expected_rank:
        raise op_error(op, f"updates have type {update}, expected rank {expected_rank} "
                           f"(size(update_window_dims) + the scatter indices' batch rank)")
    window_bounds = [s for d, s in enumerate(operand.shape) if d not in dropped]
    scatter_dims = [d for d in range(update.rank) if d not in window]
    for d, bound in zip(window, window_bounds):
        size = update.shape[d]
        if size is not None and bound is not None and size > bound:
            raise op_error(op, f"updates have type {update}: window dimension {d} has size "
                               f"{size}, expected at most {bound} (the input's)")
    for d, want in zip(scatter_dims, batch):
        if not dims_compatible(update.shape[d], want):
            raise op_error(op, f"updates have type {update}: scatter dimension {d} has size "
                               f"{update.shape[d]}, expected {want} (from the scatter "
                               f"indices {indices})")


def _infer_scatter(op):
    inputs, indices, updates = _scatter_operands(op)
    _check_scatter_dims(op, inputs[0], indices, updates[0])
    elems = reducer_types(op, 0, inputs, updates, "update_computation", "update")
    return [t.with_element_type(e) for t, e in zip(inputs, elems)]


RULES = {
    "gather": Rule(_infer_gather),
    "dynamic_gather": Rule(_infer_dynamic_gather),
    "scatter": Rule(_infer_scatter),
}
