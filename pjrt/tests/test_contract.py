"""The runtime contract on host backends: buffers, events, asynchronous and
concurrent execution, multi-device execution with collectives, donation.

Results are compared with numpy. ``GatedClient`` runs the interpreter's
programs but waits for a gate first, so tests can see work that has not
finished yet.
"""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import stablehlo
from pjrt import (Buffer, BufferDeletedError, CompileOptions, ExecutionError, make_client)
from pjrt.plugins.interpreter.plugin import InterpreterClient, InterpreterProgram

ADD = """
func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.add %a, %b : tensor<2x3xf32>
  func.return %0 : tensor<2x3xf32>
}
"""

# Every replica: the sum over replicas, and the operands gathered along dim 0.
COLLECTIVES = """
module @collectives attributes {mhlo.num_replicas = 4 : i32} {
  func.func @main(%a: tensor<2xf32>) -> (tensor<2xf32>, tensor<8xf32>) {
    %0 = "stablehlo.all_reduce"(%a) ({
      ^bb0(%x: tensor<f32>, %y: tensor<f32>):
        %s = stablehlo.add %x, %y : tensor<f32>
        stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>}
        : (tensor<2xf32>) -> tensor<2xf32>
    %1 = "stablehlo.all_gather"(%a) {all_gather_dim = 0 : i64,
        replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>}
        : (tensor<2xf32>) -> tensor<8xf32>
    func.return %0, %1 : tensor<2xf32>, tensor<8xf32>
  }
}
"""

IDS = """
func.func @main() -> (tensor<ui32>, tensor<ui32>) {
  %0 = stablehlo.replica_id : tensor<ui32>
  %1 = stablehlo.partition_id : tensor<ui32>
  func.return %0, %1 : tensor<ui32>, tensor<ui32>
}
"""


class GatedClient(InterpreterClient):
    """Interpreter programs that wait for ``gate`` and fail on ``fail_replica``."""
    platform_name = "gated"

    def __init__(self, num_devices: int = 1):
        super().__init__(num_devices)
        self.gate = threading.Event()
        self.fail_replica = None

    def compile_program(self, module, entry, options):
        return _GatedProgram(module, entry, self)


class _GatedProgram(InterpreterProgram):
    def __init__(self, module, entry, client):
        super().__init__(module, entry, None)
        self.client = client

    def run(self, args, replica_id, partition_id, grid):
        if replica_id == self.client.fail_replica:
            raise ValueError("injected failure")
        assert self.client.gate.wait(10), "the test never opened the gate"
        return super().run(args, replica_id, partition_id, grid)


@pytest.fixture(scope="module")
def client():
    return make_client("interpreter", num_devices=4)


def _arrays(seed: int, *shapes):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def test_identity_devices_and_memory_spaces(client):
    devices = client.devices()
    assert [d.id for d in devices] == [0, 1, 2, 3]
    assert client.addressable_devices() == devices
    assert [str(d) for d in devices] == [f"interpreter:{i}" for i in range(4)]
    assert len({hash(d) for d in devices}) == 4
    assert client.lookup_device(2) is devices[2]
    spaces = client.memory_spaces()
    assert [s.device_ids for s in spaces] == [(0,), (1,), (2,), (3,)]
    assert all(s.kind == "device" for s in spaces)
    assert devices[1].default_memory_space == spaces[1]
    assert client.default_device_assignment(2, 2) == [[0, 1], [2, 3]]


def test_buffer_round_trip_and_properties(client):
    (x,) = _arrays(0, (2, 3))
    buffer = client.buffer_from_numpy(x, client.devices()[1])
    x_copy = x.copy()
    x[:] = 0  # the buffer holds its own copy
    assert isinstance(buffer, Buffer)
    assert buffer.dtype == np.float32 and buffer.shape == (2, 3) and buffer.nbytes == 24
    assert buffer.device == client.devices()[1] and buffer.client is client
    assert buffer.memory_space == client.devices()[1].default_memory_space
    assert buffer.ready_event().is_ready()
    out = buffer.to_numpy()
    np.testing.assert_array_equal(out, x_copy)
    assert not out.flags.writeable  # buffers are immutable
    np.testing.assert_array_equal(np.asarray(buffer), x_copy)
    assert "float32[2, 3] on interpreter:1" in repr(buffer)


def test_copy_to_device_and_delete(client):
    (x,) = _arrays(1, (4,))
    source = client.buffer_from_numpy(x)
    moved = source.copy_to_device(client.devices()[3])
    assert moved.device.id == 3
    source.delete()
    assert source.is_deleted and not moved.is_deleted
    np.testing.assert_array_equal(moved.to_numpy(), x)
    with pytest.raises(BufferDeletedError, match=r"float32\[4\] on interpreter:0"):
        source.to_numpy()


def test_execute_returns_buffers_on_the_device(client):
    exe = client.compile(ADD)
    a, b = _arrays(2, (2, 3), (2, 3))
    (out,) = exe.execute([client.buffer_from_numpy(a), b])
    assert isinstance(out, Buffer) and out.device == client.devices()[0]
    np.testing.assert_allclose(out.block_until_ready().to_numpy(), a + b, rtol=1e-6)
    device = client.devices()[2]
    (out,) = exe.execute([client.buffer_from_numpy(a, device), b], device=device)
    assert out.device == device
    np.testing.assert_allclose(out.to_numpy(), a + b, rtol=1e-6)


def test_execution_is_asynchronous():
    client = GatedClient()
    exe = client.compile(ADD)
    a, b = _arrays(3, (2, 3), (2, 3))
    (out,) = exe.execute([a, b])  # returns while the program waits for the gate
    event = out.ready_event()
    assert not event.is_ready() and event.error() is None
    seen = []
    event.on_ready(seen.append)
    assert seen == []
    chained = out.copy_to_device(client.devices()[0])  # waits on the pending source
    client.gate.set()
    event.wait(10)
    assert seen == [None]
    np.testing.assert_allclose(out.to_numpy(), a + b, rtol=1e-6)
    np.testing.assert_allclose(chained.to_numpy(), a + b, rtol=1e-6)
    later = []
    event.on_ready(later.append)  # already ready: called at once
    assert later == [None]


def test_results_of_results_chain_without_waiting():
    client = GatedClient()
    exe = client.compile(ADD)
    (a,) = _arrays(4, (2, 3))
    (first,) = exe.execute([a, a])
    (second,) = exe.execute([first, first])  # queued behind the first execution
    assert not second.ready_event().is_ready()
    client.gate.set()
    np.testing.assert_allclose(second.to_numpy(), 4 * a, rtol=1e-6)


def test_a_failed_execution_fails_its_results_and_what_uses_them():
    client = GatedClient()
    client.fail_replica = 0
    exe = client.compile(ADD)
    (a,) = _arrays(5, (2, 3))
    (out,) = exe.execute([a, a])
    with pytest.raises(ExecutionError, match="failed on gated:0: ValueError: injected") as err:
        out.to_numpy()
    assert isinstance(err.value.__cause__, ValueError)
    assert isinstance(out.ready_event().error(), ExecutionError)
    client.fail_replica = None
    client.gate.set()
    (downstream,) = exe.execute([out, a])
    with pytest.raises(ExecutionError, match="injected"):
        downstream.block_until_ready()


def test_execute_from_four_threads_at_once(client):
    exe = client.compile(ADD)
    failures = []

    def work(seed):
        try:
            for i in range(10):
                a, b = _arrays(seed * 100 + i, (2, 3), (2, 3))
                (out,) = exe.execute([a, b])
                np.testing.assert_allclose(out.to_numpy(), a + b, rtol=1e-6)
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures, failures[0]


def test_execute_sharded_with_collectives(client):
    exe = client.compile(COLLECTIVES)  # mhlo.num_replicas = 4 comes from the module
    assert (exe.num_replicas, exe.num_partitions) == (4, 1)
    assert [d.id for d in exe.addressable_devices()] == [0, 1, 2, 3]
    inputs = _arrays(6, *[(2,)] * 4)
    outputs = exe.execute_sharded([[x] for x in inputs])
    total, gathered = np.sum(inputs, axis=0), np.concatenate(inputs)
    for device, (reduced, all_gathered) in zip(client.devices(), outputs):
        assert reduced.device == device and all_gathered.device == device
        np.testing.assert_allclose(reduced.to_numpy(), total, rtol=1e-6)
        np.testing.assert_array_equal(all_gathered.to_numpy(), gathered)


def test_device_assignment_gives_each_device_its_replica_and_partition(client):
    options = CompileOptions(num_replicas=2, num_partitions=2,
                             device_assignment=[[3, 1], [0, 2]])
    exe = client.compile(IDS, options)
    assert [[d.id for d in row] for row in exe.device_assignment] == [[3, 1], [0, 2]]
    outputs = exe.execute_sharded([[]] * 4)
    ids = [(int(r.to_numpy()), int(p.to_numpy())) for r, p in outputs]
    assert ids == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [out[0].device.id for out in outputs] == [3, 1, 0, 2]


def test_a_failing_instance_fails_all_and_releases_the_others():
    client = GatedClient(num_devices=4)
    client.fail_replica = 2
    client.gate.set()
    exe = client.compile(COLLECTIVES)
    start = time.monotonic()
    outputs = exe.execute_sharded([[x] for x in _arrays(7, *[(2,)] * 4)])
    for k, results in enumerate(outputs):
        for buffer in results:
            with pytest.raises(Exception, match="injected failure"):
                buffer.to_numpy()
    assert time.monotonic() - start < 10  # the grid's 30 s timeout was not needed


def test_donation_deletes_the_donated_buffers(client):
    exe = client.compile(ADD)
    a, b = _arrays(8, (2, 3), (2, 3))
    donated, kept = client.buffer_from_numpy(a), client.buffer_from_numpy(b)
    (out,) = exe.execute([donated, kept], donate=[0])
    assert donated.is_deleted and not kept.is_deleted
    np.testing.assert_allclose(out.to_numpy(), a + b, rtol=1e-6)
    with pytest.raises(BufferDeletedError,
                       match=r"argument 0 of @main is a deleted or donated buffer "
                             r"\(float32\[2, 3\] on interpreter:0\)"):
        exe.execute([donated, kept])


def test_donating_a_pending_buffer_is_safe():
    client = GatedClient()
    exe = client.compile(ADD)
    (a,) = _arrays(9, (2, 3))
    (pending,) = exe.execute([a, a])
    (out,) = exe.execute([pending, a], donate=[0])
    assert pending.is_deleted
    client.gate.set()
    np.testing.assert_allclose(out.to_numpy(), 3 * a, rtol=1e-6)


def test_token_and_tuple_values(client):
    exe = client.compile("""
    func.func @main(%t: !stablehlo.token, %x: tensor<2xi32>)
        -> (!stablehlo.token, tuple<tensor<2xi32>, tensor<i32>>) {
      %c = stablehlo.constant dense<7> : tensor<i32>
      %0 = stablehlo.tuple %x, %c : tuple<tensor<2xi32>, tensor<i32>>
      func.return %t, %0 : !stablehlo.token, tuple<tensor<2xi32>, tensor<i32>>
    }""")
    from stablehlo.interpreter.values import TOKEN
    token, pair = exe(TOKEN, [1, 2])
    assert token is TOKEN
    np.testing.assert_array_equal(pair[0], [1, 2])
    assert pair[1] == 7
    buffers = exe.execute([TOKEN, [1, 2]])
    assert buffers[1].dtype == np.dtype(object) and buffers[1].shape == ()


def test_module_text_and_modules_compile_alike(client):
    from_text = client.compile(ADD)
    from_module = client.compile(stablehlo.parse(ADD))
    assert from_text.executable.fingerprint == from_module.executable.fingerprint
    assert len(from_text.executable.fingerprint) == 64
    executable = from_text.executable
    assert (executable.name, executable.num_outputs) == ("main", 1)
    assert executable.options.entry == "main"


def test_an_unreferenced_client_stops_its_threads():
    import gc
    before = set(threading.enumerate())
    client = make_client("interpreter", num_devices=3)
    exe = client.compile(ADD, CompileOptions(num_replicas=3))
    (a,) = _arrays(12, (2, 3))
    for results in exe.execute_sharded([[a, a]] * 3):
        results[0].block_until_ready()
    started = set(threading.enumerate()) - before
    assert sorted(t.name for t in started) == ["interpreter:0", "interpreter:1",
                                               "interpreter:2"]
    del client, exe, results
    gc.collect()
    for thread in started:
        thread.join(5)
        assert not thread.is_alive()


def test_completion_events_report_programs_without_results(client):
    from stablehlo.errors import CheckFailure
    exe = client.compile("""
    func.func @main(%x: tensor<2xi32>) {
      check.expect_eq_const %x, dense<[1, 3]> : tensor<2xi32>
      func.return
    }""")
    results, event = exe.execute([[1, 2]], with_event=True)
    assert results == []
    with pytest.raises(CheckFailure):
        event.wait(10)
    results, event = exe.execute([[1, 3]], with_event=True)
    event.wait(10)
    sharded = client.compile(COLLECTIVES)
    outputs, events = sharded.execute_sharded([[x] for x in _arrays(10, *[(2,)] * 4)],
                                              with_events=True)
    assert len(outputs) == len(events) == 4
    for event in events:
        event.wait(10)


def test_deleting_or_dropping_a_buffer_frees_its_array(client):
    import gc
    import weakref
    (x,) = _arrays(11, (3,))
    deleted = client.buffer_from_numpy(x)
    dropped = client.buffer_from_numpy(x)
    refs = [weakref.ref(deleted.to_numpy()), weakref.ref(dropped.to_numpy())]
    deleted.delete()
    del dropped
    gc.collect()
    assert [ref() for ref in refs] == [None, None]
