"""torch.distributed.checkpoint (DCP) for the state of a model sharded with ``mark_sharding``,
as PyTorch/XLA's SPMD planners do it for its sharded tensors.

    from frameworks.torch import checkpoint as ckpt
    state = ckpt.training_state(model, optimizer)      # {"model": ..., "optim": ...}
    dcp.save(state, checkpoint_id=path, planner=ckpt.ShardedSavePlanner())
    future = dcp.async_save(state, checkpoint_id=path, planner=ckpt.ShardedSavePlanner(),
                            async_stager=ckpt.ShardedStager())   # or ckpt.async_save(state, path)
    ckpt.load(state, path)      # dcp.load with ShardedLoadPlanner, after checking the checkpoint
    ckpt.apply_training_state(model, optimizer, state)

Our parameters are ordinary CPU tensors, full-size and equal in every process; the sharding
``mark_sharding`` recorded says which devices hold which piece, and under torchrun which process
holds which device (distributed.py). ``ShardedSavePlanner`` cuts each tensor into the distinct
pieces of its sharding (one, the whole tensor, when it has none) and lets each process offer
only the pieces its own devices hold; the coordinator then keeps one writer per piece across
replicas (``assign_writers``: a deterministic rule, the holder with the fewest bytes so far),
so nothing is written twice, and DCP's metadata lists every piece as a chunk (offsets, sizes)
of the global tensor.
``ShardedLoadPlanner`` fills each target tensor from the saved chunks, whatever the sharding,
mesh or process count of the save and of the target: since every process holds its tensors
full-size, each process reads every chunk, and the target keeps its own sharding (the copy is in
place), so a different sharding on load is a reshard. ``ShardedStager`` is async_save's
snapshot (the training loop may change the originals as soon as async_save returns): since
every process computes ``assign_writers`` the same way, each copies only the pieces it will
write (StagedTensor), and the planner writes from those copies.

A checkpoint is complete once DCP's ``.metadata`` exists: FileSystemWriter writes it last, by
rename, after every process's files are written. ``latest_checkpoint(root)`` takes only those,
``load`` refuses an incomplete one (IncompleteCheckpointError), and the save planner refuses a
directory that already holds a complete checkpoint (an interrupted overwrite would leave the old
``.metadata`` beside new partial files): save each step into its own ``checkpoint_path``.
"""
from __future__ import annotations

import copy
import io
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.default_planner import create_default_global_save_plan
from torch.distributed.checkpoint.metadata import (ChunkStorageMetadata,
                                                   Metadata, MetadataIndex, TensorProperties,
                                                   TensorStorageMetadata)
from torch.distributed.checkpoint.planner import (LoadItemType, LoadPlan, LoadPlanner, ReadItem,
                                                  SavePlan, SavePlanner, TensorWriteData,
                                                  WriteItem, WriteItemType)
from torch.distributed.checkpoint.staging import AsyncStager

from frameworks.torch import distributed
from frameworks.torch import sharding as xs
from stablehlo.errors import OpenHLOError

__all__ = [
    "CheckpointError", "IncompleteCheckpointError", "Piece", "ShardedLoadPlanner",
    "ShardedSavePlanner", "ShardedStager", "StagedTensor", "TensorLayout",
    "apply_training_state", "assign_writers", "async_save", "checkpoint_path", "flatten_state",
    "is_complete", "latest_checkpoint", "load", "pieces", "require_complete", "save",
    "training_state",
]

# DCP's FileSystemWriter writes this file last (a rename), once every process's data is written.
METADATA_FILE = ".metadata"
_STEP_PREFIX = "step_"  # checkpoint_path names a step's directory step_<N>


class CheckpointError(OpenHLOError):
    """A checkpoint cannot be saved or loaded as asked; the message names it and the entry."""


class IncompleteCheckpointError(CheckpointError):
    """The checkpoint's write never finished (a save was interrupted, or is still running)."""


# ---- completeness --------------------------------------------------------------------------

def checkpoint_path(root, step: int) -> str:
    """The directory of step ``step``'s checkpoint under ``root`` (``root/step_00000042``)."""
    return os.path.join(os.fspath(root), f"{_STEP_PREFIX}{step:08d}")


def is_complete(path) -> bool:
    """Whether the checkpoint at ``path`` was written to the end (it has ``.metadata``)."""
    return os.path.isfile(os.path.join(os.fspath(path), METADATA_FILE))


def latest_checkpoint(root) -> Optional[str]:
    """The complete checkpoint of the highest step under ``root`` (directories named as
    ``checkpoint_path`` names them), or None. An interrupted one is never taken."""
    root = os.fspath(root)
    if not os.path.isdir(root):
        return None
    steps = []
    for name in os.listdir(root):
        step = name[len(_STEP_PREFIX):]
        if (name.startswith(_STEP_PREFIX) and step.isascii() and step.isdigit()
                and is_complete(os.path.join(root, name))):
            steps.append((int(step), name))
    return os.path.join(root, max(steps)[1]) if steps else None


def require_complete(path) -> None:
    """Raise CheckpointError unless ``path`` holds a complete checkpoint."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise CheckpointError(f"checkpoint {path}: no such directory")
    if not is_complete(path):
        latest = latest_checkpoint(os.path.dirname(path) or ".")
        raise IncompleteCheckpointError(
            f"checkpoint {path} is incomplete: it has no {METADATA_FILE} (its save was "
            f"interrupted or has not finished); the latest complete checkpoint beside it is "
            f"{latest or 'none'}")


def _refuse_complete(storage_meta) -> None:
    target = getattr(storage_meta, "checkpoint_id", None)
    if isinstance(target, (str, os.PathLike)) and is_complete(target):
        raise CheckpointError(f"checkpoint {os.fspath(target)} already holds a complete "
                              f"checkpoint: save each one into a new directory "
                              f"(checkpoint_path(root, step)); an interrupted overwrite would "
                              f"pass for complete")


# ---- state dicts ---------------------------------------------------------------------------

def flatten_state(state: Mapping, prefix: tuple = ()) -> tuple[dict, dict]:
    """``({fqn: leaf}, {fqn: key path})``: nested dicts walked, keys joined by dots (DCP's
    names); anything else (tensors, numbers, lists) is a leaf."""
    leaves, paths = {}, {}
    for key, value in state.items():
        path = prefix + (key,)
        if isinstance(value, Mapping):
            more_leaves, more_paths = flatten_state(value, path)
            leaves.update(more_leaves)
            paths.update(more_paths)
        else:
            fqn = ".".join(map(str, path))
            leaves[fqn], paths[fqn] = value, path
    return leaves, paths


def training_state(model: torch.nn.Module, optimizer=None) -> dict:
    """``{"model": ..., "optim": ...}`` for DCP (torch's ``get_state_dict``: the tensors are the
    model's and the optimizer's own, optimizer state keyed by parameter name and created if the
    optimizer has not stepped yet). Each optimizer state tensor of its parameter's shape (SGD's
    momentum, Adam's moments) gets that parameter's sharding, so it is saved sharded too."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_state_dict
    if optimizer is None:
        return {"model": get_model_state_dict(model)}
    model_state, optim_state = get_state_dict(model, optimizer)
    for name, per_parameter in optim_state["state"].items():
        parameter = model_state.get(name)
        placement = xs.get_sharding(parameter) if parameter is not None else None
        if placement is None:
            continue
        for value in per_parameter.values():
            if isinstance(value, torch.Tensor) and value.shape == parameter.shape:
                xs.mark_sharding(value, placement.mesh, placement.dims)
    return {"model": model_state, "optim": optim_state}


def apply_training_state(model: torch.nn.Module, optimizer, state: dict) -> None:
    """Give ``model`` and ``optimizer`` a loaded ``training_state`` (the tensors were filled in
    place; this sets the rest, such as the optimizer's hyperparameters)."""
    from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_state_dict
    if optimizer is None:
        set_model_state_dict(model, state["model"])
    else:
        set_state_dict(model, optimizer, model_state_dict=state["model"],
                       optim_state_dict=state["optim"])


# ---- the pieces of a sharded tensor --------------------------------------------------------

@dataclass(frozen=True)
class Piece:
    """One distinct piece of a tensor under its sharding and the processes holding it."""
    offsets: tuple
    sizes: tuple
    processes: frozenset


def pieces(t: torch.Tensor) -> list:
    """The distinct pieces of ``t`` (the whole tensor, held by every process, when it has no
    sharding), from its recorded sharding's tile assignment."""
    shape = tuple(t.shape)
    placement = xs.get_sharding(t)
    everyone = frozenset(range(distributed.num_processes()))
    if placement is None:
        return [Piece((0,) * len(shape), shape, everyone)]
    mesh = placement.mesh.spmd_mesh()
    tiles = placement.spec.tile_assignment(mesh)
    if tiles.replicated:
        return [Piece((0,) * len(shape), shape, everyone)]
    local = placement.spec.local_shape(mesh, shape)
    out = []
    for index in np.ndindex(*tiles.tile_dims):
        holders = np.asarray(tiles.devices[index]).reshape(-1)
        processes = frozenset(distributed.process_of_device(int(d), mesh.size)
                              for d in holders)
        out.append(Piece(tuple(i * n for i, n in zip(index, local)), local, processes))
    return out


def _narrow(t: torch.Tensor, offsets, sizes) -> torch.Tensor:
    for dim, (start, length) in enumerate(zip(offsets, sizes)):
        t = t.narrow(dim, start, length)
    return t


# ---- who writes which piece ---------------------------------------------------------------

def assign_writers(offers) -> dict:
    """One writer per piece: ``offers`` is ``(key, nbytes, holders)`` per piece (key: ``(fqn,
    offsets)``); the result maps each key to the holder with the fewest bytes so far, the
    largest pieces placed first (then by key), ties to the lower rank. Deterministic, so
    every process computes the same writers locally (the stager copies only its own pieces)
    and the coordinator's plan, computed from the offers it gathers, agrees with them."""
    load: dict = {}
    writers = {}
    for key, nbytes, holders in sorted(offers, key=lambda offer: (-offer[1], offer[0])):
        writer = min(holders, key=lambda rank: (load.get(rank, 0), rank))
        load[writer] = load.get(writer, 0) + nbytes
        writers[key] = writer
    return writers


def _tensor_offers(layouts: dict) -> list:
    """``assign_writers``' offers for every piece of every tensor of a flat state, from its
    layouts (``{fqn: _layout(value)}``): the same in every process."""
    offers = []
    for fqn, layout in layouts.items():
        if layout is not None:
            itemsize = layout.properties.dtype.itemsize
            offers.extend(((fqn, piece.offsets), int(np.prod(piece.sizes)) * itemsize,
                           piece.processes) for piece in layout.pieces)
    return offers


@dataclass(frozen=True)
class TensorLayout:
    """A tensor's global size, DCP properties and pieces."""
    size: torch.Size
    properties: TensorProperties
    pieces: tuple


def _layout(value) -> Optional[TensorLayout]:
    """A tensor's (or a staged tensor's) global size, properties and pieces; None for other
    values."""
    if isinstance(value, StagedTensor):
        return value.layout
    if isinstance(value, torch.Tensor):
        return TensorLayout(value.size(), TensorProperties.create_from_tensor(value),
                            tuple(pieces(value)))
    return None


@dataclass
class StagedTensor:
    """async_save's snapshot of one tensor in one process: copies of only the pieces this
    process writes (``copies``: offsets -> tensor), with the layout of the whole tensor
    (the save plan offers every piece the process holds)."""
    layout: TensorLayout
    copies: dict


# ---- saving --------------------------------------------------------------------------------

class ShardedSavePlanner(SavePlanner):
    """Each process writes only the pieces its devices hold, each piece once across replicas
    (``assign_writers``). The state's tensors are live ones (dcp.save) or StagedTensors
    (async_save with ShardedStager), which hold the pieces this process writes."""

    def set_up_planner(self, state_dict, storage_meta=None, is_coordinator: bool = False):
        _refuse_complete(storage_meta)
        self._leaves, self._paths = flatten_state(state_dict)
        self._is_coordinator = is_coordinator

    def create_local_plan(self) -> SavePlan:
        me = distributed.process_index()
        items = []
        for fqn, value in self._leaves.items():
            layout = _layout(value)
            if layout is not None:
                for piece in layout.pieces:
                    if me in piece.processes:
                        whole = piece.sizes == tuple(layout.size)
                        items.append(WriteItem(
                            index=MetadataIndex(fqn, piece.offsets),
                            type=WriteItemType.TENSOR if whole else WriteItemType.SHARD,
                            tensor_data=TensorWriteData(
                                chunk=ChunkStorageMetadata(torch.Size(piece.offsets),
                                                           torch.Size(piece.sizes)),
                                properties=layout.properties, size=layout.size)))
            elif self._is_coordinator:  # other values: small, written by the coordinator
                items.append(WriteItem(index=MetadataIndex(fqn), type=WriteItemType.BYTE_IO))
        return SavePlan(items, planner_data=self._paths)

    def create_global_plan(self, all_plans: list) -> tuple:
        """Each piece kept in the plan of the process ``assign_writers`` chooses among the
        processes offering it (the values that are no tensors: the coordinator's)."""
        holders: dict = {}
        nbytes = {}
        for rank, plan in enumerate(all_plans):
            for item in plan.items:
                key = (item.index.fqn, tuple(item.index.offset or ()))
                holders.setdefault(key, set()).add(rank)
                nbytes[key] = item.tensor_storage_size() or 0
        writers = assign_writers((key, nbytes[key], frozenset(ranks))
                                 for key, ranks in holders.items())
        deduped = [SavePlan([item for item in plan.items
                             if writers[(item.index.fqn, tuple(item.index.offset or ()))] == rank])
                   for rank, plan in enumerate(all_plans)]
        global_plan, metadata = create_default_global_save_plan(deduped)
        paths = {}
        for plan in all_plans:
            paths.update(plan.planner_data or {})
        metadata.planner_data = paths
        return global_plan, metadata

    def finish_plan(self, new_plan: SavePlan) -> SavePlan:
        return new_plan

    def resolve_data(self, write_item: WriteItem):
        value = self._leaves[write_item.index.fqn]
        if write_item.type == WriteItemType.BYTE_IO:
            buffer = io.BytesIO()
            torch.save(value, buffer)
            return buffer
        chunk = write_item.tensor_data.chunk
        if isinstance(value, StagedTensor):
            return value.copies[tuple(chunk.offsets)]
        return _narrow(value.detach(), chunk.offsets, chunk.sizes)


class ShardedStager(AsyncStager):
    """async_save's snapshot of a state dict, taken synchronously before async_save returns:
    each tensor becomes a StagedTensor holding copies of only the pieces this process will
    write (``assign_writers``, computed here without a collective: about 1/P of the state in
    each of P processes instead of all of it); every other value is deep-copied.

    ``reuse_buffers``: copy into the previous snapshot's pieces when the state has the same
    entries, shapes, dtypes and shardings (fresh memory costs page faults, often more than
    the copy); the previous save must be finished (its future's result taken) before the
    next one."""
    _synchronize_after_execute = False

    def __init__(self, reuse_buffers: bool = False):
        self.reuse_buffers = reuse_buffers
        # (signature, layouts, pieces of this process, snapshot) of the previous stage
        self._previous = None

    def stage(self, state_dict):
        leaves, paths = flatten_state(state_dict)
        signature = ({fqn: _signature(value) for fqn, value in leaves.items()}, paths)
        if self._previous is not None and self._previous[0] == signature:
            _, layouts, mine, previous = self._previous  # no pieces to cut again
        else:
            layouts = {fqn: _layout(value) for fqn, value in leaves.items()}
            me = distributed.process_index()
            mine = {key for key, writer in assign_writers(_tensor_offers(layouts)).items()
                    if writer == me}
            previous = None
        snapshot = _snapshot(state_dict, (), layouts, mine, previous)
        if self.reuse_buffers:
            self._previous = (signature, layouts, mine, snapshot)
        return snapshot

    def synchronize_staging(self) -> None:
        """Nothing to wait for: ``stage`` copies before it returns."""

    def close(self) -> None:
        """Nothing held between saves."""


def _signature(value):
    """What a value's layout depends on (cheap to take; None for values that are no
    tensors)."""
    if isinstance(value, torch.Tensor):
        return (value.shape, value.dtype, value.layout, value.requires_grad,
                xs.get_sharding(value))
    return None


def _snapshot(value, path: tuple, layouts: dict, mine: set, previous):
    """``value`` (at key path ``path`` of the state) staged: its pieces in ``mine`` copied
    into ``previous`` (the earlier snapshot of the same layout) when given, else into new
    memory."""
    if isinstance(value, Mapping):
        return {key: _snapshot(item, path + (key,), layouts, mine,
                               None if previous is None else previous[key])
                for key, item in value.items()}
    if not isinstance(value, torch.Tensor):
        return copy.deepcopy(value)
    fqn = ".".join(map(str, path))
    layout = layouts[fqn]
    copies = {} if previous is None else previous.copies
    for piece in layout.pieces:
        if (fqn, piece.offsets) in mine:
            source = _narrow(value.detach(), piece.offsets, piece.sizes)
            if previous is None:
                copies[piece.offsets] = source.clone(memory_format=torch.contiguous_format)
            else:
                copies[piece.offsets].copy_(source)
    return StagedTensor(layout, copies) if previous is None else previous


def save(state: dict, path, process_group=None):
    """``dcp.save`` of ``state`` into directory ``path`` with ShardedSavePlanner."""
    return dcp.save(state, checkpoint_id=os.fspath(path), planner=ShardedSavePlanner(),
                    process_group=process_group)


def async_save(state: dict, path, process_group=None, stager: Optional[ShardedStager] = None):
    """``dcp.async_save`` with ShardedSavePlanner and ``stager`` (default: a new
    ShardedStager): returns once ``state`` is copied; the future's ``result()`` waits for the
    write. The process group needs a CPU backend (gloo); the next save must wait for this
    one's future."""
    return dcp.async_save(state, checkpoint_id=os.fspath(path), planner=ShardedSavePlanner(),
                          async_stager=stager or ShardedStager(), process_group=process_group)


# ---- loading -------------------------------------------------------------------------------

def _check_target(leaves: dict, metadata: Metadata, where: str) -> None:
    """Raise CheckpointError when a target entry is not in the checkpoint, or differs from
    the saved one in kind or global shape, or its saved chunks do not cover it."""
    saved = metadata.state_dict_metadata
    for fqn, target in leaves.items():
        entry = saved.get(fqn)
        if entry is None:
            near = ", ".join(sorted(saved)[:8])
            raise CheckpointError(f"checkpoint {where}: no entry {fqn!r} (it has {len(saved)} "
                                  f"entries: {near}{', ...' if len(saved) > 8 else ''})")
        if isinstance(target, torch.Tensor) != isinstance(entry, TensorStorageMetadata):
            kind = "a tensor" if isinstance(entry, TensorStorageMetadata) else "not a tensor"
            raise CheckpointError(f"checkpoint {where}: entry {fqn!r} is {kind} there but the "
                                  f"target's is a {type(target).__name__}")
        if not isinstance(target, torch.Tensor):
            continue
        if tuple(entry.size) != tuple(target.shape):
            raise CheckpointError(f"checkpoint {where}: entry {fqn!r} has shape "
                                  f"{tuple(entry.size)} there but {tuple(target.shape)} in the "
                                  f"target")
        covered = sum(int(np.prod(chunk.sizes)) for chunk in entry.chunks)
        if covered != target.numel():
            raise CheckpointError(f"checkpoint {where}: the saved chunks of {fqn!r} hold "
                                  f"{covered} of its {target.numel()} elements")


class ShardedLoadPlanner(LoadPlanner):
    """Fills every target tensor in place from the saved chunks (any sharding on either side;
    each process holds its tensors full-size, so it reads every chunk once); other values
    replace the target's."""

    def set_up_planner(self, state_dict, metadata: Optional[Metadata] = None,
                       is_coordinator: bool = False) -> None:
        self._state = state_dict
        self._leaves, self._paths = flatten_state(state_dict)
        self._metadata = metadata
        _check_target(self._leaves, metadata, "being loaded")

    def create_local_plan(self) -> LoadPlan:
        items = []
        saved = self._metadata.state_dict_metadata
        for fqn, target in self._leaves.items():
            if not isinstance(target, torch.Tensor):
                items.append(ReadItem(type=LoadItemType.BYTE_IO, dest_index=MetadataIndex(fqn),
                                      dest_offsets=torch.Size(()),
                                      storage_index=MetadataIndex(fqn),
                                      storage_offsets=torch.Size(()), lengths=torch.Size(())))
                continue
            origin = torch.Size((0,) * target.dim())
            for chunk in saved[fqn].chunks:
                items.append(ReadItem(type=LoadItemType.TENSOR,
                                      dest_index=MetadataIndex(fqn, origin),
                                      dest_offsets=torch.Size(chunk.offsets),
                                      storage_index=MetadataIndex(fqn, chunk.offsets),
                                      storage_offsets=origin, lengths=torch.Size(chunk.sizes)))
        return LoadPlan(items)

    def create_global_plan(self, global_plan: list) -> list:
        return global_plan

    def finish_plan(self, central_plan: LoadPlan) -> LoadPlan:
        return central_plan

    def load_bytes(self, read_item: ReadItem, value: io.BytesIO) -> None:
        loaded = torch.load(value, weights_only=False)
        *parents, last = self._paths[read_item.dest_index.fqn]
        holder = self._state
        for key in parents:
            holder = holder[key]
        holder[last] = loaded

    def resolve_tensor(self, read_item: ReadItem) -> torch.Tensor:
        target = self._leaves[read_item.dest_index.fqn]
        return _narrow(target.detach(), read_item.dest_offsets, read_item.lengths)

    def commit_tensor(self, read_item: ReadItem, tensor: torch.Tensor) -> None:
        """Nothing to do: ``tensor`` is a view of the target, filled in place."""


def load(state: dict, path, process_group=None) -> None:
    """Fill ``state`` (e.g. ``training_state(model, optimizer)``) from the checkpoint at
    ``path`` with ShardedLoadPlanner, after checking that it is complete (else
    IncompleteCheckpointError) and that it has every entry of ``state`` (else
    CheckpointError)."""
    path = os.fspath(path)
    require_complete(path)
    metadata = dcp.FileSystemReader(path).read_metadata()
    _check_target(flatten_state(state)[0], metadata, path)
    dcp.load(state, checkpoint_id=path, planner=ShardedLoadPlanner(),
             process_group=process_group)
