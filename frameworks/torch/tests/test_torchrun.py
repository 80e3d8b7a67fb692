"""PyTorch across processes: the torch.distributed store adapter, and a small transformer
trained with mark_sharding under ``torchrun --nproc-per-node 2`` (2 virtual devices each,
gloo between the processes on loopback) that gives the loss curve of the same model on one
process with all 4 devices, and eager's; a torchrun past its time is stopped, workers too."""
import json
import os
import threading
import time
from datetime import timedelta

import numpy as np
import pytest
import torch.distributed as dist

from frameworks.torch import distributed
from frameworks.torch.tests import torchrun_worker
from pjrt.distributed.store import PrefixStore
from pjrt.errors import DeadlineExceededError
from pjrt.plugins.cpu.native_module import native
from stablehlo.ir.sharding import ShardingError

needs_gloo = pytest.mark.skipif(not native().HAVE_GLOO, reason="built without gloo")

TORCHRUN_TIMEOUT_S = 300.0
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


@pytest.fixture
def torch_store():
    store = dist.TCPStore("127.0.0.1", 0, 1, True, timedelta(seconds=30))
    yield store
    del store


def test_torch_store_adapter_set_get_try_get(torch_store):
    store = PrefixStore(distributed.TorchStore(torch_store), distributed.KEY_PREFIX)
    assert store.try_get("a") is None
    store.set("a", b"\x00one")
    assert store.get("a", timeout_s=1.0) == b"\x00one"
    assert store.try_get("a") == b"\x00one"
    assert torch_store.get("openhlo/a") == b"\x00one"  # under our prefix in torch's store
    store.set("a", b"two")
    assert store.get("a", timeout_s=1.0) == b"two"


def test_torch_store_adapter_get_times_out_naming_the_key(torch_store):
    store = distributed.TorchStore(torch_store)
    with pytest.raises(DeadlineExceededError, match="'never'.*0.2 s"):
        store.get("never", timeout_s=0.2)


def test_a_waiting_get_does_not_hold_up_a_set_from_another_thread(torch_store):
    # torch's own blocking get holds its client's connection: the set would wait for it
    store = distributed.TorchStore(torch_store)
    got = []
    waiter = threading.Thread(target=lambda: got.append(store.get("late", timeout_s=10.0)))
    waiter.start()
    time.sleep(0.2)
    store.set("late", b"here")
    waiter.join(timeout=5.0)
    assert got == [b"here"]


def test_without_torchrun_there_are_no_options(monkeypatch):
    for name in distributed.TORCHRUN_ENV:
        monkeypatch.delenv(name, raising=False)
    assert distributed.options() is None
    assert distributed.num_processes() == 1


def test_a_mesh_that_the_processes_do_not_divide_is_refused(monkeypatch, torch_store):
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(torch_store.port))
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(distributed, "_torch_store", lambda: torch_store)
    with pytest.raises(ShardingError, match="3 device.*2 torchrun processes"):
        distributed.client.__wrapped__(3)


@needs_gloo
def test_torchrun_training_matches_one_process(tmp_path):
    out = tmp_path / "losses.json"
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OPENHLO_COLLECTIVE_TIMEOUT_S="120")
    finished = distributed.torchrun(["-m", "frameworks.torch.tests.torchrun_worker", str(out),
                                     "2"], nproc_per_node=2, timeout_s=TORCHRUN_TIMEOUT_S,
                                    env=env)
    assert finished.returncode == 0, finished.stderr[-4000:]
    got = json.loads(out.read_text())
    # one client over both processes' devices; the forward and backward graphs ran on it
    assert (got["num_processes"], got["devices"], got["addressable_devices"]) == (2, 4, 2)
    assert got["sharded_programs"] == 2
    one_process = torchrun_worker.train(4)
    eager = torchrun_worker.train(1, compiled=False)
    assert len(got["losses"]) == torchrun_worker.STEPS
    np.testing.assert_allclose(got["losses"], one_process["losses"], rtol=1e-6)
    np.testing.assert_allclose(got["losses"], eager["losses"], rtol=1e-5)
    np.testing.assert_allclose(got["parameter_sum"], eager["parameter_sum"], rtol=1e-5)
    assert got["losses"][-1] < got["losses"][0] / 2  # it trained


def test_torchrun_past_its_timeout_is_stopped_with_its_workers(tmp_path):
    script = tmp_path / "hang.py"
    script.write_text("import os, pathlib, time\n"
                      f"pathlib.Path({str(tmp_path)!r}, os.environ['RANK']).write_text("
                      "str(os.getpid()))\n"
                      "time.sleep(600)\n")
    with pytest.raises(DeadlineExceededError, match="still ran after 15 s: stopped"):
        distributed.torchrun([str(script)], nproc_per_node=2, timeout_s=15.0)
    pids = [int((tmp_path / rank).read_text()) for rank in ("0", "1")]
    for pid in pids:  # torchrun stopped both workers before it exited
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
