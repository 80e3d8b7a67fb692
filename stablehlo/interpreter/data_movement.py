"""Interpreter kernels for ops that create, move or reshape data.

constant, iota, broadcast_in_dim, broadcast, reshape, transpose, reverse,
concatenate, pad, slice, dynamic_slice, dynamic_update_slice, tuple,
get_tuple_element, get_dimension_size, set_dimension_size and the dynamic-shape
forms dynamic_iota, dynamic_broadcast_in_dim, dynamic_reshape, dynamic_pad and
real_dynamic_slice.

None of these ops does arithmetic, so they work unchanged on every element
type, including quantized tensors (which arrive as their storage integers).
Kernels never write into their operands: results are fresh arrays (or, for
``constant``, a read-only view of the attribute's array, so an accidental
in-place write elsewhere fails loudly instead of corrupting the program; a splat the parser
holds as one element is materialized here, within ``max_constant_bytes()``).
"""
from __future__ import annotations

import numpy as np

from stablehlo.interpreter.index_values import (check_shape, index_scalars, index_vector,
                                                result_dtype, result_tensor_type,
                                                static_result_shape)
from stablehlo.interpreter.kernels import kernel
from stablehlo.interpreter.opattrs import fail, int_list, int_value
from stablehlo.ir.attributes import DenseElementsAttr, held_as_splat
from stablehlo.limits import constant_over_limit


@kernel("stablehlo.constant")
def constant(ctx, op):
    attr = op.attributes.get("value")
    if not isinstance(attr, DenseElementsAttr):
        raise fail(op, f"'value' must be a dense elements attribute, got {attr}")
    array = attr.array
    if held_as_splat(array):  # the parser's one-element splat becomes a real array here
        too_big = constant_over_limit(f"constant {attr.type}", array.size * array.itemsize)
        if too_big:
            raise fail(op, too_big)
        array = np.ascontiguousarray(array)
    view = array.view()
    view.flags.writeable = False
    return view


# ---------------------------------------------------------------------------
# iota


def _iota(op, shape, dimension: int) -> np.ndarray:
    if not 0 <= dimension < len(shape):
        raise fail(op, f"iota_dimension {dimension} is out of range for rank {len(shape)}")
    dtype = result_dtype(op)
    line = np.arange(shape[dimension], dtype=np.int64).astype(dtype)
    view_shape = [1] * len(shape)
    view_shape[dimension] = shape[dimension]
    return np.broadcast_to(line.reshape(view_shape), tuple(shape)).copy()


@kernel("stablehlo.iota")
def iota(ctx, op):
    shape = static_result_shape(op)
    if shape is None:
        raise fail(op, f"iota needs a static result type, got {op.result_types[0]}")
    return _iota(op, shape, int_value(op, "iota_dimension"))


@kernel("stablehlo.dynamic_iota")
def dynamic_iota(ctx, op, output_shape):
    shape = check_shape(op, index_vector(op, output_shape, "output_shape"))
    return _iota(op, shape, int_value(op, "iota_dimension"))


# ---------------------------------------------------------------------------
# broadcasts and reshapes


def _broadcast_in_dim(op, operand, dims, shape) -> np.ndarray:
    if len(dims) != operand.ndim:
        raise fail(op, f"broadcast_dimensions {dims} must have one entry per operand "
                   f"dimension (rank {operand.ndim})")
    if len(set(dims)) != len(dims) or any(not 0 <= d < len(shape) for d in dims):
        raise fail(op, f"broadcast_dimensions {dims} must be unique and within "
                   f"result rank {len(shape)}")
    for i, d in enumerate(dims):
        if operand.shape[i] not in (1, shape[d]):
            raise fail(op, f"operand dimension {i} of size {operand.shape[i]} cannot "
                       f"broadcast to result dimension {d} of size {shape[d]}")
    # Order the operand's axes like their target axes, then insert the new
    # axes as size 1 and let numpy broadcast.
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    moved = np.transpose(operand, order)
    view_shape = [1] * len(shape)
    for i in order:
        view_shape[dims[i]] = operand.shape[i]
    return np.broadcast_to(moved.reshape(view_shape), tuple(shape)).copy()


@kernel("stablehlo.broadcast_in_dim")
def broadcast_in_dim(ctx, op, operand):
    shape = static_result_shape(op)
    if shape is None:
        raise fail(op, f"broadcast_in_dim needs a static result type, "
                   f"got {op.result_types[0]}")
    return _broadcast_in_dim(op, operand, int_list(op, "broadcast_dimensions"), shape)


@kernel("stablehlo.dynamic_broadcast_in_dim")
def dynamic_broadcast_in_dim(ctx, op, operand, output_dimensions):
    shape = check_shape(op, index_vector(op, output_dimensions, "output_dimensions"))
    return _broadcast_in_dim(op, operand, int_list(op, "broadcast_dimensions"), shape)


@kernel("stablehlo.broadcast")
def broadcast(ctx, op, operand):
    sizes = tuple(int_list(op, "broadcast_sizes"))
    return np.broadcast_to(operand, sizes + operand.shape).copy()


def _reshape(op, operand, shape) -> np.ndarray:
    if int(np.prod(shape, dtype=np.int64)) != operand.size:
        raise fail(op, f"cannot reshape {operand.size} elements of shape {operand.shape} "
                   f"to {tuple(shape)}")
    return np.reshape(operand, tuple(shape)).copy()


@kernel("stablehlo.reshape")
def reshape(ctx, op, operand):
    shape = static_result_shape(op)
    if shape is None:
        raise fail(op, f"reshape needs a static result type, got {op.result_types[0]}")
    return _reshape(op, operand, shape)


@kernel("stablehlo.dynamic_reshape")
def dynamic_reshape(ctx, op, operand, output_shape):
    shape = check_shape(op, index_vector(op, output_shape, "output_shape"))
    return _reshape(op, operand, shape)


@kernel("stablehlo.transpose")
def transpose(ctx, op, operand):
    perm = int_list(op, "permutation")
    if sorted(perm) != list(range(operand.ndim)):
        raise fail(op, f"permutation {perm} is not a permutation of "
                   f"{list(range(operand.ndim))}")
    return np.transpose(operand, perm).copy()


@kernel("stablehlo.reverse")
def reverse(ctx, op, operand):
    dims = int_list(op, "dimensions")
    if any(not 0 <= d < operand.ndim for d in dims):
        raise fail(op, f"dimensions {dims} out of range for rank {operand.ndim}")
    return np.flip(operand, axis=tuple(dims)).copy()


@kernel("stablehlo.concatenate")
def concatenate(ctx, op, *inputs):
    if not inputs:
        raise fail(op, "needs at least one operand")
    dim = int_value(op, "dimension")
    if not 0 <= dim < inputs[0].ndim:
        raise fail(op, f"dimension {dim} out of range for rank {inputs[0].ndim}")
    return np.concatenate(inputs, axis=dim)


# ---------------------------------------------------------------------------
# pad


def _pad(op, operand, padding_value, low, high, interior) -> np.ndarray:
    rank = operand.ndim
    if not len(low) == len(high) == len(interior) == rank:
        raise fail(op, f"padding lists must have {rank} entries, got low={low}, "
                   f"high={high}, interior={interior}")
    if any(i < 0 for i in interior):
        raise fail(op, f"interior padding must be non-negative, got {interior}")
    # First pad with the non-negative parts of the edge padding, then crop
    # where the edge padding is negative.
    spread = [n + max(n - 1, 0) * i for n, i in zip(operand.shape, interior)]
    padded_shape = [max(lo, 0) + s + max(hi, 0) for lo, s, hi in zip(low, spread, high)]
    value = np.asarray(padding_value).reshape(())
    padded = np.full(padded_shape, value, dtype=operand.dtype)
    if operand.size:
        place = tuple(slice(max(lo, 0), max(lo, 0) + s, i + 1)
                      for lo, s, i in zip(low, spread, interior))
        padded[place] = operand
    crop = []
    for lo, hi, size in zip(low, high, padded_shape):
        start, stop = max(-lo, 0), size - max(-hi, 0)
        if stop < start:
            raise fail(op, f"negative padding low={low}, high={high} removes more "
                       f"than the whole operand of shape {operand.shape}")
        crop.append(slice(start, stop))
    return padded[tuple(crop)].copy()


@kernel("stablehlo.pad")
def pad(ctx, op, operand, padding_value):
    return _pad(op, operand, padding_value, int_list(op, "edge_padding_low"),
                int_list(op, "edge_padding_high"), int_list(op, "interior_padding"))


@kernel("stablehlo.dynamic_pad")
def dynamic_pad(ctx, op, operand, padding_value, low, high, interior):
    result = _pad(op, operand, padding_value, index_vector(op, low, "edge_padding_low"),
                  index_vector(op, high, "edge_padding_high"),
                  index_vector(op, interior, "interior_padding"))
    check_shape(op, result.shape)
    return result


# ---------------------------------------------------------------------------
# slices


def _slice(op, operand, starts, limits, strides) -> np.ndarray:
    rank = operand.ndim
    if not len(starts) == len(limits) == len(strides) == rank:
        raise fail(op, f"start/limit/stride lists must have {rank} entries")
    for d, (s, l, st) in enumerate(zip(starts, limits, strides)):
        if st <= 0 or not 0 <= s <= l <= operand.shape[d]:
            raise fail(op, f"invalid slice {s}:{l}:{st} of dimension {d} with size "
                       f"{operand.shape[d]}")
    return operand[tuple(slice(s, l, st) for s, l, st in zip(starts, limits, strides))].copy()


@kernel("stablehlo.slice")
def slice_(ctx, op, operand):
    starts = int_list(op, "start_indices")
    return _slice(op, operand, starts, int_list(op, "limit_indices"),
                  int_list(op, "strides", [1] * len(starts)))


@kernel("stablehlo.real_dynamic_slice")
def real_dynamic_slice(ctx, op, operand, start_indices, limit_indices, strides):
    result = _slice(op, operand, index_vector(op, start_indices, "start_indices"),
                    index_vector(op, limit_indices, "limit_indices"),
                    index_vector(op, strides, "strides"))
    check_shape(op, result.shape)
    return result


def _clamped_starts(op, operand_shape, starts, sizes) -> list[int]:
    """Start indices clamped so the window [start, start + size) fits."""
    if len(starts) != len(operand_shape) or len(sizes) != len(operand_shape):
        raise fail(op, f"expected {len(operand_shape)} start indices and sizes, got "
                   f"{len(starts)} and {len(sizes)}")
    for d, (size, dim) in enumerate(zip(sizes, operand_shape)):
        if not 0 <= size <= dim:
            raise fail(op, f"slice size {size} of dimension {d} exceeds its size {dim}")
    return [min(max(s, 0), dim - size) for s, dim, size in zip(starts, operand_shape, sizes)]


@kernel("stablehlo.dynamic_slice")
def dynamic_slice(ctx, op, operand, *start_indices):
    sizes = int_list(op, "slice_sizes")
    starts = _clamped_starts(op, operand.shape, index_scalars(op, start_indices), sizes)
    return operand[tuple(slice(s, s + n) for s, n in zip(starts, sizes))].copy()


@kernel("stablehlo.dynamic_update_slice")
def dynamic_update_slice(ctx, op, operand, update, *start_indices):
    if update.ndim != operand.ndim:
        raise fail(op, f"update rank {update.ndim} differs from operand rank "
                   f"{operand.ndim}")
    starts = _clamped_starts(op, operand.shape, index_scalars(op, start_indices),
                             list(update.shape))
    result = operand.copy()
    result[tuple(slice(s, s + n) for s, n in zip(starts, update.shape))] = update
    return result


# ---------------------------------------------------------------------------
# tuples and dimension sizes


@kernel("stablehlo.tuple")
def tuple_(ctx, op, *values):
    return tuple(values)


@kernel("stablehlo.get_tuple_element")
def get_tuple_element(ctx, op, value):
    if not isinstance(value, tuple):
        raise fail(op, f"operand must be a tuple, got {type(value).__name__}")
    index = int_value(op, "index")
    if not 0 <= index < len(value):
        raise fail(op, f"index {index} out of range for a tuple of {len(value)}")
    return value[index]


@kernel("stablehlo.get_dimension_size")
def get_dimension_size(ctx, op, operand):
    dim = int_value(op, "dimension")
    if not 0 <= dim < operand.ndim:
        raise fail(op, f"dimension {dim} out of range for rank {operand.ndim}")
    return np.asarray(operand.shape[dim], dtype=result_dtype(op))


@kernel("stablehlo.set_dimension_size")
def set_dimension_size(ctx, op, operand, size):
    # Only the static form is supported: the result keeps the operand's
    # elements and shape (the dynamic size is bookkeeping for bounded shapes).
    rtype = result_tensor_type(op)
    dim = int_value(op, "dimension")
    if not 0 <= dim < operand.ndim:
        raise fail(op, f"dimension {dim} out of range for rank {operand.ndim}")
    if not rtype.is_static or tuple(rtype.shape) != operand.shape:
        raise fail(op, f"only the static form is supported (result {rtype} must have "
                   f"the operand's shape {operand.shape})")
    return operand.copy()
