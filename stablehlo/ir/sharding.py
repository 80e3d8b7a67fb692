"""Shardings as typed IR attributes: device meshes, per-dimension tensor shardings, tiles.

Two spellings arrive from JAX; both are read (stablehlo/text/parse_sharding.py) into this one
model:
- Shardy: ``sdy.mesh @mesh = <["x"=4, "y"=2]>`` at module level, and per value
  ``#sdy.sharding<@mesh, [{"x"}, {}], replicated={"y"}>`` (dimension 0 split over ``x``,
  dimension 1 whole, ``y`` explicitly replicated): a ``TensorSharding`` on a ``Mesh``. Axes a
  dimension lists split it in major-to-minor order; mesh axes a sharding does not name are
  replicated. Open dimensions (``{?}``, ``{"x", ?}``) and priorities (``{"x"}p1``) only guide
  propagation and are not kept in the model.
- GSPMD: ``mhlo.sharding = "{devices=[4,1,2]<=[8] last_tile_dim_replicate}"``, a
  ``GspmdSharding``: replicated, maximal (one device), manual, tiled (a ``TileAssignment``:
  the array of devices laid over the tiles of the value) or a tuple of those.

A ``TensorSharding`` on a ``Mesh`` lowers to a ``TileAssignment``, the form both spellings
share and the one runtimes exchange (XLA's ``OpSharding``); equivalent spellings give equal
tile assignments. Device numbers in meshes and tile assignments are *logical* ids (partition
numbers), mapped to devices by the device assignment.

The attributes (``MeshAttr``, ``ShardingAttr``, ``ShardingPerValueAttr``, ``ManualAxesAttr``,
``GspmdShardingAttr``) keep the spelling they were written in, so a program prints back
exactly; the model they carry is what passes read. A Shardy attribute is an ``OpaqueAttr``
and a GSPMD one a ``StringAttr`` (as in MLIR, where ``mhlo.sharding`` is a string), equal to a
plain attribute of the same text, so code that builds the plain form keeps working.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from stablehlo.errors import OpenHLOError
from stablehlo.ir.attributes import OpaqueAttr, StringAttr


class ShardingError(OpenHLOError):
    """A sharding that cannot hold: unknown mesh or axis, an axis that does not divide a
    dimension, an axis used twice, a mesh that does not fit the device count."""


@dataclass(frozen=True)
class Mesh:
    """Named axes over ``size`` logical devices; ``device_ids`` (row-major over the axes)
    default to ``0..size-1``. A mesh without axes and one device id is *maximal*: it pins a
    value to that device."""
    axes: tuple  # ((name, size), ...)
    device_ids: Optional[tuple] = None

    def __post_init__(self):
        names = [n for n, _ in self.axes]
        if len(set(names)) != len(names):
            raise ShardingError(f"mesh {self}: an axis name appears twice")
        for name, size in self.axes:
            if size < 1:
                raise ShardingError(f"mesh {self}: axis \"{name}\" has size {size}")
        if self.device_ids is not None and not self.is_maximal \
                and sorted(self.device_ids) != list(range(self.size)):
            raise ShardingError(f"mesh {self}: device_ids must be a permutation of "
                                f"0..{self.size - 1}")

    @property
    def is_maximal(self) -> bool:
        return not self.axes and self.device_ids is not None and len(self.device_ids) == 1

    @property
    def size(self) -> int:
        return math.prod(s for _, s in self.axes)

    @property
    def names(self) -> tuple:
        return tuple(n for n, _ in self.axes)

    def axis_size(self, name: str) -> int:
        for n, s in self.axes:
            if n == name:
                return s
        raise ShardingError(f"unknown mesh axis \"{name}\" (mesh axes: "
                            f"{', '.join(self.names) or 'none'})")

    def devices(self) -> np.ndarray:
        """The logical device ids laid out over the axes (shape = axis sizes)."""
        ids = np.arange(self.size) if self.device_ids is None else np.array(self.device_ids)
        return ids.reshape([s for _, s in self.axes])

    def __str__(self) -> str:
        from stablehlo.text.print_sharding import print_mesh_body
        return print_mesh_body(self)


@dataclass(frozen=True)
class SubAxis:
    """``"x":(pre_size)size``: the ``size`` devices of axis ``x`` that are ``pre_size``
    apart, a piece of a mesh axis a dimension may be split over."""
    name: str
    pre_size: int
    size: int

    def __str__(self) -> str:
        from stablehlo.text.print_sharding import print_axis
        return print_axis(self)


@dataclass(frozen=True)
class TileAssignment:
    """How a value's tiles map to logical devices (the content of an ``OpSharding``).

    ``replicated``: every device holds the whole value. Otherwise ``devices`` has shape
    ``tile_dims`` (one entry per value dimension, the number of pieces it is cut into),
    plus one trailing dimension of devices holding the same tile when
    ``replicate_on_last_tile_dim``.
    """
    replicated: bool
    devices: Optional[np.ndarray] = None
    replicate_on_last_tile_dim: bool = False

    @property
    def tile_dims(self) -> tuple:
        shape = tuple(self.devices.shape) if self.devices is not None else ()
        return shape[:-1] if self.replicate_on_last_tile_dim else shape

    def __eq__(self, other) -> bool:
        if not isinstance(other, TileAssignment) or self.replicated != other.replicated:
            return False
        return self.replicated or (
            self.replicate_on_last_tile_dim == other.replicate_on_last_tile_dim
            and np.array_equal(self.devices, other.devices))

    def __hash__(self):
        return hash((self.replicated, self.tile_dims))


REPLICATED = TileAssignment(replicated=True)


@dataclass(frozen=True)
class TensorSharding:
    """Per dimension, the mesh axes splitting it (major to minor; an entry is an axis name or
    a ``SubAxis``); ``replicated`` lists axes named as replicated (every axis not used in
    ``dims`` is replicated anyway); ``unreduced`` axes hold partial sums still to be added.
    The mesh is the module's ``sdy.mesh`` named ``mesh_name``, or ``inline_mesh`` when the
    sharding spells its mesh out (``mesh_name`` is then empty)."""
    mesh_name: str
    dims: tuple  # (("x",), (), ...)
    replicated: tuple = ()
    unreduced: tuple = ()
    inline_mesh: Optional[Mesh] = None

    def used_axes(self) -> list:
        return [a for axes in self.dims for a in axes]

    def check(self, mesh: Mesh, shape, where: str = "") -> None:
        """Raise ShardingError unless this sharding fits ``shape`` on ``mesh``."""
        at = f"{where}: " if where else ""
        if len(self.dims) != len(shape):
            raise ShardingError(f"{at}sharding {self} has {len(self.dims)} dimension(s) for a "
                                f"value of rank {len(shape)}")
        used = self.used_axes() + list(self.replicated)
        for axis in used:
            mesh.axis_size(axis)
            if used.count(axis) > 1:
                raise ShardingError(f"{at}sharding {self} uses mesh axis \"{axis}\" twice")
        for d, (axes, extent) in enumerate(zip(self.dims, shape)):
            pieces = math.prod(mesh.axis_size(a) for a in axes)
            if extent is not None and extent % pieces:
                raise ShardingError(
                    f"{at}dimension {d} of size {extent} cannot be split over mesh axes "
                    f"{', '.join(axes)} ({pieces} pieces): {pieces} does not divide {extent}")

    def local_shape(self, mesh: Mesh, shape) -> tuple:
        """The shape of one device's piece of a value of global ``shape``."""
        self.check(mesh, shape)
        return tuple(extent // math.prod(mesh.axis_size(a) for a in axes)
                     for axes, extent in zip(self.dims, shape))

    def global_shape(self, mesh: Mesh, local) -> tuple:
        return tuple(extent * math.prod(mesh.axis_size(a) for a in axes)
                     for axes, extent in zip(self.dims, local))

    def is_replicated(self, mesh: Mesh) -> bool:
        return all(mesh.axis_size(a) == 1 for a in self.used_axes())

    def tile_assignment(self, mesh: Mesh) -> TileAssignment:
        """The devices over the tiles: mesh axes transposed into dimension order, the axes
        this sharding does not use gathered in a trailing replication dimension."""
        if self.is_replicated(mesh):
            return REPLICATED
        used = self.used_axes()
        rest = [n for n in mesh.names if n not in used]
        order = [mesh.names.index(a) for a in used + rest]
        devices = mesh.devices().transpose(order)
        tiles = [math.prod(mesh.axis_size(a) for a in axes) for axes in self.dims]
        copies = math.prod(mesh.axis_size(a) for a in rest)
        if copies > 1:
            return TileAssignment(False, devices.reshape(tiles + [copies]), True)
        return TileAssignment(False, devices.reshape(tiles))

    def __str__(self) -> str:
        from stablehlo.text.print_sharding import print_sharding
        return print_sharding(self)


@dataclass(frozen=True)
class GspmdSharding:
    """What an ``mhlo.sharding`` string says. ``kind`` is ``replicated``, ``maximal`` (the
    whole value on ``device``), ``manual``, ``unknown``, ``tiled`` (``tiles``; trailing tile
    dimensions beyond the value's rank are subgroups of the kinds in ``last_tile_dims``,
    ``("replicated",)`` for ``last_tile_dim_replicate``) or ``tuple`` (``elements``, one per
    tuple element)."""
    kind: str
    tiles: Optional[TileAssignment] = None
    device: Optional[int] = None
    last_tile_dims: tuple = ()
    elements: tuple = ()

    def tile_assignment(self, rank: int) -> TileAssignment:
        """The tiles of a value of ``rank`` (``replicated`` or ``tiled`` with at most a
        replication subgroup; callers refuse the other kinds first)."""
        if self.kind == "replicated":
            return REPLICATED
        if self.kind != "tiled" or self.last_tile_dims not in ((), ("replicated",)):
            raise ShardingError(f"mhlo.sharding {self} has no tile assignment")
        dims = self.tiles.devices.shape
        replicate = self.tiles.replicate_on_last_tile_dim
        if len(dims) != rank + int(replicate):
            raise ShardingError(f"mhlo.sharding {self} has {len(dims)} tile dimension(s) for "
                                f"a value of rank {rank}")
        if self.tiles.devices.size == 1 or (replicate and all(d == 1 for d in dims[:-1])):
            return REPLICATED
        return self.tiles

    def __str__(self) -> str:
        from stablehlo.text.print_sharding import print_gspmd_sharding
        return print_gspmd_sharding(self)


# ---- the attributes ------------------------------------------------------------------------

class _SameAsItsText:
    """Equality and hash of the text alone, so that a typed attribute equals the plain one
    of the same spelling (a program parsed before and one built in code compare equal)."""

    def _spelling(self) -> str:
        raise NotImplementedError

    def __eq__(self, other) -> bool:
        plain = OpaqueAttr if isinstance(self, OpaqueAttr) else StringAttr
        return isinstance(other, plain) and _spelling_of(other) == self._spelling()

    def __hash__(self) -> int:
        return hash((self._spelling(),))


def _spelling_of(attr) -> str:
    return attr.text if isinstance(attr, OpaqueAttr) else attr.value


@dataclass(frozen=True, eq=False)
class MeshAttr(_SameAsItsText, OpaqueAttr):
    """``#sdy.mesh<["x"=4, "y"=2]>``: ``text`` as written, ``mesh`` what it says."""
    mesh: Mesh

    @staticmethod
    def of(mesh: Mesh) -> MeshAttr:
        return MeshAttr("#sdy.mesh" + str(mesh), mesh)

    def _spelling(self) -> str:
        return self.text


@dataclass(frozen=True, eq=False)
class ShardingAttr(_SameAsItsText, OpaqueAttr):
    """``#sdy.sharding<@mesh, [{"x"}, {}]>``: ``text`` as written, ``sharding`` its model."""
    sharding: TensorSharding

    @staticmethod
    def of(sharding: TensorSharding) -> ShardingAttr:
        return ShardingAttr(str(sharding), sharding)

    def _spelling(self) -> str:
        return self.text


@dataclass(frozen=True, eq=False)
class ShardingPerValueAttr(_SameAsItsText, OpaqueAttr):
    """``#sdy.sharding_per_value<[<@mesh, [{}]>, ...]>``: one sharding per value."""
    shardings: tuple

    @staticmethod
    def of(shardings) -> ShardingPerValueAttr:
        from stablehlo.text.print_sharding import print_sharding_body
        shardings = tuple(shardings)
        text = ", ".join(print_sharding_body(s) for s in shardings)
        return ShardingPerValueAttr(f"#sdy.sharding_per_value<[{text}]>", shardings)

    def _spelling(self) -> str:
        return self.text


@dataclass(frozen=True, eq=False)
class ManualAxesAttr(_SameAsItsText, OpaqueAttr):
    """``#sdy<manual_axes{"x", "y"}>``: the mesh axes a manual computation's body owns."""
    axes: tuple

    def _spelling(self) -> str:
        return self.text


@dataclass(frozen=True, eq=False)
class GspmdShardingAttr(_SameAsItsText, StringAttr):
    """``mhlo.sharding = "{devices=[2,1]<=[2]}"``: ``value`` the string as written,
    ``sharding`` what it says."""
    sharding: GspmdSharding

    def _spelling(self) -> str:
        return self.value
