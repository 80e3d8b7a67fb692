"""Interpreter kernels for gather, dynamic_gather, scatter and torch_index_select.

Both gather and scatter are computed for all elements at once: for every
element of the result (gather) or of the updates (scatter) we build, with
numpy broadcasting, the index it maps to in every operand dimension, exactly
as the spec's formulas define it (start index + batching index + offset or
window index), then index with those arrays.

Scatter applies ``update_computation`` in row-major order of the update
index space (the spec leaves the order to the implementation; this is the
order a sequential interpreter uses). Updates whose result index is out of
bounds are skipped element by element. Three ways to apply the region, all
giving the same results (tests compare them):

* a region that just returns its update arguments: last write wins;
* a lane-wise region (elementwise scalar ops, see lanes.py): evaluated on
  arrays, in rounds so that the k-th update to each result element is
  applied in round k (duplicates stay sequential);
* otherwise: one ``ctx.run_region`` call per update element.

The inputs are never modified: results start as copies.
"""
from __future__ import annotations

import numpy as np

from stablehlo.interpreter.index_values import index_array, index_vector, result_dtype
from stablehlo.interpreter.kernels import kernel
from stablehlo.interpreter.lanes import LaneBody, NotLaneWise
from stablehlo.interpreter.opattrs import fail, int_list, int_value, struct_attr
from stablehlo.interpreter.region_patterns import returned_arguments
from stablehlo.ir.attr_readers import struct_ints
from stablehlo.ir.types import TensorType, numpy_dtype


def _axis_iota(size: int, axis: int, rank: int) -> np.ndarray:
    """arange(size) shaped to broadcast along ``axis`` of a rank-``rank`` array."""
    shape = [1] * rank
    shape[axis] = size
    return np.arange(size, dtype=np.int64).reshape(shape)


def _index_vectors(indices: np.ndarray, index_vector_dim: int) -> np.ndarray:
    """Indices moved so the index vectors run along the last axis (int64)."""
    if index_vector_dim == indices.ndim:
        indices = indices[..., None]
    else:
        indices = np.moveaxis(indices, index_vector_dim, -1)
    return index_array(indices)


def _place(array: np.ndarray, axes, rank: int) -> np.ndarray:
    """Reshape ``array`` so its axes land on ``axes`` of a rank-``rank`` array."""
    shape = [1] * rank
    for size, axis in zip(array.shape, axes):
        shape[axis] = size
    return array.reshape(shape)


def _batch_axis(index_dim: int, index_vector_dim: int) -> int:
    """Position among the batch axes of an indices dimension (the spec's d_start rule)."""
    return index_dim - (0 if index_dim < index_vector_dim else 1)


# ---------------------------------------------------------------------------
# gather


def _gather(op, operand, start_indices, slice_sizes) -> np.ndarray:
    dn = struct_attr(op, "dimension_numbers", "gather")
    offset_dims = struct_ints(dn, "offset_dims")
    collapsed = struct_ints(dn, "collapsed_slice_dims")
    operand_batching = struct_ints(dn, "operand_batching_dims")
    indices_batching = struct_ints(dn, "start_indices_batching_dims")
    start_index_map = struct_ints(dn, "start_index_map")
    ivd = int(dn.get("index_vector_dim", 0))
    _check_gather(op, operand, start_indices, slice_sizes, offset_dims, collapsed,
                  operand_batching, start_index_map, ivd)

    starts = _index_vectors(start_indices, ivd)
    batch_shape = starts.shape[:-1]
    rank = len(batch_shape) + len(offset_dims)
    batch_dims = [d for d in range(rank) if d not in offset_dims]
    offset_operand_dims = [d for d in range(operand.ndim)
                           if d not in collapsed and d not in operand_batching]
    result_shape = [0] * rank
    for axis, size in zip(batch_dims, batch_shape):
        result_shape[axis] = size
    for axis, d in zip(offset_dims, offset_operand_dims):
        result_shape[axis] = slice_sizes[d]

    index = []
    for d in range(operand.ndim):
        component = np.zeros([1] * rank, dtype=np.int64)
        if d in start_index_map:
            k = start_index_map.index(d)
            clamped = np.clip(starts[..., k], 0, operand.shape[d] - slice_sizes[d])
            component = component + _place(clamped, batch_dims, rank)
        if d in operand_batching:
            axis = _batch_axis(indices_batching[operand_batching.index(d)], ivd)
            component = component + _axis_iota(batch_shape[axis], batch_dims[axis], rank)
        if d in offset_operand_dims:
            axis = offset_dims[offset_operand_dims.index(d)]
            component = component + _axis_iota(slice_sizes[d], axis, rank)
        index.append(component)
    # A slice size of 0 on a collapsed dimension gathers nothing into a non-empty result; XLA
    # fills it with zeros (and the clamped start would point one past the end).
    if 0 in result_shape or 0 in slice_sizes:
        return np.zeros(result_shape, dtype=operand.dtype)
    gathered = operand[tuple(index)] if index else np.broadcast_to(operand, [1] * rank)
    return np.broadcast_to(gathered, result_shape).copy()


def _check_gather(op, operand, start_indices, slice_sizes, offset_dims, collapsed,
                  operand_batching, start_index_map, ivd) -> None:
    if not 0 <= ivd <= start_indices.ndim:
        raise fail(op, f"index_vector_dim {ivd} out of range for start_indices of rank "
                   f"{start_indices.ndim}")
    vector = start_indices.shape[ivd] if ivd < start_indices.ndim else 1
    if len(start_index_map) != vector:
        raise fail(op, f"start_index_map {start_index_map} must have {vector} entries")
    if len(slice_sizes) != operand.ndim:
        raise fail(op, f"slice_sizes {slice_sizes} must have {operand.ndim} entries")
    for d, (size, dim) in enumerate(zip(slice_sizes, operand.shape)):
        if not 0 <= size <= dim:
            raise fail(op, f"slice size {size} of dimension {d} exceeds its size {dim}")
    if len(offset_dims) + len(collapsed) + len(operand_batching) != operand.ndim:
        raise fail(op, "offset_dims, collapsed_slice_dims and operand_batching_dims must "
                   f"account for all {operand.ndim} operand dimensions")


@kernel("stablehlo.gather")
def gather(ctx, op, operand, start_indices):
    return _gather(op, operand, start_indices, int_list(op, "slice_sizes"))


@kernel("stablehlo.dynamic_gather")
def dynamic_gather(ctx, op, operand, start_indices, slice_sizes):
    return _gather(op, operand, start_indices, index_vector(op, slice_sizes, "slice_sizes"))


# ---------------------------------------------------------------------------
# torch_index_select


@kernel("stablehlo.torch_index_select")
def torch_index_select(ctx, op, operand, index):
    """``result[b.., pre.., i.., post..] = operand[b.., pre.., index[b.., i..], post..]``.

    The first ``batch_dims`` dimensions are shared by operand and index.
    """
    dim = int_value(op, "dim")
    batch = int_value(op, "batch_dims", 0)
    if dim < 0:
        dim += operand.ndim
    if batch < 0:
        batch += index.ndim
    if not 0 <= batch <= dim < operand.ndim or batch > index.ndim:
        raise fail(op, f"invalid dim={dim}, batch_dims={batch} for operand rank "
                   f"{operand.ndim} and index rank {index.ndim}")
    if operand.shape[:batch] != index.shape[:batch]:
        raise fail(op, f"batch dimensions differ: {operand.shape[:batch]} vs "
                   f"{index.shape[:batch]}")
    idx = index_array(index)
    if idx.size and (idx.min() < 0 or idx.max() >= operand.shape[dim]):
        raise fail(op, f"index out of range [0, {operand.shape[dim]})")
    middle = index.ndim - batch
    rank = operand.ndim - 1 + middle
    parts = []
    for d in range(operand.ndim):
        if d < batch or d < dim:
            parts.append(_axis_iota(operand.shape[d], d, rank))
        elif d == dim:
            parts.append(_place(idx, list(range(batch)) + list(range(dim, dim + middle)),
                                rank))
        else:
            parts.append(_axis_iota(operand.shape[d], d - 1 + middle, rank))
    return operand[tuple(parts)]  # advanced indexing makes a new array


# ---------------------------------------------------------------------------
# scatter


def _scatter_targets(op, input_shape, indices, update_shape, dn):
    """For every update element: its result index, and whether it is in bounds.

    Returns ``(flat_targets, in_bounds)`` over the update elements in
    row-major order; ``flat_targets`` are row-major offsets into the inputs.
    """
    window_dims = struct_ints(dn, "update_window_dims")
    inserted = struct_ints(dn, "inserted_window_dims")
    input_batching = struct_ints(dn, "input_batching_dims")
    indices_batching = struct_ints(dn, "scatter_indices_batching_dims")
    to_operand = struct_ints(dn, "scatter_dims_to_operand_dims")
    ivd = int(dn.get("index_vector_dim", 0))
    rank = len(update_shape)
    if not 0 <= ivd <= indices.ndim:
        raise fail(op, f"index_vector_dim {ivd} out of range for scatter_indices of rank "
                   f"{indices.ndim}")
    if len(window_dims) + len(inserted) + len(input_batching) != len(input_shape):
        raise fail(op, "update_window_dims, inserted_window_dims and input_batching_dims "
                   f"must account for all {len(input_shape)} input dimensions")
    starts = _index_vectors(indices, ivd)
    if len(to_operand) != starts.shape[-1]:
        raise fail(op, f"scatter_dims_to_operand_dims {to_operand} must have "
                   f"{starts.shape[-1]} entries")
    scatter_dims = [d for d in range(rank) if d not in window_dims]
    window_input_dims = [d for d in range(len(input_shape))
                         if d not in inserted and d not in input_batching]
    if [update_shape[d] for d in scatter_dims] != list(starts.shape[:-1]):
        raise fail(op, f"updates shape {tuple(update_shape)} does not match the scatter "
                   f"indices shape {indices.shape}")
    components = []
    for d in range(len(input_shape)):
        component = np.zeros([1] * rank, dtype=np.int64)
        if d in to_operand:
            component = component + _place(starts[..., to_operand.index(d)], scatter_dims, rank)
        if d in input_batching:
            axis = _batch_axis(indices_batching[input_batching.index(d)], ivd)
            component = component + _axis_iota(update_shape[scatter_dims[axis]],
                                               scatter_dims[axis], rank)
        if d in window_input_dims:
            axis = window_dims[window_input_dims.index(d)]
            component = component + _axis_iota(update_shape[axis], axis, rank)
        components.append(np.broadcast_to(component, update_shape).ravel())
    in_bounds = np.ones(int(np.prod(update_shape, dtype=np.int64)), dtype=bool)
    for component, size in zip(components, input_shape):
        in_bounds &= (component >= 0) & (component < size)
    if not input_shape or not in_bounds.any():
        return np.zeros(in_bounds.shape, dtype=np.int64), in_bounds
    clipped = [np.clip(c, 0, size - 1) for c, size in zip(components, input_shape)]
    return np.ravel_multi_index(clipped, input_shape), in_bounds


@kernel("stablehlo.scatter", multi=True)
def scatter(ctx, op, *operands):
    if len(operands) % 2 != 1 or len(operands) < 3:
        raise fail(op, f"expected N inputs, 1 index tensor and N updates, got "
                   f"{len(operands)} operands")
    n = len(operands) // 2
    inputs, indices, updates = operands[:n], operands[n], operands[n + 1:]
    if len(op.regions) != 1 or len(op.regions[0].blocks) != 1:
        raise fail(op, "expects one update_computation region with one block")
    region = op.regions[0]
    block_args = region.blocks[0].arguments
    if len(block_args) != 2 * n:
        raise fail(op, f"update_computation must take {2 * n} arguments, "
                   f"got {len(block_args)}")
    if any(x.shape != inputs[0].shape for x in inputs) or any(
            u.shape != updates[0].shape for u in updates):
        raise fail(op, "all inputs (and all updates) must have the same shape")
    dn = struct_attr(op, "scatter_dimension_numbers", "scatter")
    flat, in_bounds = _scatter_targets(op, inputs[0].shape, indices, updates[0].shape, dn)
    targets = flat[in_bounds]
    # Results start as copies of the inputs in the result types; updates are
    # converted to the region's update-argument types (to_destination_type).
    results = [np.array(x, dtype=result_dtype(op, i)).ravel() for i, x in enumerate(inputs)]
    values = [np.asarray(u).ravel()[in_bounds].astype(_scalar_dtype(op, a.type))
              for u, a in zip(updates, block_args[n:])]
    _apply_updates(ctx, op, region, results, targets, values)
    return [r.reshape(inputs[0].shape) for r in results]


def _scalar_dtype(op, type) -> np.dtype:
    if not isinstance(type, TensorType):
        raise fail(op, f"region arguments must be tensors, got {type}")
    return numpy_dtype(type.element_type)


def _apply_updates(ctx, op, region, results, targets, values) -> None:
    """Apply the region to ``results[targets[j]]`` and ``values[j]``, j in order."""
    n = len(results)
    if not len(targets):
        return
    if returned_arguments(region) == list(range(n, 2 * n)):
        _replace_last_wins(results, targets, values)
        return
    body = LaneBody(ctx, region)
    if body.accepts:
        saved = [r.copy() for r in results]
        try:
            _apply_in_rounds(body, results, targets, values)
            return
        except NotLaneWise:
            for result, original in zip(results, saved):
                result[...] = original
    _apply_one_by_one(ctx, op, region, results, targets, values)


def _replace_last_wins(results, targets, values) -> None:
    # np.unique on the reversed targets finds each target's last occurrence.
    _, first_from_end = np.unique(targets[::-1], return_index=True)
    last = len(targets) - 1 - first_from_end
    for result, value in zip(results, values):
        result[targets[last]] = value[last]


def _apply_in_rounds(body, results, targets, values) -> None:
    """Vectorized region calls; round k applies every target's k-th update."""
    order = np.argsort(targets, kind="stable")
    ordered = targets[order]
    starts_group = np.r_[True, ordered[1:] != ordered[:-1]]
    group_start = np.maximum.accumulate(np.where(starts_group, np.arange(len(ordered)), 0))
    occurrence = np.empty(len(targets), dtype=np.int64)
    occurrence[order] = np.arange(len(ordered)) - group_start
    by_round = np.argsort(occurrence, kind="stable")
    counts = np.bincount(occurrence)
    begin = 0
    for count in counts:
        picked = by_round[begin:begin + count]
        begin += count
        where = targets[picked]
        args = [r[where] for r in results] + [v[picked] for v in values]
        outs = body.run(args)
        for result, out in zip(results, outs):
            result[where] = np.broadcast_to(out, where.shape)


def _apply_one_by_one(ctx, op, region, results, targets, values) -> None:
    n = len(results)
    for j, target in enumerate(targets):
        args = [np.asarray(r[target]) for r in results] + [np.asarray(v[j]) for v in values]
        outs = ctx.run_region(region, args)
        if len(outs) != n:
            raise fail(op, f"update_computation returned {len(outs)} values, expected {n}")
        for result, out in zip(results, outs):
            result[target] = out
