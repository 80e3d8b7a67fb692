"""The sharding annotations propagation writes and the partitioner reads.

A value's sharding is a tuple with one entry per dimension: the mesh axes splitting that
dimension, major to minor (``(("x",), ())`` = dimension 0 split over ``x``). Every sharded
value of one program lives on one mesh (``MeshInfo``): the module's single ``sdy.mesh``, or,
for a GSPMD-spelled program (``mhlo.sharding`` strings), the mesh ``@mesh`` that this module
adds: the coarsest one all its tile assignments line up with (``<["gspmd"=8]>`` for a 1-D
program, ``<["gspmd_0"=2, "gspmd_1"=4]>`` for one on a 2x4 mesh; see gspmd.py), its shard_map
regions rewritten into ``sdy.manual_computation``s.

On the entry function the annotations are, per op, ``sdy.sharding =
#sdy.sharding_per_value<[...]>`` (one sharding per result) and ``openhlo.sharding_origin``
(why propagation chose it), per argument and result the ``sdy.sharding`` attribute. Sharding
constraints are ``sdy.sharding_constraint`` ops (GSPMD ``custom_call @Sharding`` is rewritten
into one).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from stablehlo.ir.attributes import DictAttr, IntegerAttr, OpaqueAttr, StringAttr
from stablehlo.ir.core import Func, Module, Operation
from stablehlo.ir.sharding import GspmdShardingAttr, ManualAxesAttr, MeshAttr, ShardingAttr

from xla_core.spmd import gspmd
from xla_core.spmd.sharding import (Mesh, ShardingError, SpmdUnsupportedError, TensorSharding,
                                    module_meshes, parse_manual_axes,
                                    parse_sdy_sharding, parse_sdy_sharding_list,
                                    supported_sharding)

PER_VALUE = "sdy.sharding"
ORIGIN = "openhlo.sharding_origin"
CONSTRAINT = "sdy.sharding_constraint"


@dataclass(frozen=True)
class MeshInfo:
    name: str
    mesh: Mesh

    def tiles(self, dims) -> int:
        return math.prod(self.mesh.axis_size(a) for axes in dims for a in axes)

    def local_shape(self, dims, shape) -> tuple:
        return tuple(extent // math.prod(self.mesh.axis_size(a) for a in axes)
                     for axes, extent in zip(dims, shape))

    def check(self, dims, shape, where: str) -> None:
        self.sharding(dims).check(self.mesh, shape, where)

    def sharding(self, dims) -> TensorSharding:
        return TensorSharding(self.name, tuple(dims))

    def sharding_attr(self, dims) -> ShardingAttr:
        return ShardingAttr.of(self.sharding(dims))

    def groups(self, axes) -> np.ndarray:
        """Replica groups (logical device ids) of the devices that differ only in ``axes``,
        each group ordered by ``axes`` major to minor: the groups of a collective over them."""
        devices = self.mesh.devices()
        picked = [self.mesh.names.index(a) for a in axes]
        rest = [i for i in range(devices.ndim) if i not in picked]
        size = math.prod(self.mesh.axis_size(a) for a in axes)
        return devices.transpose(rest + picked).reshape(-1, size)

    def coordinates(self) -> dict:
        """Logical device id -> its index along each mesh axis (by name)."""
        devices = self.mesh.devices()
        return {int(devices[index]): dict(zip(self.mesh.names, index))
                for index in np.ndindex(devices.shape)}


def replicated(rank: int) -> tuple:
    return ((),) * rank


def has_shardings(module: Module, func: Func) -> bool:
    """Whether the program says anything about shardings (a mesh, a sharded argument or
    result, a sharding on an op). A multi-partition program that says nothing is taken as
    already per-device (hand-written collectives) and left alone."""
    if any(op.name == "sdy.mesh" for op in module.body.operations):
        return True
    attrs = [func.arg_attrs(i) for i in range(len(func.type.inputs))]
    attrs += [func.result_attrs(i) for i in range(len(func.type.results))]
    attrs += [op.attributes for op in func.body.operations]
    return any(a.get(key) is not None for a in attrs for key in ("sdy.sharding", "mhlo.sharding"))


def automatic_target(module: Module, entry: str, num_devices: int):
    """``(entry function, its mesh)`` when automatic propagation and partitioning have work
    to do on ``module``, else None: already partitioned, no such entry, or nothing sharded."""
    from xla_core.spmd.manual import PARTITIONED
    if PARTITIONED in module.attributes or not module.has_function(entry):
        return None
    func = module.lookup(entry)
    if not has_shardings(module, func):
        return None
    return func, module_mesh(module, func, num_devices)


def module_mesh(module: Module, func: Func, num_devices: int) -> MeshInfo:
    """The one mesh of the program (see the module docstring); adds ``@mesh`` for GSPMD
    programs. ``num_devices`` (0: the module's ``mhlo.num_partitions``) sizes it when no
    value is sharded."""
    meshes = module_meshes(module)
    if len(meshes) > 1:
        raise SpmdUnsupportedError(f"a program on {len(meshes)} meshes "
                                   f"({', '.join('@' + m for m in meshes)})")
    if meshes:
        name, mesh = next(iter(meshes.items()))
        info = MeshInfo(name, mesh)
    else:
        info = MeshInfo("mesh", _gspmd_mesh(module, func, num_devices))
        mesh_op = Operation("sdy.mesh", attributes={
            "sym_name": StringAttr("mesh"),
            "mesh": MeshAttr.of(info.mesh)})
        mesh_op.parent = module.body
        module.body.operations.insert(0, mesh_op)
        gspmd.rewrite_manual_regions(func, info.name, info.mesh)
    expected = num_devices or _num_partitions(module)
    if expected and info.mesh.size != expected:
        raise ShardingError(f"mesh @{info.name} {info.mesh} has {info.mesh.size} device(s) but "
                            f"the program is partitioned for {expected}")
    return info


def _num_partitions(module: Module) -> int:
    attr = module.attributes.get("mhlo.num_partitions")
    return attr.value if isinstance(attr, IntegerAttr) else 0


def _gspmd_mesh(module: Module, func: Func, num_devices: int) -> Mesh:
    """The mesh every ``mhlo.sharding`` of ``func`` lines up with (see gspmd.py)."""
    found = []
    for op in func.op.walk():
        attr = op.attributes.get("mhlo.sharding")
        if attr is not None and op.results:
            sharding = gspmd.read(attr, op.where())
            if sharding.kind == "tuple":
                found += [(s, len(r.type.shape), f"{op.where()} result {r.index}")
                          for s, r in zip(sharding.elements, op.results)]
            else:
                found.append((sharding, len(op.results[0].type.shape), op.where()))
    for kind, types, attrs in (("argument", func.type.inputs, func.arg_attrs),
                               ("result", func.type.results, func.result_attrs)):
        for i, t in enumerate(types):
            attr = attrs(i).get("mhlo.sharding")
            if attr is not None:
                where = f"@{func.name} {kind} {i}"
                found.append((gspmd.read(attr, where), len(t.shape), where))
    return gspmd.infer_mesh(found, num_devices or _num_partitions(module) or 1)


def read_dims(info: MeshInfo, attrs, shape, where: str):
    """The dims of an ``sdy.sharding`` / ``mhlo.sharding`` attribute dict entry, checked
    against ``shape``; None when it has neither."""
    sdy = attrs.get("sdy.sharding")
    if sdy is not None:
        if isinstance(sdy, ShardingAttr):  # as parsed: the model is there already
            sharding = supported_sharding(sdy.sharding, sdy.text)
        else:
            sharding = parse_sdy_sharding(sdy.text if isinstance(sdy, OpaqueAttr) else str(sdy))
        return _checked(info, sharding, shape, where)
    attr = attrs.get("mhlo.sharding")
    if attr is None:
        return None
    return _checked(info, gspmd_sharding(info, attr, len(shape), where), shape, where)


def _checked(info: MeshInfo, sharding: TensorSharding, shape, where: str) -> tuple:
    if sharding.mesh_name != info.name:
        raise ShardingError(f"{where}: sharding {sharding} names unknown mesh "
                            f"@{sharding.mesh_name} (meshes: @{info.name})")
    sharding.check(info.mesh, shape, where)
    return tuple(sharding.dims)


def gspmd_sharding(info: MeshInfo, attr, rank: int, where: str) -> TensorSharding:
    """A GSPMD sharding (``mhlo.sharding`` attribute) as a sharding on the program's mesh;
    a manual subgroup only exists inside a shard_map region (rewritten before)."""
    sharding = gspmd.read(attr, where)
    dims, manual = gspmd.tensor_sharding(info.name, info.mesh, sharding, rank, where)
    if manual:
        raise SpmdUnsupportedError(f"{where}: mhlo.sharding \"{sharding}\": a manual subgroup "
                                   f"(last_tile_dims={{manual}}) outside a shard_map region "
                                   f"(@SPMDFullToShardShape ... @SPMDShardToFullShape)")
    return dims


def gspmd_result_dims(info: MeshInfo, op: Operation) -> list:
    """The dims of each result of an op carrying an ``mhlo.sharding``: one sharding for a
    single result, a tuple sharding (``{{...}, {...}}``) one element per result."""
    attr = op.attributes["mhlo.sharding"]
    sharding = gspmd.read(attr, op.where())
    if sharding.kind != "tuple":
        if len(op.results) != 1:
            raise ShardingError(f"{op.where()}: mhlo.sharding \"{sharding}\" is one sharding "
                                f"for {len(op.results)} results (a tuple sharding gives one "
                                f"per result)")
        return [read_dims(info, op.attributes, op.results[0].type.shape, op.where())]
    if len(sharding.elements) != len(op.results):
        raise ShardingError(f"{op.where()}: tuple mhlo.sharding \"{sharding}\" has "
                            f"{len(sharding.elements)} element(s) for {len(op.results)} "
                            f"result(s)")
    out = []
    for element, r in zip(sharding.elements, op.results):
        where = f"{op.where()} result {r.index}"
        attr = GspmdShardingAttr(str(element), element)
        out.append(_checked(info, gspmd_sharding(info, attr, len(r.type.shape), where),
                            r.type.shape, where))
    return out


def op_dims(info: MeshInfo, op: Operation) -> list:
    """The per-result shardings propagation stored on ``op``."""
    if op.name == CONSTRAINT:
        sharding = parse_sdy_sharding(op.attributes["sharding"].text)
        return [_checked(info, sharding, op.results[0].type.shape, op.where())]
    attr = op.attributes.get(PER_VALUE)
    if attr is None:
        raise ShardingError(f"{op.where()} has no sharding: run sharding-propagation first")
    shardings = parse_sdy_sharding_list(attr.text)
    if len(shardings) != len(op.results):
        raise ShardingError(f"{op.where()}: {len(shardings)} sharding(s) for "
                            f"{len(op.results)} result(s)")
    return [_checked(info, s, r.type.shape, f"{op.where()} result {r.index}")
            for s, r in zip(shardings, op.results)]


MANUAL_COMPUTATION = "sdy.manual_computation"


def manual_axes_of(op: Operation) -> tuple:
    """The mesh axes an ``sdy.manual_computation``'s body owns: a parsed attribute carries
    them; a plain one a pass built from text is read."""
    attr = op.attributes["manual_axes"]
    return attr.axes if isinstance(attr, ManualAxesAttr) else parse_manual_axes(attr.text)


def manual_dims(info: MeshInfo, op: Operation) -> tuple:
    """``(operand dims, result dims)`` of an ``sdy.manual_computation`` as its body sees the
    pieces: split over the manual axes as ``in_shardings``/``out_shardings`` say, whole
    along the other (free) axes. A dim split over a free axis major to a manual one has no
    such piece (refused)."""
    manual = set(manual_axes_of(op))
    out = []
    for key, values in (("in_shardings", op.operands), ("out_shardings", op.results)):
        shardings = parse_sdy_sharding_list(op.attributes[key].text)
        if len(shardings) != len(values):
            raise ShardingError(f"{op.where()}: {len(shardings)} {key} for {len(values)} "
                                f"value(s)")
        side = []
        for j, (sharding, value) in enumerate(zip(shardings, values)):
            dims = _checked(info, sharding, value.type.shape, f"{op.where()} {key}[{j}]")
            kept = []
            for d, axes in enumerate(dims):
                prefix = tuple(a for a in axes if a in manual)
                if tuple(axes[:len(prefix)]) != prefix:
                    raise SpmdUnsupportedError(
                        f"{op.where()} {key}[{j}] dim {d} is split over free axes major to "
                        f"manual ones ({', '.join(axes)}): not implemented")
                kept.append(prefix)
            side.append(tuple(kept))
        out.append(side)
    return tuple(out)


def with_sharding(attrs: DictAttr, info: MeshInfo, dims) -> DictAttr:
    items = [(k, v) for k, v in attrs.items if k not in ("sdy.sharding", "mhlo.sharding")]
    items.append(("sdy.sharding", info.sharding_attr(dims)))
    return DictAttr(tuple(items))
