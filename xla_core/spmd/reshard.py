"""Resharding: the collectives that turn one device's piece of a value laid out as ``have``
into its piece laid out as ``target`` (both per-dimension axis tuples on one mesh).

A plan is a list of steps over the per-dimension axis lists, applied in order:
- ``("all_to_all", i, j, a)``: mesh axis ``a``, the minor-most split of dim ``i``, moves to
  become the next split of dim ``j`` (each device keeps 1/n of its piece along ``j`` and
  receives the other pieces of dim ``i``): moves one piece's bytes;
- ``("all_gather", i, axes)``: dim ``i`` stops being split over the trailing ``axes``;
- ``("slice", i, axes)``: dim ``i`` is further split over ``axes``, each device cutting its
  part out of what it holds (a dynamic_slice at an offset looked up by partition id): no
  communication.

Two plans are considered: one that first moves axes between dims with all-to-alls where it
can, and gather-then-slice; the one moving fewer bytes per device (collective result bytes,
as XLA counts them) wins, the all-to-all one on ties.
"""
from __future__ import annotations

import math

import numpy as np


def plan(have, target, local_shape, itemsize: int, axis_size) -> tuple:
    """``(steps, bytes moved per device)`` of the cheapest plan."""
    candidates = [_plan(have, target, True), _plan(have, target, False)]
    costed = [(steps, cost(steps, local_shape, itemsize, axis_size)) for steps in candidates]
    return min(costed, key=lambda c: c[1])


def _plan(have, target, moves: bool) -> list:
    cur = [list(axes) for axes in have]
    steps = []
    while moves and _move(cur, target, steps):
        pass
    for i, axes in enumerate(cur):
        keep = _common_prefix(axes, target[i])
        if len(keep) < len(axes):
            steps.append(("all_gather", i, tuple(axes[len(keep):])))
            cur[i] = list(keep)
    for i, axes in enumerate(cur):
        add = tuple(target[i][len(axes):])
        if add:
            steps.append(("slice", i, add))
            cur[i] = list(target[i])
    return steps


def _move(cur: list, target, steps: list) -> bool:
    """Apply one all-to-all move if one applies."""
    for i, axes in enumerate(cur):
        if len(_common_prefix(axes, target[i])) == len(axes):
            continue
        a = axes[-1]
        for j, other in enumerate(cur):
            want = tuple(target[j])
            if (j != i and want[:len(other)] == tuple(other) and len(want) > len(other)
                    and want[len(other)] == a):
                steps.append(("all_to_all", i, j, a))
                axes.pop()
                other.append(a)
                return True
    return False


def _common_prefix(a, b) -> tuple:
    out = []
    for x, y in zip(a, b):
        if x != y:
            break
        out.append(x)
    return tuple(out)


def cost(steps, local_shape, itemsize: int, axis_size) -> int:
    """Bytes per device of the collectives' results along ``steps``."""
    return sum(step_bytes(steps, local_shape, itemsize, axis_size))


def step_bytes(steps, local_shape, itemsize: int, axis_size) -> list:
    """Per step of ``steps``: the bytes of its collective's result per device (0 for a
    local slice)."""
    shape = list(local_shape)
    out = []
    for step in steps:
        if step[0] == "all_to_all":
            _, i, j, a = step
            shape[j] //= axis_size(a)
            shape[i] *= axis_size(a)
            out.append(math.prod(shape) * itemsize)
        elif step[0] == "all_gather":
            _, i, axes = step
            shape[i] *= math.prod(axis_size(a) for a in axes)
            out.append(math.prod(shape) * itemsize)
        else:
            _, i, axes = step
            shape[i] //= math.prod(axis_size(a) for a in axes)
            out.append(0)
    return out


def slice_offsets(coordinates: dict, axes, extent: int, axis_size) -> np.ndarray:
    """Per logical device id: where its part starts when a dim it holds ``extent * n``
    elements of is split further over ``axes`` (major to minor) into parts of ``extent``."""
    offsets = np.zeros(len(coordinates), dtype=np.int32)
    for device, coords in coordinates.items():
        index = 0
        for a in axes:
            index = index * axis_size(a) + int(coords[a])
        offsets[device] = index * extent
    return offsets


__all__ = ["cost", "plan", "slice_offsets", "step_bytes"]
