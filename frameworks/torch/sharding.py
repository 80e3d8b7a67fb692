"""SPMD sharding for PyTorch programs under ``torch.compile(backend="openhlo")``, with the
user API of PyTorch/XLA (``torch_xla.distributed.spmd``): one process drives every device.

    from frameworks.torch import sharding as xs
    mesh = xs.Mesh(np.arange(8), (2, 4), ("data", "model"))
    xs.mark_sharding(model.fc1.weight, mesh, ("model", None))   # column-parallel
    xs.mark_sharding(model.fc2.weight, mesh, (None, "model"))   # row-parallel
    xs.mark_sharding(x, mesh, ("data", None))                   # batch over "data"
    y = torch.compile(model, backend="openhlo")(x)              # an ordinary global tensor

``mark_sharding`` checks the spec at once (rank, axis names or indices, each axis used once,
every split dimension divisible) and records it in a side table keyed by the tensor's storage,
shape and strides (so the views AOTAutograd hands the compiled graphs, and the parameters the
backward graph gets back as saved tensors, are found too). Tensors stay global, ordinary CPU
tensors: the sharding is a placement request for the compiled program.

When a compiled segment takes sharded inputs, its StableHLO gets ``sdy.mesh @mesh`` and
``sdy.sharding`` argument attributes plus ``mhlo.num_partitions``; it is compiled for
``mesh.size()`` partitions on a cpu client of that many virtual devices (sharding propagation
and the SPMD partitioner place the collectives) and run with ``execute_global``: the global
arguments are cut into per-device pieces and the results put back together, so callers see
global tensors. Forward and backward graphs alike (the backward graph finds the sharded
parameters among its saved tensors).

Auto-sharding (PyTorch/XLA's ``use_spmd(auto=True)``): after ``use_spmd(auto=True, mesh=...)``
(or with ``OPENHLO_AUTO_SPMD=1`` and ``OPENHLO_AUTO_SPMD_MESH=4,2``) every compiled segment,
marked or not, is sharded on the mesh by ``xla_core.spmd.auto_sharding``: ``mark_sharding``
layouts stay as constraints, the plan chooses the rest, and the segment runs partitioned
with global tensors in and out. ``use_spmd(auto=False)`` switches it off again.

The number of virtual devices is the mesh size; ``OPENHLO_TORCH_NUM_DEVICES`` (or
``set_num_devices``) fixes it, and a mesh of another size is then refused. Under torchrun
the devices are spread over its processes (distributed.py), each feeding the full inputs.
"""
from __future__ import annotations

import collections
import math
import os
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import logging

import numpy as np
import torch

from stablehlo.ir.sharding import Mesh as _SpmdMesh
from stablehlo.ir.sharding import ShardingError, TensorSharding

__all__ = [
    "AutoSpmd",
    "Mesh",
    "ShardingError",
    "auto_spmd",
    "clear_sharding",
    "compiled_programs",
    "get_1d_mesh",
    "get_global_mesh",
    "get_sharding",
    "mark_sharding",
    "num_devices",
    "set_global_mesh",
    "set_num_devices",
    "use_spmd",
]

logger = logging.getLogger("openhlo.torch")

_ENV = "OPENHLO_TORCH_NUM_DEVICES"
_num_devices_override: int | None = None


def set_num_devices(n: int | None) -> None:
    """Fix the number of virtual devices (None: back to ``OPENHLO_TORCH_NUM_DEVICES`` or the
    mesh size)."""
    global _num_devices_override
    if n is not None and (not isinstance(n, int) or n < 1):
        raise ShardingError(f"the number of devices must be a positive integer, got {n!r}")
    _num_devices_override = n


def num_devices() -> int | None:
    """The fixed number of virtual devices, or None when the mesh size decides."""
    if _num_devices_override is not None:
        return _num_devices_override
    value = os.environ.get(_ENV)
    if value is None or value == "":
        return None
    try:
        n = int(value)
    except ValueError:
        raise ShardingError(f"{_ENV}={value!r} is not a number of devices") from None
    if n < 1:
        raise ShardingError(f"{_ENV}={value!r} is not a positive number of devices")
    return n


class Mesh:
    """``Mesh(device_ids, mesh_shape, axis_names=None)`` as ``torch_xla.distributed.spmd.Mesh``:
    ``device_ids`` (a list or numpy array of the logical devices 0..N-1, row-major over the
    mesh), ``mesh_shape`` a tuple of axis sizes, ``axis_names`` a tuple of unique names
    (default ``axis_0``, ``axis_1``, ...: spec entries may then be axis indices)."""

    def __init__(self, device_ids, mesh_shape, axis_names=None):
        ids = np.asarray(device_ids).reshape(-1)
        if ids.size and not np.issubdtype(ids.dtype, np.integer):
            raise ShardingError(f"mesh device ids must be integers, got {ids.dtype}")
        self.device_ids = np.asarray(ids, dtype=np.int64)
        try:
            self.mesh_shape = tuple(int(s) for s in mesh_shape)
        except TypeError:
            raise ShardingError(f"mesh_shape must be a tuple of axis sizes, got "
                                f"{mesh_shape!r}") from None
        if any(s < 1 for s in self.mesh_shape):
            raise ShardingError(f"mesh_shape {self.mesh_shape} has an axis of size < 1")
        if axis_names is None:
            axis_names = tuple(f"axis_{i}" for i in range(len(self.mesh_shape)))
        self.axis_names = tuple(axis_names)
        if len(self.axis_names) != len(self.mesh_shape):
            raise ShardingError(f"{len(self.axis_names)} axis name(s) {self.axis_names} for a "
                                f"mesh of {len(self.mesh_shape)} axes {self.mesh_shape}")
        if not all(isinstance(n, str) and n for n in self.axis_names):
            raise ShardingError(f"mesh axis names must be non-empty strings, got "
                                f"{self.axis_names}")
        if len(set(self.axis_names)) != len(self.axis_names):
            raise ShardingError(f"mesh axis names {self.axis_names} are not unique")
        size = math.prod(self.mesh_shape)
        if len(self.device_ids) != size:
            raise ShardingError(f"a mesh of shape {self.mesh_shape} holds {size} device(s), got "
                                f"{len(self.device_ids)} device id(s)")
        if len(set(self.device_ids.tolist())) != size:
            raise ShardingError(f"mesh device ids {self.device_ids.tolist()} are not unique")
        if sorted(self.device_ids.tolist()) != list(range(size)):
            raise ShardingError(f"mesh device ids {self.device_ids.tolist()} must be the "
                                f"devices 0..{size - 1}")
        fixed = num_devices()
        if fixed is not None and fixed != size:
            raise ShardingError(f"the mesh {self.mesh_shape} has {size} device(s) but there are "
                                f"{fixed} ({_ENV} / set_num_devices)")

    def size(self) -> int:
        return len(self.device_ids)

    def shape(self) -> collections.OrderedDict:
        return collections.OrderedDict(zip(self.axis_names, self.mesh_shape))

    def get_logical_mesh(self) -> np.ndarray:
        return self.device_ids.reshape(self.mesh_shape)

    def get_axis_name_idx(self, name: str) -> int:
        if name not in self.axis_names:
            raise ShardingError(f"unknown mesh axis {name!r} (mesh axes: "
                                f"{', '.join(map(repr, self.axis_names))})")
        return self.axis_names.index(name)

    def spmd_mesh(self) -> _SpmdMesh:
        """The IR's mesh (``sdy.mesh``)."""
        ids = self.device_ids.tolist()
        return _SpmdMesh(tuple(zip(self.axis_names, self.mesh_shape)),
                         None if ids == list(range(len(ids))) else tuple(ids))

    def _key(self) -> tuple:
        return (tuple(self.device_ids.tolist()), self.mesh_shape, self.axis_names)

    def __eq__(self, other) -> bool:
        return isinstance(other, Mesh) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"Mesh(device_ids={self.device_ids.tolist()}, mesh_shape={self.mesh_shape}, "
                f"axis_names={self.axis_names})")


_global_mesh: Mesh | None = None


def set_global_mesh(mesh: Mesh) -> None:
    global _global_mesh
    _global_mesh = mesh


def get_global_mesh() -> Mesh | None:
    return _global_mesh


def get_1d_mesh(axis_name: str | None = None) -> Mesh:
    """All devices on one axis (``OPENHLO_TORCH_NUM_DEVICES`` of them; 8 when unset)."""
    n = num_devices() or 8
    return Mesh(np.arange(n), (n,), (axis_name,) if axis_name else None)


# ---- auto-sharding: use_spmd(auto=True) -----------------------------------------------------

_AUTO_ENV = "OPENHLO_AUTO_SPMD"
_AUTO_MESH_ENV = "OPENHLO_AUTO_SPMD_MESH"


@dataclass(frozen=True)
class AutoSpmd:
    """How compiled segments are auto-sharded: on ``mesh``, under ``memory_limit`` bytes per
    device (an int or text such as ``"2GiB"``; None: no limit), costed on the
    ``xla_core.cost`` hardware description ``hardware``, the solver given ``time_limit_s``
    seconds (None: auto-sharding's default)."""
    mesh: Mesh
    memory_limit: int | str | None = None
    hardware: str = "cpu"
    time_limit_s: float | None = None

    def __str__(self) -> str:
        return f"on mesh {dict(self.mesh.shape())}"


# None: OPENHLO_AUTO_SPMD decides; False: off whatever it says
_auto_setting: AutoSpmd | bool | None = None


def use_spmd(auto: bool | None = False, mesh: Mesh | None = None, *, memory_limit=None,
             hardware: str = "cpu", time_limit_s: float | None = None) -> None:
    """PyTorch/XLA's ``use_spmd``. ``auto=True``: from now on every compiled graph (forward
    and backward) is auto-sharded on ``mesh`` (default: ``OPENHLO_AUTO_SPMD_MESH``, else the
    global mesh, else every device on one axis); ``mark_sharding`` layouts stay as
    constraints. ``auto=False``: only marked tensors are sharded (the default). ``auto=None``:
    back to what ``OPENHLO_AUTO_SPMD`` says. See ``AutoSpmd`` for the other options."""
    global _auto_setting
    if auto is None or auto is False:
        _auto_setting = auto
        return
    if auto is not True:
        raise ShardingError(f"use_spmd(auto=...) takes True, False or None, got {auto!r}")
    mesh = mesh if mesh is not None else _default_auto_mesh()
    if not isinstance(mesh, Mesh):
        raise ShardingError(f"use_spmd: expected a frameworks.torch.sharding.Mesh, got "
                            f"{type(mesh).__name__}")
    if isinstance(memory_limit, str):  # bad text is refused now, not at the first compile
        from pjrt.plugins.compiler_services import AutoShardingError, parse_bytes
        try:
            parse_bytes(memory_limit)
        except AutoShardingError as exc:
            raise ShardingError(f"use_spmd: {exc}") from None
    if time_limit_s is not None and not time_limit_s > 0:
        raise ShardingError(f"use_spmd: time_limit_s must be positive, got {time_limit_s!r}")
    _auto_setting = AutoSpmd(mesh, memory_limit, hardware, time_limit_s)


def auto_spmd() -> AutoSpmd | None:
    """The auto-sharding in force (``use_spmd``, else ``OPENHLO_AUTO_SPMD``), or None."""
    if _auto_setting is not None:
        return _auto_setting or None
    value = os.environ.get(_AUTO_ENV, "")
    if value in ("", "0"):
        return None
    if value != "1":
        raise ShardingError(f"{_AUTO_ENV}={value!r}: expected 1 (on) or 0 (off)")
    return AutoSpmd(_default_auto_mesh())


def _default_auto_mesh() -> Mesh:
    value = os.environ.get(_AUTO_MESH_ENV, "")
    if not value:
        return get_global_mesh() or get_1d_mesh()
    try:
        shape = tuple(int(part) for part in value.split(","))
        return Mesh(np.arange(max(math.prod(shape), 0)), shape)
    except ValueError:
        raise ShardingError(f"{_AUTO_MESH_ENV}={value!r} is not a mesh shape such as "
                            f"4,2") from None
    except ShardingError as exc:
        raise ShardingError(f"{_AUTO_MESH_ENV}={value!r}: {exc}") from None


@dataclass(frozen=True)
class Sharding:
    """A tensor's placement: per dimension, the mesh axes splitting it (major to minor)."""
    mesh: Mesh
    dims: tuple  # (("model",), (), ...)

    @property
    def spec(self) -> TensorSharding:
        return TensorSharding("mesh", self.dims)

    def __str__(self) -> str:
        return str(self.spec)


def _resolve(mesh: Mesh, entry, dim: int) -> tuple:
    """A spec entry as a tuple of axis names."""
    if entry is None:
        return ()
    parts = entry if isinstance(entry, tuple) else (entry,)
    names = []
    for part in parts:
        if isinstance(part, bool) or part is None:
            raise ShardingError(f"partition spec entry {entry!r} for dimension {dim} holds "
                                f"{part!r}; expected axis names or indices")
        if isinstance(part, (int, np.integer)):
            if not 0 <= part < len(mesh.axis_names):
                raise ShardingError(f"partition spec entry {entry!r} for dimension {dim}: "
                                    f"mesh axis index {part} is out of range (the mesh has "
                                    f"{len(mesh.axis_names)} axes {mesh.axis_names})")
            names.append(mesh.axis_names[int(part)])
        elif isinstance(part, str):
            if part not in mesh.axis_names:
                raise ShardingError(f"partition spec entry {entry!r} for dimension {dim}: "
                                    f"unknown mesh axis {part!r} (mesh axes: "
                                    f"{', '.join(map(repr, mesh.axis_names))})")
            names.append(part)
        else:
            raise ShardingError(f"partition spec entry {entry!r} for dimension {dim}: expected "
                                f"an axis name, an axis index, None or a tuple of them")
    return tuple(names)


def make_sharding(shape: Sequence[int], mesh: Mesh, partition_spec) -> Sharding:
    """Check ``partition_spec`` for a tensor of ``shape`` on ``mesh``; raise ShardingError."""
    if not isinstance(mesh, Mesh):
        raise ShardingError(f"expected a frameworks.torch.sharding.Mesh, got "
                            f"{type(mesh).__name__}")
    spec = tuple(partition_spec)
    if len(spec) != len(shape):
        raise ShardingError(f"partition spec {spec} has {len(spec)} entries for a tensor of "
                            f"rank {len(shape)} (shape {tuple(shape)})")
    dims = tuple(_resolve(mesh, entry, d) for d, entry in enumerate(spec))
    used = [a for axes in dims for a in axes]
    for axis in used:
        if used.count(axis) > 1:
            raise ShardingError(f"partition spec {spec} uses mesh axis {axis!r} more than once")
    for d, (axes, extent) in enumerate(zip(dims, shape)):
        pieces = math.prod(mesh.shape()[a] for a in axes)
        if extent % pieces:
            raise ShardingError(
                f"dimension {d} of size {extent} cannot be split over mesh axes "
                f"{', '.join(map(repr, axes))} ({pieces} pieces): {pieces} does not divide "
                f"{extent} (shape {tuple(shape)}, spec {spec})")
    return Sharding(mesh, dims)


# ---- the side table ------------------------------------------------------------------------
# (storage pointer, storage offset, shape, strides) -> (weak reference to the tensor, Sharding)
_table: dict = {}


def _key(t: torch.Tensor) -> tuple | None:
    try:
        return (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape),
                tuple(t.stride()), t.dtype)
    except (RuntimeError, NotImplementedError):  # fake, meta or functional wrappers
        return None


def _forget(key, ref) -> None:
    entry = _table.get(key)
    if entry is not None and entry[0] is ref:
        del _table[key]


def mark_sharding(t: torch.Tensor, mesh: Mesh, partition_spec) -> torch.Tensor:
    """Record that ``t`` is laid out over ``mesh`` by ``partition_spec`` (one entry per
    dimension: an axis name, an axis index, None for replicated, or a tuple of them for a
    dimension split over several axes, major to minor). Checked now; returns ``t``."""
    if not isinstance(t, torch.Tensor):
        raise ShardingError(f"mark_sharding takes a tensor, got {type(t).__name__}")
    sharding = make_sharding(tuple(t.shape), mesh, partition_spec)
    if _key(t) is None:
        raise ShardingError("mark_sharding needs a real tensor (call it outside the compiled "
                            "function, on parameters and inputs)")
    _record(t, sharding)
    return t


def _record(t: torch.Tensor, sharding: Sharding) -> None:
    key = _key(t)
    if key is None:
        return
    ref = weakref.ref(t, lambda r, key=key: _forget(key, r))
    _table[key] = (ref, sharding)


def clear_sharding(t: torch.Tensor) -> torch.Tensor:
    """Forget ``t``'s sharding (it becomes replicated again)."""
    key = _key(t)
    if key is not None:
        _table.pop(key, None)
    return t


def get_sharding(t) -> Sharding | None:
    """The sharding recorded for ``t`` (or a tensor sharing its storage, offset, shape and
    strides: AOTAutograd's views of it), or None."""
    if not _table or not isinstance(t, torch.Tensor):
        return None
    key = _key(t)
    entry = _table.get(key) if key is not None else None
    if entry is None or entry[0]() is None:
        return None
    return entry[1]


def shardings_of(args: Sequence) -> tuple | None:
    """The shardings of a graph's arguments (None where none is recorded), or None when no
    argument has one. All must share one mesh."""
    if not _table:
        return None
    found = tuple(get_sharding(a) for a in args)
    meshes = {s.mesh for s in found if s is not None}
    if not meshes:
        return None
    if len(meshes) > 1:
        raise ShardingError(f"the inputs of one compiled graph are sharded over "
                            f"{len(meshes)} different meshes: {sorted(map(repr, meshes))}")
    return found


def describe_changes(old: tuple | None, new: tuple | None) -> str:
    """What differs between two argument sharding lists, e.g.
    ``input 2 sharding replicated -> [{"model"}, {}]``."""
    if old == new:
        return ""
    old, new = old or (), new or ()
    changes = []
    for i in range(max(len(old), len(new))):
        a = old[i] if i < len(old) else None
        b = new[i] if i < len(new) else None
        if a != b:
            changes.append(f"input {i} sharding {_short(a)} -> {_short(b)}")
    return ", ".join(changes)


def _short(s: Sharding | None) -> str:
    return "replicated" if s is None else str(s.spec)[len("#sdy.sharding<@mesh, "):-1]


# ---- compiling and running sharded segments --------------------------------------------------

def client(n: int):
    """A cpu PJRT client of ``n`` virtual devices in all: under torchrun, spread over its
    processes (distributed.py)."""
    from frameworks.torch import distributed
    return distributed.client(n)


# (segment name, LoadedExecutable) of every sharded program compiled, newest last
_compiled: list = []


def compiled_programs() -> list:
    """``[(name, LoadedExecutable)]`` of the partitioned programs compiled so far (their
    ``executable.module`` is the per-device program, with its collectives)."""
    return list(_compiled)


def annotate(module, entry: str, shardings: Sequence[Sharding | None], mesh: Mesh,
             result_shardings: Sequence[Sharding | None] | None = None,
             replicate_unmarked: bool = True) -> None:
    """Give ``module``'s ``entry`` the ``sdy.mesh``, argument shardings (None: replicated,
    or unannotated when not ``replicate_unmarked``) and the partition count; with
    ``result_shardings``, the results' too (else propagation chooses them)."""
    from stablehlo.ir.attributes import ArrayAttr, DictAttr, IntegerAttr, StringAttr
    from stablehlo.ir.core import Operation
    from stablehlo.ir.sharding import MeshAttr, ShardingAttr
    from stablehlo.ir.types import IntegerType
    mesh_op = Operation("sdy.mesh", attributes={"sym_name": StringAttr("mesh"),
                                                "mesh": MeshAttr.of(mesh.spmd_mesh())})
    mesh_op.parent = module.body
    module.body.operations.insert(0, mesh_op)
    func = module.lookup(entry)
    attrs = []
    for i, s in enumerate(shardings):
        items = dict(func.arg_attrs(i).items)
        # an unmarked tensor is replicated (as in PyTorch/XLA): said explicitly, so that
        # propagation does not split it to suit its users; auto-sharding chooses its layout
        if s is not None or replicate_unmarked:
            items["sdy.sharding"] = ShardingAttr.of(_spec_or_replicated(
                s, len(func.type.inputs[i].shape)))
        attrs.append(DictAttr(tuple(items.items())))
    func.op.attributes["arg_attrs"] = ArrayAttr(tuple(attrs))
    if result_shardings is not None:
        results = []
        for i, s in enumerate(result_shardings):
            items = dict(func.result_attrs(i).items)
            items["sdy.sharding"] = ShardingAttr.of(_spec_or_replicated(
                s, len(func.type.results[i].shape)))
            results.append(DictAttr(tuple(items.items())))
        func.op.attributes["res_attrs"] = ArrayAttr(tuple(results))
    module.attributes["mhlo.num_partitions"] = IntegerAttr(mesh.size(), IntegerType(32))


def _spec_or_replicated(s: Sharding | None, rank: int) -> TensorSharding:
    return s.spec if s is not None else TensorSharding("mesh", ((),) * rank)


class ShardedProgram:
    """A segment compiled for ``mesh.size()`` partitions; called like a single-device
    LoadedExecutable (global numpy arrays in, global numpy arrays out). With a ``placement``
    (placement.py: a pipeline stage's devices) the partitions run on its group of devices.
    With ``auto``, auto-sharding chooses every layout the marked ``shardings`` leave open."""

    def __init__(self, module, entry: str, shardings, mesh: Mesh, placement=None,
                 auto: AutoSpmd | None = None):
        import pjrt
        fixed = num_devices()
        if placement is None and fixed is not None and fixed != mesh.size():
            raise ShardingError(f"inputs sharded over a mesh of {mesh.size()} device(s), but "
                                f"there are {fixed} ({_ENV} / set_num_devices)")
        annotate(module, entry, shardings, mesh, replicate_unmarked=auto is None)
        self.auto = auto
        if auto is not None:
            _auto_shard(module, entry, auto)
        self.mesh = mesh
        if placement is None:
            self.executable = client(mesh.size()).compile(
                module, pjrt.CompileOptions(num_partitions=mesh.size()))
        else:
            self.executable = placement.compile(module, num_partitions=mesh.size())
        _compiled.append((entry, self.executable))
        self.result_shardings = self._result_shardings()

    def _result_shardings(self) -> list:
        """The propagated sharding of each result (None: replicated), read from the
        partitioned entry's result attributes."""
        from stablehlo.text.parse_sharding import sharding_of
        exe = self.executable.executable
        func = exe.module.lookup(exe.entry)
        out = []
        for i in range(len(func.type.results)):
            attr = func.result_attrs(i).get("sdy.sharding")
            if attr is None:
                out.append(None)
                continue
            spec = sharding_of(attr)
            out.append(Sharding(self.mesh, tuple(spec.dims)) if spec.used_axes() else None)
        return out

    def __call__(self, *arrays) -> list:
        return self.executable.execute_global(*arrays)

    def record_results(self, tensors: Sequence[torch.Tensor]) -> None:
        """Give the result tensors their propagated shardings (as PyTorch/XLA's tensors keep
        theirs): the backward graph then finds the layouts of the activations it saved.
        Not under auto-sharding: each graph's plan chooses its own layouts, and a recorded
        one would stay a constraint (a mark) after auto-sharding is switched off."""
        if self.auto is not None:
            return
        for t, s in zip(tensors, self.result_shardings):
            if s is not None:
                _record(t, s)


def _auto_shard(module, entry: str, auto: AutoSpmd) -> None:
    """Choose and write the layouts of ``module``'s ``entry`` (its marked arguments kept)."""
    from pjrt.plugins.compiler_services import (AutoShardingError, apply_plan, auto_shard,
                                                run_passes)
    # auto-sharding sees a call as one opaque op
    run_passes(module, "inline")
    options = {} if auto.time_limit_s is None else {"time_limit_s": auto.time_limit_s}
    try:
        plan = auto_shard(module, None, memory_limit=auto.memory_limit,
                          hardware=auto.hardware, entry=entry, **options)
    except AutoShardingError as exc:  # the user's mesh or limit: not a backend bug
        raise ShardingError(f"auto-sharding {entry}: {exc}") from exc
    if plan.solution.fallback:
        logger.warning("openhlo: auto-sharding %s: %s; the plan is the greedy one (a longer "
                       "use_spmd(time_limit_s=...) lets the solver finish)", entry,
                       plan.solution.status)
    if logger.isEnabledFor(logging.INFO):
        for line in plan.explain():
            logger.info("openhlo: auto-sharding %s: %s", entry, line)
    apply_plan(module, plan, entry)
