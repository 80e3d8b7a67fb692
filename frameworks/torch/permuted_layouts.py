"""Tensors a compiled segment exchanges in a dense layout other than row-major (a transpose's).

Note [Permuted layouts]
    A segment's programs take and return row-major arrays, but the tensors around them need
    not be: a training step's forward returns ``t(weight)`` for its backward, traced with
    strides ``(1, n)``, and Note [Output layouts] (output_layout.py) gives every returned
    tensor its traced layout. Converted naively, such a tensor is copied three times a step:
    the program transposes, the host copies the row-major result into the traced strides,
    and the next segment copies it back to row-major as its input. When the traced layout
    is dense in some order of the dims (every element once, no gaps, offset 0), the program
    instead returns the array in that order (its dims permuted) and the host puts the traced
    strides on the same memory, and a segment taking such a tensor declares its parameter in
    that order and gets the tensor's memory as it lies (a copy only if a call brings other
    strides). The values are the same; the program's transposes usually cancel (``t(weight)``
    returned in storage order is ``weight``).
"""
from __future__ import annotations

import torch

from frameworks.torch.lowering.dtypes import to_numpy
from frameworks.torch.output_layout import row_major_strides


def dense_order(size, stride, offset) -> tuple | None:
    """The dims of a layout, outermost first, when it lays its elements out densely from
    offset 0 in that order and is not numpy's row-major layout (then a fresh row-major array
    of the permuted shape, given ``stride``, holds it); None otherwise (row-major: nothing to
    do; not dense, or symbolic: the copies of Note [Output layouts])."""
    if not all(isinstance(v, int) for v in (*size, *stride, offset)) or offset != 0 \
            or not all(size):
        return None
    order = tuple(sorted(range(len(size)), key=lambda d: -stride[d]))  # stable: ties keep dims
    expected = 1
    for d in reversed(order):  # innermost first; a dim of one element may take any stride
        if size[d] != 1 and stride[d] != expected:
            return None
        expected *= size[d]
    return None if tuple(stride) == row_major_strides(size) else order


def to_physical_numpy(t: torch.Tensor, order: tuple):
    """``t``'s elements as a row-major numpy array of its dims in ``order``: its own memory
    when its strides are the traced ones."""
    return to_numpy(t.permute(order))


def from_physical(physical: torch.Tensor, size: tuple, stride: tuple) -> torch.Tensor:
    """The tensor of ``size`` and ``stride`` over ``physical``'s (row-major, offset 0)
    memory; not a view, as Note [Output layouts] wants."""
    return physical.new_empty(0).set_(physical.untyped_storage(), 0, size, stride)
