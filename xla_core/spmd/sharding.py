"""Shardings: device meshes with named axes, per-dimension tensor shardings, tile assignments.

Two spellings arrive from JAX and both are read here:
- Shardy: ``sdy.mesh @mesh = <["x"=4, "y"=2]>`` at module level, and per value
  ``#sdy.sharding<@mesh, [{"x"}, {}], replicated={"y"}>`` (dimension 0 split over ``x``,
  dimension 1 whole, ``y`` explicitly replicated). Axes a dimension lists split it in
  major-to-minor order; mesh axes a sharding does not name are replicated.
- GSPMD: ``mhlo.sharding = "{devices=[4,1,2]<=[8] last_tile_dim_replicate}"``, a tile
  assignment: the array of devices laid over the tiles of the value.

A ``TensorSharding`` on a ``Mesh`` lowers to a ``TileAssignment``, the form both spellings
share and the one runtimes exchange (XLA's ``OpSharding``). Device numbers in meshes and tile
assignments are *logical* ids (partition numbers), mapped to devices by the device assignment.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Optional

import numpy as np

from stablehlo.errors import OpenHLOError
from stablehlo.ir.attributes import DictAttr, OpaqueAttr, StringAttr
from stablehlo.ir.core import Module


class ShardingError(OpenHLOError):
    """A sharding that cannot hold: unknown mesh or axis, an axis that does not divide a
    dimension, an axis used twice, a mesh that does not fit the device count."""


class SpmdUnsupportedError(OpenHLOError):
    """A sharded program that needs SPMD machinery not built yet (named in the message)."""


@dataclass(frozen=True)
class Mesh:
    """Named axes over ``size`` logical devices; ``device_ids`` (row-major over the axes)
    default to ``0..size-1``."""
    axes: tuple  # ((name, size), ...)
    device_ids: Optional[tuple] = None

    def __post_init__(self):
        names = [n for n, _ in self.axes]
        if len(set(names)) != len(names):
            raise ShardingError(f"mesh {self}: an axis name appears twice")
        for name, size in self.axes:
            if size < 1:
                raise ShardingError(f"mesh {self}: axis \"{name}\" has size {size}")
        if self.device_ids is not None and sorted(self.device_ids) != list(range(self.size)):
            raise ShardingError(f"mesh {self}: device_ids must be a permutation of "
                                f"0..{self.size - 1}")

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
        text = "[" + ", ".join(f'"{n}"={s}' for n, s in self.axes) + "]"
        if self.device_ids is not None:
            text += ", device_ids=[" + ", ".join(map(str, self.device_ids)) + "]"
        return f"<{text}>"


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
    """Per dimension, the mesh axes splitting it (major to minor); ``replicated`` lists axes
    named as replicated (every axis not used in ``dims`` is replicated anyway)."""
    mesh_name: str
    dims: tuple  # (("x",), (), ...)
    replicated: tuple = ()

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
        dims = ", ".join("{" + ", ".join(f'"{a}"' for a in axes) + "}" for axes in self.dims)
        text = f"@{self.mesh_name}, [{dims}]"
        if self.replicated:
            text += ", replicated={" + ", ".join(f'"{a}"' for a in self.replicated) + "}"
        return f"#sdy.sharding<{text}>"


# ---- reading the Shardy spelling -----------------------------------------------------------

_MESH_AXIS = re.compile(r'\s*"([^"]*)"\s*=\s*(\d+)\s*')


def parse_sdy_mesh(text: str) -> Mesh:
    """``#sdy.mesh<["x"=4, "y"=2], device_ids=[...]>`` or its body ``<[...]>``."""
    body = _unwrap(text, "#sdy.mesh")
    match = re.fullmatch(r"\[(.*?)\]\s*(?:,\s*device_ids\s*=\s*\[(.*?)\])?\s*", body, re.S)
    if match is None:
        raise ShardingError(f"cannot read mesh {text!r}")
    axes = []
    for part in filter(str.strip, match.group(1).split(",")):
        axis = _MESH_AXIS.fullmatch(part)
        if axis is None:
            raise ShardingError(f"cannot read mesh axis {part.strip()!r} in {text!r}")
        axes.append((axis.group(1), int(axis.group(2))))
    ids = match.group(2)
    device_ids = tuple(int(i) for i in ids.split(",")) if ids and ids.strip() else None
    if device_ids is not None and not axes:
        raise SpmdUnsupportedError(f"maximal mesh {text!r} (a value pinned to one device)")
    return Mesh(tuple(axes), device_ids)


def parse_sdy_sharding(text: str) -> TensorSharding:
    """``#sdy.sharding<@mesh, [{"x"}, {}], replicated={"y"}>`` (or the ``<...>`` body)."""
    body = _unwrap(text, "#sdy.sharding")
    match = re.fullmatch(r"\s*@([\w.$-]+)\s*,\s*\[(.*)\]\s*(.*)", body, re.S)
    if match is None:
        if body.lstrip().startswith("mesh<"):
            raise SpmdUnsupportedError(f"sharding with an inline mesh {text!r}")
        raise ShardingError(f"cannot read sharding {text!r}")
    dims = tuple(_axis_list(group, text) for group in _groups(match.group(2), text))
    replicated: tuple = ()
    for name, group in re.findall(r",\s*(\w+)\s*=\s*(\{[^}]*\})", match.group(3)):
        if name == "replicated":
            replicated = _axis_list(group[1:-1], text)
        else:  # unreduced={...}: values holding partial sums
            raise SpmdUnsupportedError(f"'{name}' axes in sharding {text!r}")
    return TensorSharding(match.group(1), dims, replicated)


def parse_sdy_sharding_list(text: str) -> list:
    """``#sdy.sharding_per_value<[<@mesh, [...]>, ...]>`` -> [TensorSharding, ...]."""
    body = _unwrap(text, "#sdy.sharding_per_value").strip()
    if not (body.startswith("[") and body.endswith("]")):
        raise ShardingError(f"cannot read shardings {text!r}")
    out, depth, start = [], 0, None
    for i, ch in enumerate(body[1:-1], 1):
        if ch == "<":
            depth += 1
            if depth == 1:
                start = i
        elif ch == ">":
            depth -= 1
            if depth == 0:
                out.append(parse_sdy_sharding(body[start:i + 1]))
    return out


def parse_manual_axes(text: str) -> tuple:
    """``#sdy<manual_axes{"x", "y"}>`` -> ("x", "y")."""
    match = re.fullmatch(r'#sdy<manual_axes\{(.*)\}>', text.strip(), re.S)
    if match is None:
        raise ShardingError(f"cannot read manual axes {text!r}")
    return _axis_list(match.group(1), text)


def _unwrap(text: str, prefix: str) -> str:
    text = text.strip()
    if text.startswith(prefix):
        text = text[len(prefix):]
    if not (text.startswith("<") and text.endswith(">")):
        raise ShardingError(f"cannot read {prefix} attribute {text!r}")
    return text[1:-1]


def _groups(text: str, whole: str) -> list:
    """The ``{...}`` groups of a dimension list, priorities (``{"x"}p1``) dropped."""
    groups = re.findall(r"\{([^}]*)\}(?:p\d+)?", text)
    if re.sub(r"\{[^}]*\}(?:p\d+)?|[\s,]", "", text):
        raise ShardingError(f"cannot read the dimensions of sharding {whole!r}")
    return groups


def _axis_list(text: str, whole: str) -> tuple:
    axes = []
    for part in filter(str.strip, text.split(",")):
        part = part.strip()
        if part == "?":
            continue  # an open dimension: free for propagation, nothing assigned yet
        match = re.fullmatch(r'"([^"]*)"(:\(\d+\)\d+)?', part)
        if match is None:
            raise ShardingError(f"cannot read mesh axis {part!r} in {whole!r}")
        if match.group(2):
            raise SpmdUnsupportedError(f"sub-axis {part} in sharding {whole!r}")
        axes.append(match.group(1))
    return tuple(axes)


# ---- reading the GSPMD spelling ------------------------------------------------------------

def parse_mhlo_sharding(text: str, rank: int) -> TileAssignment:
    """``{replicated}``, ``{devices=[2,1]0,1}``, ``{devices=[2,2]<=[4]}``,
    ``{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}`` for a value of ``rank``."""
    body = text.strip().strip('"')
    if not (body.startswith("{") and body.endswith("}")):
        raise ShardingError(f"cannot read mhlo.sharding {text!r}")
    body = body[1:-1].strip()
    if body == "replicated":
        return REPLICATED
    if body.startswith("maximal") or body == "manual" or body.startswith("{"):
        raise SpmdUnsupportedError(f"mhlo.sharding {text!r}")
    match = re.fullmatch(r"devices=\[([\d,\s]+)\]\s*(<=\[([\d,\s]+)\](?:T\(([\d,\s]+)\))?|"
                         r"[\d,\s]+?)\s*(last_tile_dim_replicate)?", body)
    if match is None:
        raise SpmdUnsupportedError(f"mhlo.sharding {text!r}")
    dims = [int(d) for d in match.group(1).split(",")]
    if match.group(3) is not None:  # iota form: reshape, transpose, reshape
        iota = np.arange(math.prod(dims)).reshape([int(d) for d in match.group(3).split(",")])
        if match.group(4):
            iota = iota.transpose([int(p) for p in match.group(4).split(",")])
        devices = iota.reshape(dims)
    else:
        devices = np.array([int(d) for d in match.group(2).split(",")]).reshape(dims)
    replicate = match.group(5) is not None
    if len(dims) != rank + int(replicate):
        raise ShardingError(f"mhlo.sharding {text!r} has {len(dims)} tile dimension(s) for a "
                            f"value of rank {rank}")
    if devices.size == 1 or (replicate and all(d == 1 for d in dims[:-1])):
        return REPLICATED
    return TileAssignment(False, devices, replicate)


# ---- shardings in a module -----------------------------------------------------------------

def module_meshes(module: Module) -> dict:
    """The module's ``sdy.mesh`` symbols by name."""
    meshes = {}
    for op in module.body.operations:
        if op.name == "sdy.mesh":
            name = op.attributes["sym_name"]
            mesh = op.attributes.get("mesh")
            text = mesh.text if isinstance(mesh, OpaqueAttr) else str(mesh)
            meshes[name.value if isinstance(name, StringAttr) else str(name)] = \
                parse_sdy_mesh(text)
    return meshes


def mesh_of(meshes: dict, sharding: TensorSharding, where: str) -> Mesh:
    try:
        return meshes[sharding.mesh_name]
    except KeyError:
        raise ShardingError(f"{where}: sharding {sharding} names unknown mesh "
                            f"@{sharding.mesh_name} (meshes: "
                            f"{', '.join('@' + m for m in meshes) or 'none'})") from None


def value_tiles(attrs: DictAttr, meshes: dict, shape, where: str) -> TileAssignment:
    """The tile assignment an argument or result attribute dict gives a value of ``shape``
    (``sdy.sharding`` or ``mhlo.sharding``; replicated when it has neither). Only ranks are
    checked: in a per-device program the shapes are the pieces' shapes."""
    sdy = attrs.get("sdy.sharding")
    if sdy is not None:
        sharding = parse_sdy_sharding(sdy.text if isinstance(sdy, OpaqueAttr) else str(sdy))
        mesh = mesh_of(meshes, sharding, where)
        if len(sharding.dims) != len(shape):
            raise ShardingError(f"{where}: sharding {sharding} has {len(sharding.dims)} "
                                f"dimension(s) for a value of rank {len(shape)}")
        return sharding.tile_assignment(mesh)
    mhlo = attrs.get("mhlo.sharding")
    if mhlo is not None:
        return parse_mhlo_sharding(mhlo.value if isinstance(mhlo, StringAttr) else str(mhlo),
                                   len(shape))
    return REPLICATED


def entry_shardings(module: Module, entry: str) -> tuple:
    """``(parameter tiles, result tiles)`` of the entry function, from its attributes."""
    func = module.lookup(entry)
    meshes = module_meshes(module)
    params = [value_tiles(func.arg_attrs(i), meshes, t.shape, f"@{entry} argument {i}")
              for i, t in enumerate(func.type.inputs)]
    results = [value_tiles(func.result_attrs(i), meshes, t.shape, f"@{entry} result {i}")
               for i, t in enumerate(func.type.results)]
    return params, results
