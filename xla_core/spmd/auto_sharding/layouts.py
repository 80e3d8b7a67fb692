"""The shardings auto-sharding chooses among, and the user's text for a mesh and a byte count.

A layout is the per-dimension axis tuple of ``annotations`` (``(("x",), ())``: dim 0 split
over ``x``). ``layouts(shape, mesh)`` lists every layout of a value on the mesh: each axis
splits one dimension or none, several axes on one dimension in mesh order, and only where
the axes divide the dimension's extent (the partitioner's pieces are equal). The list starts
with the replicated layout and its order is fixed by the mesh and the shape alone, so the
problem the solver sees (and its answer) is the same on every run.
"""
from __future__ import annotations

import itertools
import math

from stablehlo.errors import OpenHLOError
from stablehlo.ir.sharding import Mesh, ShardingError


class AutoShardingError(OpenHLOError):
    """Bad auto-sharding input: mesh or memory-limit text, a limit no plan meets."""


def parse_mesh(text: str) -> Mesh:
    """``"x=4,y=2"`` -> a mesh with axes x (4) and y (2), devices 0..7 row-major. Axes may
    also be separated by ``;`` (a pass option's value cannot hold a comma)."""
    axes = []
    for item in text.replace(";", ",").split(","):
        name, sep, size = item.strip().partition("=")
        name = name.strip()
        if not sep or not name.isidentifier() or not size.strip().isdigit():
            raise AutoShardingError(f"mesh {text!r}: {item.strip()!r} is not NAME=SIZE "
                                    f"(write axes as x=4,y=2)")
        if int(size) < 1:
            raise AutoShardingError(f"mesh {text!r}: axis {name!r} has size {size.strip()}")
        axes.append((name, int(size)))
    try:
        return Mesh(tuple(axes))
    except ShardingError as exc:
        raise AutoShardingError(f"mesh {text!r}: {exc}") from None


_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def parse_bytes(text: str) -> int:
    """``"2GiB"``, ``"512MB"``, ``"1.5GiB"``, ``"4096"`` -> bytes."""
    body = text.strip()
    split = len(body)
    while split and body[split - 1].isalpha():
        split -= 1
    number, unit = body[:split].strip(), body[split:].upper()
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if unit not in _UNITS or value <= 0 or not math.isfinite(value):
        raise AutoShardingError(f"memory limit {text!r}: expected a positive size such as "
                                f"2GiB, 512MB or 4096 (units: B, KB, MB, GB, KiB, MiB, GiB)")
    return int(value * _UNITS[unit])


def layouts(shape, mesh: Mesh) -> list:
    """Every layout of a value of ``shape`` on ``mesh`` (replicated first; see the module
    doc)."""
    names = mesh.names
    out = []
    for choice in itertools.product(range(-1, len(shape)), repeat=len(names)):
        dims = tuple(tuple(a for a, d in zip(names, choice) if d == i)
                     for i in range(len(shape)))
        if all(extent % math.prod(mesh.axis_size(a) for a in axes) == 0
               for axes, extent in zip(dims, shape)):
            out.append(dims)
    return out


def pieces(dims, mesh: Mesh) -> int:
    """How many pieces a layout cuts a value into."""
    return math.prod(mesh.axis_size(a) for axes in dims for a in axes)


def layout_text(dims) -> str:
    """``[{"x"}, {}]``: a layout as the sdy spelling writes its dimensions."""
    return "[" + ", ".join("{" + ", ".join(f'"{a}"' for a in axes) + "}" for axes in dims) + "]"


__all__ = ["AutoShardingError", "layout_text", "layouts", "parse_bytes", "parse_mesh", "pieces"]
