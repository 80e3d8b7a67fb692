"""Distributed asynchronous checkpointing with orbax on openhlo: 2 processes x 2 devices
joined by ``jax.distributed`` on the loopback address train a small data-parallel model and
save its sharded state (f32, bf16, int32; sharded and replicated) with an asynchronous
``orbax.checkpoint.CheckpointManager``.

* Every process writes only shards it holds, and together they write each element once.
* Restoring gives the saved values (numpy) into the same shardings and into other shardings
  on another mesh, even though every save was followed by a step that donated (overwrote)
  the arrays being saved.
* A save whose processes are SIGKILLed mid-write is never taken for a checkpoint: a new
  manager names the last complete step, and training resumed from it has the next-step
  loss of the uninterrupted run.

The processes (orbax_checkpoint_worker.py) are started by frameworks.jax.distributed.launch
(bounded in time, every process stopped).
"""
from __future__ import annotations

import json
import pickle
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from frameworks.jax.tests import orbax_checkpoint_worker as worker
from frameworks.jax.tests import jax_subprocess
from pjrt.plugins.cpu.native_module import native

pytestmark = [jax_subprocess.pytestmark,  # the plugin library is built
              pytest.mark.skipif(not native().HAVE_GLOO, reason="built without gloo")]

PROCESSES, DEVICES = 2, 2
LAUNCH_TIMEOUT_S = 300.0


@dataclass
class Run:
    checkpoints: Path
    results: list  # per process: what the worker pickled


def _launch(mode: str, checkpoints: Path, out: Path) -> None:
    from frameworks.jax import distributed
    distributed.launch(["-m", worker.__name__, mode, str(checkpoints), str(out)], PROCESSES,
                       DEVICES, LAUNCH_TIMEOUT_S)


def _results(mode: str, out: Path) -> list:
    results = []
    for process in range(PROCESSES):
        with open(out / f"{mode}.{process}.pkl", "rb") as f:
            results.append(pickle.load(f))
    return results


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out, checkpoints = (tmp_path_factory.mktemp(name) for name in ("out", "reference"))
    _launch("reference", checkpoints, out)
    return Run(checkpoints, _results("reference", out))


@dataclass
class Interrupted:
    checkpoints: Path
    after_kill: list  # the names in the checkpoint directory once the processes were killed
    error: str  # what the launcher raised
    resumed: list  # per process: what the resume worker pickled


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
    from pjrt.errors import ExecutionError
    out, checkpoints = (tmp_path_factory.mktemp(name) for name in ("out", "interrupted"))
    with pytest.raises(ExecutionError) as killed:
        _launch("interrupted", checkpoints, out)
    after_kill = sorted(path.name for path in checkpoints.iterdir())
    _launch("resume", checkpoints, out)
    return Interrupted(checkpoints, after_kill, str(killed.value), _results("resume", out))


def _ballast(step: int) -> np.ndarray:
    return worker.initial_state()["ballast"] + np.float32(step)


def _check(shards_by_process: list, expected: np.ndarray, name: str) -> None:
    """Every shard equals ``expected`` over its index (CRC-32 for digested shards), and the
    shards cover every element."""
    covered = np.zeros(expected.shape, bool)
    for process, shards in enumerate(shards_by_process):
        for index, _, data in shards:
            region = tuple(slice(start, stop) for start, stop in index)
            want = np.ascontiguousarray(expected[region])
            if isinstance(data, int):
                assert data == zlib.crc32(want.tobytes()), f"{name}: process {process} {index}"
            else:
                assert data.dtype == expected.dtype, name
                np.testing.assert_array_equal(data.astype(np.float64),
                                              want.astype(np.float64), err_msg=name)
            covered[region] = True
    assert covered.all(), f"{name}: not covered by the processes' shards"


def _glued(shards_by_process: list, like: np.ndarray) -> np.ndarray:
    out = np.zeros_like(like)
    for shards in shards_by_process:
        for index, _, data in shards:
            out[tuple(slice(start, stop) for start, stop in index)] = data
    return out


def _saved_state(reference: Run, step: int) -> dict:
    """The state as it was when step ``step`` was saved (the ballast from numpy)."""
    state = {}
    for name, like in worker.initial_state().items():
        if name == "ballast":
            state[name] = _ballast(step)
        else:
            state[name] = _glued([r["saved"][step][name] for r in reference.results], like)
    return state


def test_every_async_save_completes(reference):
    for result in reference.results:
        assert result["all_steps"] == list(range(worker.STEPS + 1))


def test_shards_carry_one_replica_id_per_copy(reference):
    # orbax writes a shard from the device whose replica_id is 0 (or splits the copies)
    for name in worker.initial_state():
        copies = {}
        for result in reference.results:
            for index, replica_id, _ in result["saved"][0][name]:
                copies.setdefault(index, []).append(replica_id)
        assert sum(len(ids) for ids in copies.values()) == PROCESSES * DEVICES, name
        for ids in copies.values():
            assert sorted(ids) == list(range(len(ids))), name


def test_each_process_writes_only_shards_it_holds(reference):
    import tensorstore as ts
    root = reference.checkpoints / "0" / "default"

    def keys(path: Path) -> list:
        store = ts.KvStore.open({"driver": "ocdbt", "base": f"file://{path}"}).result()
        return [key.decode() for key in store.list().result()]

    merged = ts.KvStore.open({"driver": "ocdbt", "base": f"file://{root}"}).result()
    written = {}
    for process in range(PROCESSES):
        held = {name: [index for index, _, _ in shards]
                for name, shards in reference.results[process]["saved"][0].items()}
        for key in keys(root / f"ocdbt.process_{process}"):
            name, chunk = key.split("/")
            if chunk == ".zarray":
                continue
            chunks = json.loads(merged.read(f"{name}/.zarray").result().value)["chunks"]
            region = tuple((int(i) * size, (int(i) + 1) * size)
                           for i, size in zip(chunk.split(".") if chunks else (), chunks))
            assert any(all(start <= lo and hi <= stop for (lo, hi), (start, stop)
                           in zip(region, index)) for index in held[name]), \
                f"process {process} wrote {key}, which it does not hold"
            assert key not in written, f"{key} written by processes {written[key]}, {process}"
            written[key] = process
    for name, value in worker.initial_state().items():
        chunks = json.loads(merged.read(f"{name}/.zarray").result().value)["chunks"]
        count = int(np.prod([-(-dim // size) for dim, size in zip(value.shape, chunks)]))
        assert sum(key.startswith(f"{name}/") for key in written) == count, name


def test_restore_into_the_same_shardings_gives_the_saved_values(reference):
    # steps 1 and 3 donated (overwrote) the arrays of saves 0 and 2 while they were written
    for name, step in (("same_0", 0), ("same_2", 2)):
        expected = _saved_state(reference, step)
        for key, value in expected.items():
            _check([r["restored"][name][key] for r in reference.results], value,
                   f"{name} {key}")
            saved_indices = sorted(i for r in reference.results for i, _, _ in r["saved"][0][key])
            assert sorted(i for r in reference.results
                          for i, _, _ in r["restored"][name][key]) == saved_indices, key


def test_restore_into_other_shardings_on_another_mesh(reference):
    from jax.sharding import PartitionSpec as P
    want_specs = {k: tuple(spec) for k, spec in worker.restore_specs(P).items()}
    for key, value in worker.initial_state().items():
        shards = [r["restored"]["other_0"][key] for r in reference.results]
        _check(shards, value, f"other_0 {key}")
        for result in reference.results:
            assert result["restored_specs"]["other_0"][key] == want_specs[key]
        if want_specs[key][:1] == ("d",):
            # mesh d is every device in reverse order: process 1 holds the first half
            rows = value.shape[0]
            assert sorted(i[0] for i, _, _ in shards[1]) == [(0, rows // 4), (rows // 4, rows // 2)]
            assert sorted(i[0] for i, _, _ in shards[0]) == [(rows // 2, 3 * rows // 4),
                                                             (3 * rows // 4, rows)]


def test_interrupted_save_is_never_taken_for_a_checkpoint(interrupted):
    assert "exit status -9" in interrupted.error  # SIGKILL
    # the kill landed during step 2's write: its temporary directory is there, unfinished
    assert "2" not in interrupted.after_kill
    assert any(name.startswith("2.") for name in interrupted.after_kill), interrupted.after_kill
    for resumed in interrupted.resumed:
        assert resumed["latest_step"] == 1
        assert resumed["all_steps"] == [0, 1]


def test_training_resumes_from_the_last_complete_checkpoint(reference, interrupted):
    expected = _saved_state(reference, 1)
    for key, value in expected.items():
        _check([r["restored"][key] for r in interrupted.resumed], value, f"resumed {key}")
    for resumed in interrupted.resumed:
        assert resumed["next_step"] == 2
        # the same program on the same values: the same bits
        assert resumed["loss"] == reference.results[0]["losses"][2]
