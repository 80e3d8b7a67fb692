"""Shardings as the SPMD passes read them: the typed model of stablehlo/ir/sharding.py.

Both spellings JAX emits (Shardy ``sdy.mesh``/``#sdy.sharding`` attributes and GSPMD
``mhlo.sharding`` strings) are parsed by stablehlo/text into one model: a ``Mesh`` of named
axes, a ``TensorSharding`` per value, and the ``TileAssignment`` both lower to (see
stablehlo/ir/sharding.py). This module reads that model off a module's attributes and says
what the partitioner does not support yet (``SpmdUnsupportedError``). The ``parse_*``
functions take an attribute's text, for callers that hold the text (or a plain attribute a
pass built).
"""
from __future__ import annotations

from stablehlo.errors import OpenHLOError, ParseError
from stablehlo.ir.attributes import DictAttr, OpaqueAttr, StringAttr
from stablehlo.ir.core import Module
from stablehlo.ir.sharding import (REPLICATED, GspmdSharding, GspmdShardingAttr,
                                   ManualAxesAttr, Mesh,
                                   MeshAttr, ShardingAttr, ShardingError, ShardingPerValueAttr,
                                   SubAxis, TensorSharding, TileAssignment)
from stablehlo.text.parse_sharding import (MESH, SHARDING, read_gspmd_sharding,
                                          read_sdy_attribute, sharding_of)


class SpmdUnsupportedError(OpenHLOError):
    """A sharded program that needs SPMD machinery not built yet (named in the message)."""


# ---- reading the Shardy spelling -----------------------------------------------------------

def parse_sdy_mesh(text: str) -> Mesh:
    """``#sdy.mesh<["x"=4, "y"=2], device_ids=[...]>`` or its body ``<[...]>``."""
    return supported_mesh(_read(text, MESH, MeshAttr, "mesh").mesh, text)


def parse_sdy_sharding(text: str) -> TensorSharding:
    """``#sdy.sharding<@mesh, [{"x"}, {}], replicated={"y"}>`` (or the ``<...>`` body)."""
    return supported_sharding(_read(text, SHARDING, ShardingAttr, "sharding").sharding, text)


def parse_sdy_sharding_list(text: str) -> list:
    """``#sdy.sharding_per_value<[<@mesh, [...]>, ...]>`` -> [TensorSharding, ...]."""
    attr = _read(text, None, ShardingPerValueAttr, "shardings")
    return [supported_sharding(s, text) for s in attr.shardings]


def parse_manual_axes(text: str) -> tuple:
    """``#sdy<manual_axes{"x", "y"}>`` -> ("x", "y")."""
    return _read(text, None, ManualAxesAttr, "manual axes").axes


def supported_mesh(mesh: Mesh, text: str) -> Mesh:
    if mesh.is_maximal:
        raise SpmdUnsupportedError(f"maximal mesh {text!r} (a value pinned to one device)")
    return mesh


def supported_sharding(sharding: TensorSharding, text: str) -> TensorSharding:
    """``sharding`` unless it needs what the partitioner lacks: a mesh spelled inline,
    sub-axes, unreduced axes."""
    if sharding.inline_mesh is not None:
        raise SpmdUnsupportedError(f"sharding with an inline mesh {text!r}")
    for axis in sharding.used_axes() + list(sharding.replicated):
        if isinstance(axis, SubAxis):
            raise SpmdUnsupportedError(f"sub-axis {axis} in sharding {text!r}")
    if sharding.unreduced:
        raise SpmdUnsupportedError(f"'unreduced' axes in sharding {text!r}")
    return sharding


def _read(text: str, prefix, kind: type, what: str):
    """The typed attribute ``text`` spells (``prefix`` added to a bare ``<...>`` body)."""
    text = text.strip()
    if prefix is not None and text.startswith("<"):
        text = prefix + text
    try:
        attr = read_sdy_attribute(text)
    except ParseError as exc:
        raise ShardingError(f"cannot read {what} {text!r}: {exc.reason}") from None
    if not isinstance(attr, kind):
        raise ShardingError(f"cannot read {what} {text!r}: it is a different attribute")
    return attr


# ---- reading the GSPMD spelling ------------------------------------------------------------

def parse_mhlo_sharding(text: str, rank: int) -> TileAssignment:
    """``{replicated}``, ``{devices=[2,1]0,1}``, ``{devices=[2,2]<=[4]}``,
    ``{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}`` for a value of ``rank``."""
    body = text.strip().strip('"')
    try:
        sharding = read_gspmd_sharding(body)
    except ParseError as exc:
        raise ShardingError(f"cannot read mhlo.sharding {text!r}: {exc.reason}") from None
    return gspmd_tiles(sharding, text, rank)


def gspmd_tiles(sharding: GspmdSharding, text: str, rank: int) -> TileAssignment:
    """The tiles of a GSPMD sharding of a value of ``rank``: replicated or tiled (with at
    most a replication subgroup); maximal, manual and tuple shardings are not supported."""
    if sharding.kind not in ("replicated", "tiled"):
        raise SpmdUnsupportedError(f"mhlo.sharding {text!r}: a {sharding.kind} sharding has no "
                                   f"tile assignment (only replicated and tiled ones do)")
    if sharding.last_tile_dims not in ((), ("replicated",)):
        raise SpmdUnsupportedError(
            f"mhlo.sharding {text!r}: last_tile_dims={{{', '.join(sharding.last_tile_dims)}}} "
            f"has no tile assignment (a manual subgroup only exists inside a shard_map region)")
    return sharding.tile_assignment(rank)


# ---- shardings in a module -----------------------------------------------------------------

def module_meshes(module: Module) -> dict:
    """The module's ``sdy.mesh`` symbols by name."""
    meshes = {}
    for op in module.body.operations:
        if op.name == "sdy.mesh":
            name = op.attributes["sym_name"]
            mesh = op.attributes.get("mesh")
            key = name.value if isinstance(name, StringAttr) else str(name)
            if isinstance(mesh, MeshAttr):
                meshes[key] = supported_mesh(mesh.mesh, mesh.text)
            else:  # built by a pass as a plain attribute
                meshes[key] = parse_sdy_mesh(mesh.text if isinstance(mesh, OpaqueAttr)
                                             else str(mesh))
    return meshes


def value_sharding(attr) -> TensorSharding:
    """The model of an ``sdy.sharding`` attribute (parsed, or built by a pass as text)."""
    try:
        sharding = sharding_of(attr)
    except ParseError as exc:
        raise ShardingError(f"cannot read sharding {str(attr)!r}: {exc.reason}") from None
    return supported_sharding(sharding, str(attr))


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
        sharding = value_sharding(sdy)
        mesh = mesh_of(meshes, sharding, where)
        if len(sharding.dims) != len(shape):
            raise ShardingError(f"{where}: sharding {sharding} has {len(sharding.dims)} "
                                f"dimension(s) for a value of rank {len(shape)}")
        return sharding.tile_assignment(mesh)
    mhlo = attrs.get("mhlo.sharding")
    if isinstance(mhlo, GspmdShardingAttr):
        return gspmd_tiles(mhlo.sharding, mhlo.value, len(shape))
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
