"""auto-sharding: choose a sharding for every value of the entry function, and write it down
so that sharding-propagation and spmd-partition produce the per-device program.

``auto_shard(module, mesh)`` builds the cost graph (graph.py), drops the choices that are
never better than another (prune.py), solves it (solver.py) and returns the ``Plan``; it
does not change the module. ``apply_plan`` writes the plan as the annotations the SPMD
passes read: the ``sdy.mesh`` (``@mesh``, unless the module has one), ``sdy.sharding`` on
every argument, result and op of the entry function, and an ``sdy.sharding_constraint`` in
front of an operand the plan uses in another layout than the one it is made in (the
partitioner reshards there, and a dot then sees its operands split as the plan's strategy
says); a later user of a broadcast of a scalar gets its own copy of the broadcast, made in
the layout it wants (``graph.copied_values``). ``mhlo.num_partitions`` becomes the mesh's
device count.

User annotations are kept: an annotated argument, op result or sharding constraint has that
layout only, and an annotated result is resharded to its layout on return. The module's own
mesh is used when no mesh is given; a given mesh must agree with it.

Run ``inline`` first: a call is opaque here (it runs whole). Values inside control-flow
regions are left to propagation.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from stablehlo.ir.attributes import ArrayAttr, IntegerAttr, StringAttr
from stablehlo.ir.core import Module, Operation
from stablehlo.ir.sharding import Mesh, MeshAttr, ShardingAttr, ShardingPerValueAttr
from stablehlo.ir.types import IntegerType, TensorType

from xla_core.cost import hardware as hardware_description
from xla_core.passes.base import Pass, PassContext
from xla_core.spmd.annotations import CONSTRAINT, PER_VALUE, MeshInfo, with_sharding
from xla_core.spmd.auto_sharding.costs import CostModel
from xla_core.spmd.auto_sharding.graph import build_graph, copied_values
from xla_core.spmd.auto_sharding.layouts import AutoShardingError, parse_bytes, parse_mesh
from xla_core.spmd.auto_sharding.plan import Plan, build_plan
from xla_core.spmd.auto_sharding.prune import prune_dominated
from xla_core.spmd.auto_sharding.solver import solve
from xla_core.spmd.manual import PARTITIONED
from xla_core.spmd.sharding import module_meshes

LOGGER = logging.getLogger("openhlo.spmd")
DEFAULT_TIME_LIMIT_S = 10.0


def auto_shard(module: Module, mesh_axes=None, *, memory_limit=None, hardware: str = "cpu",
               time_limit_s: float = DEFAULT_TIME_LIMIT_S, entry: str = "main") -> Plan:
    """The plan for ``module``'s ``entry`` on ``mesh_axes`` (``"x=4,y=2"``, a ``Mesh``, or
    None for the module's own mesh), under ``memory_limit`` bytes per device (an int or
    text such as ``"2GiB"``; None: no limit), costed on the hardware description
    ``hardware``, solved within ``time_limit_s`` seconds."""
    info = _mesh_info(module, mesh_axes)
    if not module.has_function(entry):
        raise AutoShardingError(f"auto-sharding: the module has no function @{entry}")
    if PARTITIONED in module.attributes:
        raise AutoShardingError("auto-sharding: the module is already partitioned")
    if _gspmd_annotated(module, entry):
        raise AutoShardingError("auto-sharding keeps sdy.sharding annotations; this program "
                                "has mhlo.sharding ones: write them as sdy.sharding")
    limit = parse_bytes(memory_limit) if isinstance(memory_limit, str) else memory_limit
    func = module.lookup(entry)
    model = CostModel(hardware_description(hardware), info.mesh)
    graph = build_graph(func, info, model, memory=limit is not None)
    prune_dominated(graph)
    solution = solve(graph, limit, time_limit_s)
    return build_plan(func, graph, solution, model, hardware, limit)


def _mesh_info(module: Module, mesh_axes) -> MeshInfo:
    meshes = module_meshes(module)
    if len(meshes) > 1:
        raise AutoShardingError(f"auto-sharding: the module has {len(meshes)} meshes "
                                f"({', '.join('@' + m for m in meshes)}); it needs one")
    mesh = parse_mesh(mesh_axes) if isinstance(mesh_axes, str) else mesh_axes
    if meshes:
        name, own = next(iter(meshes.items()))
        if mesh is not None and tuple(mesh.axes) != tuple(own.axes):
            raise AutoShardingError(f"auto-sharding: mesh {mesh} differs from the module's "
                                    f"@{name} {own}")
        return MeshInfo(name, own)
    if mesh is None:
        raise AutoShardingError("auto-sharding needs a mesh (e.g. x=4,y=2): the module has "
                                "no sdy.mesh")
    if not isinstance(mesh, Mesh):
        raise AutoShardingError(f"auto-sharding: mesh {mesh!r} is not a Mesh or NAME=SIZE text")
    return MeshInfo("mesh", mesh)


def _gspmd_annotated(module: Module, entry: str) -> bool:
    func = module.lookup(entry)
    attrs = [func.arg_attrs(i) for i in range(len(func.type.inputs))]
    attrs += [func.result_attrs(i) for i in range(len(func.type.results))]
    attrs += [op.attributes for op in func.body.operations]
    return any(a.get("mhlo.sharding") is not None for a in attrs)


def apply_plan(module: Module, plan: Plan, entry: str = "main") -> None:
    """Write ``plan`` into ``module`` (see the module doc)."""
    meshes = module_meshes(module)
    if meshes:
        info = MeshInfo(next(iter(meshes)), plan.mesh)
    else:
        info = MeshInfo("mesh", plan.mesh)
        mesh_op = Operation("sdy.mesh", attributes={"sym_name": StringAttr("mesh"),
                                                    "mesh": MeshAttr.of(plan.mesh)})
        mesh_op.parent = module.body
        module.body.operations.insert(0, mesh_op)
    module.attributes["mhlo.num_partitions"] = IntegerAttr(plan.mesh.size, IntegerType(32))
    func = module.lookup(entry)
    layout = dict(zip(func.body.arguments, plan.arguments))
    for choice in plan.choices:
        if choice.op is not None:
            layout.update(zip(choice.op.results, choice.outs))
    block = func.body.operations
    first_users = copied_values(func)
    constraints: dict = {}
    for choice in plan.choices:
        op = choice.op
        if op is None or op.name == CONSTRAINT:  # a constraint reshards its operand itself
            continue
        for j, (v, want) in enumerate(zip(op.operands, choice.ins)):
            if want is None or v not in layout:
                continue
            if first_users.get(v, op) is not op:  # a later user: its own copy
                source = v.owner
                copy = Operation(source.name, list(source.operands), [v.type],
                                 {**source.attributes, PER_VALUE: ShardingPerValueAttr.of(
                                     [info.sharding(want)])}, (), op.location)
                copy.parent = op.parent
                block.insert(block.index(op), copy)
                op.operands[j] = copy.results[0]
                continue
            if tuple(layout[v]) == tuple(want):
                continue
            key = (v, tuple(want))
            if key not in constraints:
                constraint = Operation(CONSTRAINT, [v], [v.type],
                                       {"sharding": ShardingAttr.of(info.sharding(want))},
                                       (), op.location)
                constraint.parent = op.parent
                block.insert(block.index(op), constraint)
                constraints[key] = constraint.results[0]
            op.operands[j] = constraints[key]
        if all(isinstance(r.type, TensorType) for r in op.results):
            op.attributes[PER_VALUE] = ShardingPerValueAttr.of(
                info.sharding(d) for d in choice.outs)
    func.op.attributes["arg_attrs"] = ArrayAttr(tuple(
        with_sharding(func.arg_attrs(i), info, dims) for i, dims in enumerate(plan.arguments)))
    returned = func.body.terminator.operands
    results = []
    for i, v in enumerate(returned):
        attrs = func.result_attrs(i)
        kept = attrs.get("sdy.sharding") is not None
        results.append(attrs if kept else with_sharding(attrs, info, layout[v]))
    func.op.attributes["res_attrs"] = ArrayAttr(tuple(results))


@dataclass(frozen=True)
class AutoShardingPass(Pass):
    """``auto-sharding{mesh=x=4;y=2 memory-limit=2GiB hardware=generic-cpu}`` (axes
    separated by ``;`` in a pass list: it splits options on commas)."""
    name = "auto-sharding"
    entry: str = "main"
    mesh: str = ""  # empty: the module's own mesh
    memory_limit: str = ""  # empty: no limit
    hardware: str = "cpu"
    time_limit: float = DEFAULT_TIME_LIMIT_S

    def run(self, module: Module, ctx: PassContext) -> bool:
        if PARTITIONED in module.attributes or not module.has_function(self.entry):
            return False
        plan = auto_shard(module, self.mesh or None, memory_limit=self.memory_limit or None,
                          hardware=self.hardware, time_limit_s=self.time_limit,
                          entry=self.entry)
        if LOGGER.isEnabledFor(logging.INFO):
            for line in plan.explain():
                LOGGER.info("%s", line)
        apply_plan(module, plan, self.entry)
        return True


__all__ = ["DEFAULT_TIME_LIMIT_S", "AutoShardingPass", "apply_plan", "auto_shard"]
