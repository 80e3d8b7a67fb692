"""spmd-manual: turn a program whose work is all in fully manual ``sdy.manual_computation``s
into the per-device program.

``shard_map`` and ``pmap`` (which JAX 0.10 lowers like ``shard_map``) give a global-view entry
function whose arguments go straight into ``sdy.manual_computation`` ops; each op's body is
already the per-device program, written on the pieces (``in_shardings`` say how the global
values are cut, ``out_shardings`` how the results are put together), with explicit
collectives. When every mesh axis is manual no propagation and no partitioning is needed: the
entry's arguments and results become the pieces and the bodies are spliced in place.

After the pass the entry function takes and returns one device's pieces, and each argument
and result carries the ``sdy.sharding`` of the global value it is a piece of (what a runtime
reports as the executable's parameter and output shardings); the module is marked
``openhlo.spmd_partitioned``. Programs that need more (ops on global values outside a manual
computation, partially manual axes) raise ``SpmdUnsupportedError``, and so do sharded programs
with no manual computation, unless ``leave-automatic`` leaves all of these to the automatic
partitioner (``sharding-propagation`` and ``spmd-partition``, the ``spmd`` pipeline), which runs
manual computations in place (see ``partitioner``).
"""
from __future__ import annotations

from dataclasses import dataclass

from stablehlo.ir.attributes import ArrayAttr, DictAttr, TypeAttr, UnitAttr
from stablehlo.ir.core import Func, Module, Operation
from stablehlo.ir.sharding import ShardingAttr
from stablehlo.ir.types import FunctionType, TensorType

from xla_core.ir_utils import replace_uses
from xla_core.passes.base import Pass, PassContext
from xla_core.spmd.annotations import manual_axes_of
from xla_core.spmd.sharding import (ShardingError, SpmdUnsupportedError, TensorSharding,
                                    mesh_of, module_meshes, parse_sdy_sharding,
                                    parse_sdy_sharding_list, value_tiles)

PARTITIONED = "openhlo.spmd_partitioned"
MANUAL = "sdy.manual_computation"
NEEDS_PARTITIONER = ("needs the automatic SPMD partitioner around or inside manual computations, "
                     "which is not implemented")


@dataclass(frozen=True)
class ManualPartitionPass(Pass):
    name = "spmd-manual"
    entry: str = "main"
    # leave programs without manual computations to the automatic partitioner (the spmd
    # pipeline) instead of refusing sharded ones
    leave_automatic: bool = False

    def run(self, module: Module, ctx: PassContext) -> bool:
        if PARTITIONED in module.attributes or not module.has_function(self.entry):
            return False
        func = module.lookup(self.entry)
        manual = [op for op in func.body.operations if op.name == MANUAL]
        if not manual:
            if not self.leave_automatic:
                _check_replicated_signature(module, func)
            return False
        if self.leave_automatic and not _all_manual(module, func, manual):
            return False  # the automatic partitioner runs the manual computations in place
        _Lowering(module, func).run(manual)
        module.attributes[PARTITIONED] = UnitAttr()
        return True


def _all_manual(module: Module, func: Func, manual: list) -> bool:
    """Whether all the work is in manual computations over every (non-trivial) mesh axis."""
    if any(op.name not in (MANUAL, "func.return") for op in func.body.operations):
        return False
    meshes = module_meshes(module)
    for op in manual:
        axes = set(manual_axes_of(op))
        for sharding in parse_sdy_sharding_list(op.attributes["in_shardings"].text) + \
                parse_sdy_sharding_list(op.attributes["out_shardings"].text):
            mesh = mesh_of(meshes, sharding, op.where())
            if any(size > 1 and n not in axes for n, size in mesh.axes):
                return False
    return True


def _check_replicated_signature(module: Module, func: Func) -> None:
    """A program without manual computations runs as given on every device: fine when its
    arguments and results are whole on every device, not when they are sharded."""
    for op in func.op.walk():
        if op.name == MANUAL:
            raise SpmdUnsupportedError(f"{op.where()}: a manual computation nested in other "
                                       f"ops {NEEDS_PARTITIONER}")
    meshes = module_meshes(module)
    for kind, types, attrs in (("argument", func.type.inputs, func.arg_attrs),
                               ("result", func.type.results, func.result_attrs)):
        for i, t in enumerate(types):
            where = f"@{func.name} {kind} {i}"
            if not value_tiles(attrs(i), meshes, t.shape, where).replicated:
                raise SpmdUnsupportedError(
                    f"{where} is sharded ({_sharding_text(attrs(i))}): a program that is not "
                    f"a shard_map/pmap needs the automatic SPMD partitioner: run the spmd "
                    f"pipeline (sharding-propagation, spmd-partition)")


def _sharding_text(attrs: DictAttr) -> str:
    attr = attrs.get("sdy.sharding") or attrs.get("mhlo.sharding")
    return getattr(attr, "text", None) or str(attr)


class _Lowering:
    """Splices the manual computations of ``func`` and rewrites its signature."""

    def __init__(self, module: Module, func: Func):
        self.module = module
        self.func = func
        self.meshes = module_meshes(module)
        # global value (entry argument or manual computation result) -> its sharding and
        # the per-device value standing for it
        self.sharding: dict = {}
        self.local: dict = {}
        self.global_shape: dict = {}

    def run(self, manual: list) -> None:
        body = self.func.body
        for op in body.operations:
            if op.name not in (MANUAL, "func.return"):
                raise SpmdUnsupportedError(
                    f"{op.where()} works on global values outside the shard_map body: "
                    f"partitioning it {NEEDS_PARTITIONER}")
        self._argument_shardings(manual)
        replacements: dict = {}
        for op in manual:
            self._splice(op, replacements)
        replace_uses(self.func.op, replacements)
        self._rewrite_signature()

    def _argument_shardings(self, manual: list) -> None:
        """Each argument's sharding: its ``sdy.sharding`` attribute, else the in_sharding of
        the manual computation it feeds (JAX leaves arguments of a jitted shard_map bare)."""
        args = self.func.body.arguments
        for i, arg in enumerate(args):
            attr = self.func.arg_attrs(i).get("sdy.sharding")
            if attr is not None:
                self._set(arg, parse_sdy_sharding(attr.text), f"@{self.func.name} argument {i}")
        for op in manual:
            for j, (operand, sharding) in enumerate(zip(op.operands, self._in_shardings(op))):
                if operand in args and operand not in self.sharding:
                    self._set(operand, sharding, f"{op.where()} operand {j}")
        for arg in args:  # the entry argument becomes its piece
            if arg in self.sharding:
                mesh = mesh_of(self.meshes, self.sharding[arg], "")
                arg.type = TensorType(self.sharding[arg].local_shape(mesh, arg.type.shape),
                                      arg.type.element_type, arg.type.encoding)

    def _set(self, value, sharding: TensorSharding, where: str) -> None:
        mesh = mesh_of(self.meshes, sharding, where)
        sharding.check(mesh, value.type.shape, where)
        self.sharding[value] = sharding
        self.global_shape[value] = tuple(value.type.shape)

    def _in_shardings(self, op: Operation) -> list:
        shardings = parse_sdy_sharding_list(op.attributes["in_shardings"].text)
        if len(shardings) != len(op.operands):
            raise ShardingError(f"{op.where()}: {len(shardings)} in_shardings for "
                                f"{len(op.operands)} operand(s)")
        return shardings

    def _splice(self, op: Operation, replacements: dict) -> None:
        where = op.where()
        in_shardings = self._in_shardings(op)
        out_shardings = parse_sdy_sharding_list(op.attributes["out_shardings"].text)
        manual_axes = manual_axes_of(op)
        for sharding in in_shardings + out_shardings:
            mesh = mesh_of(self.meshes, sharding, where)
            free = [n for n, size in mesh.axes if size > 1 and n not in manual_axes]
            if free:
                raise SpmdUnsupportedError(
                    f"{where}: mesh axes {', '.join(free)} are not manual (a partially "
                    f"manual shard_map): partitioning over them {NEEDS_PARTITIONER}")
        block = op.regions[0].block
        for j, (operand, sharding, arg) in enumerate(zip(op.operands, in_shardings,
                                                         block.arguments)):
            if self.sharding.get(operand) != sharding:
                have = self.sharding.get(operand)
                raise SpmdUnsupportedError(
                    f"{where}: operand {j} is laid out as {have or 'a global value'} but the "
                    f"manual computation takes it as {sharding}: resharding "
                    f"{NEEDS_PARTITIONER}")
            mesh = mesh_of(self.meshes, sharding, where)
            whole = self.global_shape[operand]
            expected = sharding.local_shape(mesh, whole)
            if tuple(arg.type.shape) != expected:
                raise ShardingError(f"{where}: body argument {j} has type {arg.type} but "
                                    f"{sharding} cuts shape {list(whole)} into pieces of "
                                    f"shape {list(expected)}")
            replacements[arg] = self.local.get(operand, operand)
        terminator = block.terminator
        position = op.parent.operations.index(op)
        op.parent.operations[position:position + 1] = block.operations[:-1]
        for inner in block.operations[:-1]:
            inner.parent = op.parent
        for result, piece, sharding in zip(op.results, terminator.operands, out_shardings):
            mesh = mesh_of(self.meshes, sharding, where)
            if sharding.global_shape(mesh, piece.type.shape) != tuple(result.type.shape):
                raise ShardingError(f"{where}: result {result.index} of type {result.type} is "
                                    f"not {sharding} over pieces of type {piece.type}")
            self.sharding[result] = sharding
            self.global_shape[result] = tuple(result.type.shape)
            self.local[result] = piece
            replacements[result] = piece

    def _rewrite_signature(self) -> None:
        func = self.func
        returned = func.body.terminator.operands
        arg_attrs = [self._with_sharding(func.arg_attrs(i), self.sharding.get(arg))
                     for i, arg in enumerate(func.body.arguments)]
        res_attrs = []
        for i, value in enumerate(returned):
            # ``value`` is already the piece; find the global value it stands for
            sharding = next((s for g, s in self.sharding.items()
                             if self.local.get(g, g) is value), None)
            res_attrs.append(self._with_sharding(func.result_attrs(i), sharding))
        func.op.attributes["function_type"] = TypeAttr(FunctionType(
            tuple(a.type for a in func.body.arguments), tuple(v.type for v in returned)))
        func.op.attributes["arg_attrs"] = ArrayAttr(tuple(arg_attrs))
        func.op.attributes["res_attrs"] = ArrayAttr(tuple(res_attrs))

    @staticmethod
    def _with_sharding(attrs: DictAttr, sharding) -> DictAttr:
        items = [(k, v) for k, v in attrs.items if k not in ("sdy.sharding", "mhlo.sharding")]
        if sharding is not None:
            items.append(("sdy.sharding", ShardingAttr.of(sharding)))
        return DictAttr(tuple(items))


__all__ = ["MANUAL", "ManualPartitionPass", "PARTITIONED", "manual_axes_of"]
