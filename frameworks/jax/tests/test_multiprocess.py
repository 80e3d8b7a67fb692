"""jax.distributed on openhlo: 2 and 4 processes x 2 devices, joined by
``jax.distributed.initialize`` on the loopback address (the plugin's multi-process client,
pjrt/c_api), see the global topology and run shard_map collectives over a (process, local)
mesh (f32, bf16, f16, int32), a jitted data-parallel step, Megatron MLPs (forward and
gradients) and programs on arrays made from process-local data; the results, assembled
from every process's shards, equal numpy's; ``multihost_utils`` gathers and syncs, and every
process exits 0. A process that leaves before a collective makes the other raise an error
naming it, and exit (JAX's shutdown bounded).

The processes are started by frameworks.jax.distributed.launch (bounded in time, all
stopped) and run multiprocess_jax_worker.py once per process count, and once per fault test.
"""
from __future__ import annotations

import json
import os
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from frameworks.jax.tests import jax_subprocess
from frameworks.jax.tests import multiprocess_jax_worker as worker
from pjrt.plugins.cpu.native_module import native

pytestmark = [jax_subprocess.pytestmark,  # the plugin library is built
              pytest.mark.skipif(not native().HAVE_GLOO, reason="built without gloo")]

DEVICES = 2  # per process
LAUNCH_TIMEOUT_S = 400.0


@dataclass
class Job:
    out: Path
    processes: int

    @property
    def size(self) -> int:
        return self.processes * DEVICES


@pytest.fixture(scope="module", params=[2, 4], ids=lambda n: f"{n}_processes")
def job(request, tmp_path_factory):
    from frameworks.jax.distributed import launch
    processes = request.param
    out = tmp_path_factory.mktemp(f"jax_{processes}_processes")
    # launch raises (naming the process and quoting its stderr) unless every process exits 0
    launch(["-m", worker.__name__, str(out)], processes, DEVICES, LAUNCH_TIMEOUT_S)
    return Job(out, processes)


def _assemble(job: Job, name: str) -> list:
    """The global results of ``name`` from every process's shards; asserts the shards that
    several devices hold agree and that they cover every element."""
    per_process = []
    for process in range(job.processes):
        with open(job.out / f"{name}.{process}.pkl", "rb") as f:
            per_process.append(pickle.load(f))
    results = []
    for k in range(len(per_process[0])):
        shards = [shard for process in per_process for shard in process[k]]
        shape = tuple(max(stop for _, stop in (index[d] for index, _ in shards))
                      for d in range(len(shards[0][0])))
        glued = np.zeros(shape, shards[0][1].dtype)
        covered = np.zeros(shape, bool)
        for index, data in shards:
            region = tuple(slice(start, stop) for start, stop in index)
            if covered[region].any():
                np.testing.assert_array_equal(glued[region][covered[region]],
                                              data[covered[region]])
            glued[region] = data
            covered[region] = True
        assert covered.all(), f"{name}: result {k} not covered by the processes' shards"
        results.append(glued)
    return results


def test_jax_sees_every_process_devices(job):
    for process in range(job.processes):
        seen = json.loads((job.out / f"topology.{process}.json").read_text())
        assert seen["platform"] == "openhlo"
        assert seen["devices"] == [[i, i // DEVICES] for i in range(job.size)]
        assert seen["local_devices"] == [process * DEVICES + i for i in range(DEVICES)]
        assert seen["process_index"] == process
        assert seen["process_count"] == job.processes


def _expected(name: str, x: np.ndarray, processes: int) -> np.ndarray:
    size = processes * DEVICES
    b = x.astype(np.float64) if x.dtype == np.float32 else x.astype(np.int64)
    b = b.reshape(size, -1, *x.shape[1:])  # device k's block (k = process * DEVICES + local)
    grid = b.reshape(processes, DEVICES, *b.shape[1:])
    kind = name.split(".")[0]
    if kind == "psum":
        return np.concatenate([b.sum(0)] * size)
    if kind == "psum_processes":  # device (p, l) sums the blocks of every (q, l)
        return np.concatenate([grid.sum(0)[k % DEVICES] for k in range(size)])
    if kind == "all_gather":
        return np.concatenate([np.concatenate(list(b))] * size)
    if kind == "psum_scatter":
        return b.sum(0)
    if kind == "ppermute":  # block k goes to device k + 1
        return np.concatenate([b[(k - 1) % size] for k in range(size)])
    if kind == "ppermute_processes":  # device (p, l) gets the block of (p - 1, l)
        return np.concatenate([grid[(k // DEVICES - 1) % processes, k % DEVICES]
                               for k in range(size)])
    if kind == "all_to_all":  # device j gets chunk j of every device's block, in order
        pieces = b.reshape(size, size, -1, *b.shape[2:])  # [device, chunk]
        return np.concatenate([pieces[k, j] for j in range(size) for k in range(size)])
    raise AssertionError(name)


COLLECTIVES = [f"{kind}.{dtype}" for kind in ("psum", "psum_processes", "all_gather",
                                              "psum_scatter", "ppermute",
                                              "ppermute_processes", "all_to_all")
               for dtype in worker.DTYPES]
RESULT_DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16", "int32": "int32"}


@pytest.mark.parametrize("name", COLLECTIVES)
def test_shard_map_collectives_across_processes_match_numpy(job, name):
    x = worker.inputs(name, job.size)["x"]
    (result,) = _assemble(job, name)
    assert result.dtype.name == RESULT_DTYPES[name.rsplit(".", 1)[-1]]
    expected = _expected(name, x, job.processes)
    if name.endswith(".f32"):
        np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)
    else:  # integers, and small integers in bf16/f16: exact
        np.testing.assert_array_equal(result.astype(np.float64), expected)


def test_data_parallel_step_matches_numpy(job):
    values = worker.inputs("step", job.size)
    x, y, w = (values[k].astype(np.float64) for k in ("x", "y", "w"))
    error = x @ w - y
    expected_w = w - worker.LEARNING_RATE * 2 * x.T @ error / error.size
    new_w, loss = _assemble(job, "step")
    np.testing.assert_allclose(new_w, expected_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(loss, np.mean(error ** 2), rtol=1e-5)


def _megatron_expected(values: dict) -> list:
    """The MLP's output, loss and weight gradients in float64 (the backward pass by hand)."""
    x, t, w1, w2 = (values[k].astype(np.float64) for k in ("x", "t", "w1", "w2"))
    a = np.tanh(x @ w1)
    y = a @ w2
    dy = 2 * (y - t) / y.size
    return [y, np.mean((y - t) ** 2), x.T @ (dy @ w2.T * (1 - a ** 2)), a.T @ dy]


@pytest.mark.parametrize("name", sorted(worker.MEGATRON))
def test_megatron_mlp_forward_and_gradients_match_numpy(job, name):
    """Column-parallel w1, row-parallel w2 over the "model" axis, the batch over the other:
    the layers' partial sums are all-reduced within each process (model over "l") or across
    the processes (model over "p")."""
    got = _assemble(job, name)
    dtype = name.rsplit(".", 1)[-1]
    assert [r.dtype.name for r in got] == [RESULT_DTYPES[dtype]] * 4
    for what, result, expected in zip(("y", "loss", "dw1", "dw2"), got,
                                      _megatron_expected(worker.inputs(name, job.size))):
        result = result.astype(np.float64)
        assert result.shape == np.shape(expected), what
        if dtype == "f32":
            np.testing.assert_allclose(result, expected, rtol=1e-4, atol=1e-5, err_msg=what)
        else:  # bf16 keeps 8 significant bits: within 3% of the largest magnitude
            scale = np.max(np.abs(expected))
            np.testing.assert_allclose(result, expected, rtol=0, atol=0.03 * scale,
                                       err_msg=what)


@pytest.mark.parametrize("name", ["process_local_data", "host_local_to_global"])
def test_arrays_from_process_local_data_span_the_processes(job, name):
    # Process p holds rows of value p + 1; the program doubles them.
    (result,) = _assemble(job, name)
    expected = np.concatenate([np.full((worker.ROWS, 3), 2.0 * (p + 1))
                               for p in range(job.processes)])
    np.testing.assert_array_equal(result, expected)


def test_process_allgather_gives_every_process_contribution(job):
    for process in range(job.processes):
        gathered = json.loads((job.out / f"process_allgather.{process}.json").read_text())
        assert gathered == [[p, 10 * p + 1] for p in range(job.processes)]


def test_sync_global_devices_returns_in_every_process(job):
    for process in range(job.processes):
        assert (job.out / f"synced.{process}").read_text() == "ok"


# Bounds the whole fault job: start, the collective's timeout, JAX's bounded shutdown
# (worker.FAULT_SHUTDOWN_TIMEOUT_S); launch raises DeadlineExceededError past it.
FAULT_LAUNCH_TIMEOUT_S = 90.0


@pytest.mark.parametrize("leave", ["exit", "crash"])
def test_a_process_that_leaves_makes_the_other_fail_naming_it(tmp_path, leave):
    """Process 1 leaves after a first psum, by sys.exit (JAX's shutdown then waits for process
    0, keeping its connections open: process 0's psum times out) or by os._exit (its
    connections break; JAX's shutdown in process 0 waits for it until its bound). Process
    0's psum raises an error naming the group and process 1, and process 0 exits with a
    non-zero status within the launch's bound."""
    from frameworks.jax.distributed import launch
    from pjrt.errors import ExecutionError
    env = dict(os.environ, OPENHLO_COLLECTIVE_TIMEOUT_S=str(worker.FAULT_COLLECTIVE_TIMEOUT_S))
    with pytest.raises(ExecutionError) as failed:
        launch(["-m", worker.__name__, str(tmp_path), leave], 2, DEVICES,
               FAULT_LAUNCH_TIMEOUT_S, env=env)
    assert str(failed.value).startswith("process 0 of 2 failed"), str(failed.value)
    message = (tmp_path / "error.0.txt").read_text()
    assert "stablehlo.all_reduce" in message and "of instances [0, 1, 2, 3] across processes" \
        in message, message
    assert f"process 1 of [0, 1] did not answer within {worker.FAULT_COLLECTIVE_TIMEOUT_S} s" \
        in message, message
