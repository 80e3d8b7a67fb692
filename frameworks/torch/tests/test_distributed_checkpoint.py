"""torch.distributed.checkpoint for mark_sharding state (frameworks/torch/checkpoint.py): the
pieces each process writes, one writer per piece, loads into other shardings, the latest
complete checkpoint; and a 2-process torchrun (2 devices each) that saves, async-saves,
reshards on load, resumes with the uninterrupted run's next-step loss and is killed in the
middle of a save (distributed_checkpoint_worker.py)."""
import json
import os
import re

import numpy as np
import pytest
import torch
import torch.distributed.checkpoint as dcp

from frameworks.torch import checkpoint as ckpt
from frameworks.torch import distributed
from frameworks.torch import sharding as xs
from frameworks.torch.tests import distributed_checkpoint_worker
from frameworks.torch.tests.torchrun_worker import TinyTransformer, shard
from pjrt.plugins.cpu.native_module import native

needs_gloo = pytest.mark.skipif(not native().HAVE_GLOO, reason="built without gloo")

TORCHRUN_TIMEOUT_S = 300.0
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
# (name, dimension split over "model") of the tensors shard() splits, momentum included
SPLIT = {"fc1.weight": 0, "fc1.bias": 0, "fc2.weight": 1}


# without a process group DCP warns that it assumes one process: that is meant here
pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled")


def as_process(monkeypatch, rank: int, world: int = 2) -> None:
    """Make distributed.py see a torchrun process ``rank`` of ``world``."""
    for name, value in (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "1"),
                        ("RANK", str(rank)), ("WORLD_SIZE", str(world))):
        monkeypatch.setenv(name, value)


def sharded_state(seed: int = 0, shard_fn=shard):
    torch.manual_seed(seed)
    model = TinyTransformer()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    shard_fn(model, distributed_checkpoint_worker.make_mesh())
    return model, optimizer, ckpt.training_state(model, optimizer)


def tensors(state: dict) -> dict:
    leaves, _ = ckpt.flatten_state(state)
    return {k: v.clone() for k, v in leaves.items() if isinstance(v, torch.Tensor)}


def test_pieces_follow_the_sharding_and_the_processes_holding_them(monkeypatch):
    as_process(monkeypatch, 0)
    model, _, _ = sharded_state()
    # "model" (major mesh axis) index m is devices 2m, 2m+1: process m
    assert ckpt.pieces(model.fc1.weight) == [
        ckpt.Piece((0, 0), (16, 16), frozenset({0})), ckpt.Piece((16, 0), (16, 16), frozenset({1}))]
    assert ckpt.pieces(model.fc2.weight) == [
        ckpt.Piece((0, 0), (16, 16), frozenset({0})), ckpt.Piece((0, 16), (16, 16), frozenset({1}))]
    assert ckpt.pieces(model.head.weight) == [ckpt.Piece((0, 0), (1, 16), frozenset({0, 1}))]
    mesh = xs.Mesh(np.arange(4), (2, 2), ("data", "model"))  # "model" inside each process
    xs.mark_sharding(model.fc1.weight, mesh, ("model", None))
    assert [p.processes for p in ckpt.pieces(model.fc1.weight)] == [frozenset({0, 1})] * 2


def test_the_momentum_is_sharded_like_its_parameter():
    model, optimizer, state = sharded_state()
    for name in SPLIT:
        assert xs.get_sharding(state["optim"]["state"][name]["momentum_buffer"]) == \
            xs.get_sharding(model.get_parameter(name))
    assert xs.get_sharding(state["optim"]["state"]["head.weight"]["momentum_buffer"]) is None


def test_each_piece_has_one_writer_among_the_processes_holding_it(monkeypatch):
    local_plans = []
    model, _, state = sharded_state()  # the model holds the shardings: it must live
    for rank in (0, 1):
        as_process(monkeypatch, rank)
        planner = ckpt.ShardedSavePlanner()
        planner.set_up_planner(state, is_coordinator=rank == 0)
        local_plans.append(planner.create_local_plan())
    offered = [{item.index for item in plan.items} for plan in local_plans]
    plans, metadata = planner.create_global_plan(local_plans)
    written = [[item.index for item in plan.items] for plan in plans]
    everything = [index for indices in written for index in indices]
    assert len(everything) == len(set(everything))  # nobody writes a piece twice
    assert all(set(indices) <= offered[rank] for rank, indices in enumerate(written))
    for prefix in ("model.", "optim.state."):
        for name, dim in SPLIT.items():
            fqn = prefix + name + (".momentum_buffer" if prefix == "optim.state." else "")
            for rank in (0, 1):
                offset = [0] * (2 if name.endswith("weight") else 1)
                offset[dim] = 16 * rank
                assert dcp.metadata.MetadataIndex(fqn, offset) in written[rank]
    # the replicated tensors are shared out: both write some
    sizes = [sum(i.tensor_storage_size() or 0 for i in p.items) for p in plans]
    assert min(sizes) > 0.4 * max(sizes)
    # the metadata covers every tensor once
    for fqn, entry in metadata.state_dict_metadata.items():
        if isinstance(entry, dcp.metadata.TensorStorageMetadata):
            assert sum(int(np.prod(c.sizes)) for c in entry.chunks) == int(np.prod(entry.size))


def test_a_one_process_round_trip_into_another_sharding(tmp_path):
    saved_model, _, state = sharded_state(0)
    for per_parameter in state["optim"]["state"].values():
        per_parameter["momentum_buffer"].normal_()  # as after some steps
    saved = tensors(state)
    path = ckpt.checkpoint_path(tmp_path, 7)
    ckpt.save(state, path)
    assert ckpt.is_complete(path) and ckpt.latest_checkpoint(tmp_path) == path
    chunks = dcp.FileSystemReader(path).read_metadata().state_dict_metadata
    assert len(chunks["optim.state.fc1.weight.momentum_buffer"].chunks) == 2  # saved sharded
    model, optimizer, target = sharded_state(1, distributed_checkpoint_worker.shard_other_way)
    optimizer.param_groups[0]["lr"] = 0.5
    assert not torch.equal(tensors(target)["model.fc1.weight"], saved["model.fc1.weight"])
    ckpt.load(target, path)
    ckpt.apply_training_state(model, optimizer, target)
    got = tensors(ckpt.training_state(model, optimizer))
    assert sorted(got) == sorted(saved)
    for fqn in saved:
        assert torch.equal(got[fqn], saved[fqn]), fqn
    assert optimizer.param_groups[0]["lr"] == 0.1  # the saved hyperparameters
    assert xs.get_sharding(model.fc1.weight).dims == ((), ("model",))  # its own sharding kept


def test_saving_over_a_complete_checkpoint_is_refused(tmp_path):
    model, _, state = sharded_state()
    path = ckpt.checkpoint_path(tmp_path, 1)
    ckpt.save(state, path)
    with pytest.raises(dcp.api.CheckpointException, match="already holds a complete"):
        ckpt.save(state, path)


def test_latest_checkpoint_skips_incomplete_ones(tmp_path):
    assert ckpt.latest_checkpoint(tmp_path / "none") is None
    for step, complete in ((3, True), (12, True), (40, False)):
        path = ckpt.checkpoint_path(tmp_path, step)
        os.makedirs(path)
        (tmp_path / os.path.basename(path) / "__0_0.distcp").write_bytes(b"x")
        if complete:
            (tmp_path / os.path.basename(path) / ".metadata").write_bytes(b"x")
    (tmp_path / "notes").mkdir()
    assert ckpt.latest_checkpoint(tmp_path) == ckpt.checkpoint_path(tmp_path, 12)
    with pytest.raises(ckpt.IncompleteCheckpointError,
                       match=r"step_00000040 is incomplete.*latest complete .*step_00000012"):
        ckpt.load({}, ckpt.checkpoint_path(tmp_path, 40))
    with pytest.raises(ckpt.CheckpointError, match="no such directory"):
        ckpt.require_complete(tmp_path / "missing")


def test_loading_into_a_state_the_checkpoint_does_not_fit_names_the_entry(tmp_path):
    model, _, state = sharded_state()
    path = ckpt.checkpoint_path(tmp_path, 1)
    ckpt.save(state, path)
    with pytest.raises(ckpt.CheckpointError, match="no entry 'model.extra'"):
        ckpt.load({"model": {"extra": torch.zeros(2)}}, path)
    with pytest.raises(ckpt.CheckpointError,
                       match=r"'model.fc1.weight' has shape \(32, 16\) there but \(16, 32\)"):
        ckpt.load({"model": {"fc1.weight": torch.zeros(16, 32)}}, path)


@needs_gloo
def test_two_processes_save_reshard_async_save_resume_and_interruption(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OPENHLO_COLLECTIVE_TIMEOUT_S="60")
    finished = distributed.torchrun(["-m", "frameworks.torch.tests.distributed_checkpoint_worker",
                                     str(tmp_path)], nproc_per_node=2,
                                    timeout_s=TORCHRUN_TIMEOUT_S, env=env)
    # process 1 was killed in the last save, on purpose; everything before it finished
    assert (tmp_path / "interrupted").exists(), finished.stderr[-4000:]
    assert finished.returncode != 0
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["device_processes_agree"]
    losses = result["losses"]
    assert result["resharded_difference"] == 0.0 and result["async_difference"] == 0.0
    # resuming from step 2 (another sharding) and from step 3 (async save, state changed
    # during the write) gives the uninterrupted run's next loss
    np.testing.assert_allclose(result["resharded_next_loss"], losses[2], rtol=1e-5)
    np.testing.assert_allclose(result["resumed_next_loss"], losses[3], rtol=1e-6)

    root = tmp_path / "ckpt"
    step_2 = ckpt.checkpoint_path(root, 2)
    check_each_process_wrote_its_own_pieces_once(step_2)

    # an unsharded load in this one process gives the saved values
    torch.manual_seed(9)
    model = TinyTransformer()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    state = ckpt.training_state(model, optimizer)
    ckpt.load(state, step_2)
    saved = torch.load(tmp_path / "step_2.pt")
    got = tensors(state)
    assert sorted(got) == sorted(saved)
    for fqn in saved:
        assert torch.equal(got[fqn], saved[fqn]), fqn

    # the interrupted save is never taken for a complete one
    step_4 = ckpt.checkpoint_path(root, 4)
    assert os.listdir(step_4) and not ckpt.is_complete(step_4)
    assert ckpt.latest_checkpoint(root) == ckpt.checkpoint_path(root, 3)
    with pytest.raises(ckpt.IncompleteCheckpointError, match="interrupted"):
        ckpt.load(state, step_4)


def check_each_process_wrote_its_own_pieces_once(path: str) -> None:
    metadata = dcp.FileSystemReader(path).read_metadata()
    by_file: dict = {}
    for index, info in metadata.storage_data.items():
        by_file.setdefault(info.relative_path, []).append((index, info))
    written_by = {}
    for name, entries in by_file.items():
        rank = int(re.match(r"__(\d+)_\d+\.distcp$", name).group(1))
        # the file holds its entries and nothing else
        assert os.path.getsize(os.path.join(path, name)) == sum(i.length for _, i in entries)
        for index, _ in entries:
            written_by[(index.fqn, tuple(index.offset or ()))] = rank
    for fqn, entry in metadata.state_dict_metadata.items():
        if not isinstance(entry, dcp.metadata.TensorStorageMetadata):
            continue
        name = fqn.removeprefix("model.").removeprefix("optim.state.")
        name = name.removesuffix(".momentum_buffer")
        for chunk in entry.chunks:
            rank = written_by[(fqn, tuple(chunk.offsets))]
            if name in SPLIT:  # only the process holding the piece wrote it
                assert rank == chunk.offsets[SPLIT[name]] // 16, (fqn, chunk)
            else:
                assert tuple(chunk.sizes) == tuple(entry.size)
    assert set(written_by.values()) == {0, 1}


def staged_tensors(staged: dict) -> dict:
    """``{(fqn, offsets): copy}`` of a ShardedStager snapshot."""
    leaves, _ = ckpt.flatten_state(staged)
    return {(fqn, offsets): copy for fqn, value in leaves.items()
            if isinstance(value, ckpt.StagedTensor) for offsets, copy in value.copies.items()}


def test_each_process_stages_only_the_pieces_the_global_plan_has_it_write(monkeypatch):
    model, _, state = sharded_state()
    for per_parameter in state["optim"]["state"].values():
        per_parameter["momentum_buffer"].normal_()
    live = tensors(state)
    staged, local_plans = [], []
    for rank in (0, 1):
        as_process(monkeypatch, rank)
        staged.append(ckpt.ShardedStager().stage(state))
        planner = ckpt.ShardedSavePlanner()
        planner.set_up_planner(staged[rank], is_coordinator=rank == 0)
        local_plans.append(planner.create_local_plan())
        # a snapshot offers what the live state offers: every piece this process holds
        planner_live = ckpt.ShardedSavePlanner()
        planner_live.set_up_planner(state, is_coordinator=rank == 0)
        assert local_plans[rank].items == planner_live.create_local_plan().items
    plans, _ = planner.create_global_plan(local_plans)
    everything = set()
    for rank in (0, 1):
        copies = staged_tensors(staged[rank])
        written = {(item.index.fqn, tuple(item.index.offset)) for item in plans[rank].items
                   if item.type != dcp.planner.WriteItemType.BYTE_IO}
        assert set(copies) == written  # no collective, yet the coordinator's choice
        for (fqn, offsets), copy in copies.items():
            piece = live[fqn][tuple(slice(o, o + n) for o, n in zip(offsets, copy.shape))]
            assert torch.equal(copy, piece) and copy.data_ptr() != live[fqn].data_ptr()
            everything.add((fqn, offsets))
        assert copies and staged[rank]["optim"]["param_groups"] == state["optim"]["param_groups"]
    assert len(everything) == sum(len(staged_tensors(s)) for s in staged)  # each piece once
    with torch.no_grad():  # the staged pieces of both processes make up the whole state
        for fqn, value in live.items():
            value.zero_()
        for s in staged:
            for (fqn, offsets), copy in staged_tensors(s).items():
                live[fqn][tuple(slice(o, o + n) for o, n in zip(offsets, copy.shape))] += copy
    for fqn, value in tensors(state).items():
        assert torch.equal(live[fqn], value), fqn


def test_the_stager_copies_into_its_previous_snapshot():
    model, _, state = sharded_state()  # one process: it writes every piece
    stager = ckpt.ShardedStager(reuse_buffers=True)
    first = stager.stage(state)["model"]["fc1.weight"]
    assert sorted(first.copies) == [(0, 0), (16, 0)]
    top = first.copies[(0, 0)]
    assert torch.equal(top, model.fc1.weight[:16]) and top.data_ptr() != \
        model.fc1.weight.data_ptr()
    with torch.no_grad():
        model.fc1.weight.add_(1.0)  # training goes on: the snapshot must not see it
    assert not torch.equal(top, model.fc1.weight[:16])
    second = stager.stage(state)["model"]["fc1.weight"]
    assert second is first and second.copies[(0, 0)] is top
    assert torch.equal(top, model.fc1.weight[:16])
    xs.mark_sharding(model.fc1.weight, distributed_checkpoint_worker.make_mesh(),
                     (None, "model"))
    third = stager.stage(state)["model"]["fc1.weight"]  # another layout: new pieces
    assert third is not first and sorted(third.copies) == [(0, 0), (0, 8)]
