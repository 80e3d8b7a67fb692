"""The runtime contract's checks of the backend suite (backend_suite.py), area by area.

Each check takes a ``Suite`` and raises ``CheckFailed`` (the contract broken) or
``Skipped`` (not applicable: one device only, a program the backend refuses). They check
what pjrt/README.md promises every backend: devices and memory spaces, buffers and
transfers, events, execution (asynchronous, concurrent, result ownership), multi-device
execution, donation, deleted buffers and executables, argument errors (hostile arguments
included), compile errors that name the place, and execution failures. Expected values are
numpy's.
"""
from __future__ import annotations

import threading

import numpy as np

from pjrt.testing.backend_suite import expect, expect_close, expect_raises

ADD = """
func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.add %a, %b : tensor<2x3xf32>
  func.return %0 : tensor<2x3xf32>
}
"""

# Two results of several ops: a dot, a broadcast bias, tanh and a reduction.
LAYER = """
func.func @main(%x: tensor<2x3xf32>, %w: tensor<3x4xf32>, %b: tensor<4xf32>)
    -> (tensor<2x4xf32>, tensor<4xf32>) {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
      : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %1 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<4xf32>) -> tensor<2x4xf32>
  %2 = stablehlo.add %0, %1 : tensor<2x4xf32>
  %3 = stablehlo.tanh %2 : tensor<2x4xf32>
  %c = stablehlo.constant dense<0.0> : tensor<f32>
  %4 = stablehlo.reduce(%3 init: %c) applies stablehlo.add across dimensions = [0]
      : (tensor<2x4xf32>, tensor<f32>) -> tensor<4xf32>
  func.return %3, %4 : tensor<2x4xf32>, tensor<4xf32>
}
"""

ALL_REDUCE = """
module @all_reduce attributes {mhlo.num_replicas = 2 : i32} {
  func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {
    %0 = "stablehlo.all_reduce"(%a) ({
      ^bb0(%x: tensor<f32>, %y: tensor<f32>):
        %s = stablehlo.add %x, %y : tensor<f32>
        stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<3xf32>) -> tensor<3xf32>
    func.return %0 : tensor<3xf32>
  }
}
"""

REPLICA_ID = """
func.func @main() -> tensor<ui32> {
  %0 = stablehlo.replica_id : tensor<ui32>
  func.return %0 : tensor<ui32>
}
"""

# Fails at run time (a check op) unless %x is [1, 3].
EXPECT_1_3 = """
func.func @main(%x: tensor<2xi32>) {
  check.expect_eq_const %x, dense<[1, 3]> : tensor<2xi32>
  func.return
}
"""

_WAIT_S = 120.0  # generous: an event that is never set fails the check instead of hanging


def _arrays(seed: int, *shapes) -> list:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def _layer_reference(x, w, b) -> tuple:
    h = np.tanh(x @ w + b)
    return h, h.sum(axis=0)


# ---------------------------------------------------------------------------
# devices

def identity_and_devices(suite) -> None:
    client = suite.client
    name = client.platform_name
    expect(isinstance(name, str) and name != "", f"platform_name is {name!r}")
    expect(isinstance(client.platform_version, str), "platform_version is not a string")
    devices = client.devices()
    expect(len(devices) >= 1, "the client has no devices")
    ids = [d.id for d in devices]
    expect(len(set(ids)) == len(ids), f"device ids repeat: {ids}")
    for device in devices:
        expect(client.lookup_device(device.id) == device, f"lookup_device({device.id})")
    expect(set(client.addressable_devices()) <= set(devices),
           "an addressable device is not among devices()")


def memory_spaces_and_device_assignment(suite) -> None:
    from pjrt.errors import ArgumentError
    client = suite.client
    spaces = client.memory_spaces()
    devices = client.addressable_devices()
    expect(len(spaces) >= 1, "the client has no memory spaces")
    for device in devices:
        expect(device.default_memory_space in spaces,
               f"{device}'s memory space is not among memory_spaces()")
    assignment = client.default_device_assignment(1, 1)
    expect(assignment == [[devices[0].id]], f"default_device_assignment(1, 1) = {assignment}")
    expect_raises(ArgumentError, lambda: client.lookup_device(10 ** 6), contains="1000000",
                  what="lookup_device of an unknown id")
    expect_raises(ArgumentError,
                  lambda: client.default_device_assignment(len(devices) + 1, 1),
                  contains="need", what="more replicas than devices")


# ---------------------------------------------------------------------------
# buffers

def buffer_round_trip(suite) -> None:
    from pjrt.api import Buffer
    client = suite.client
    device = client.addressable_devices()[0]
    for dtype in (np.float32, np.float64, np.int32, np.int8, np.uint32, np.bool_):
        source = (np.arange(6) % 3).astype(dtype).reshape(2, 3)
        kept = source.copy()
        buffer = client.buffer_from_numpy(source, device)
        source[...] = 0  # the buffer holds its own copy
        expect(isinstance(buffer, Buffer), f"buffer_from_numpy gave {type(buffer).__name__}")
        expect(buffer.dtype == kept.dtype and tuple(buffer.shape) == (2, 3),
               f"buffer of {kept.dtype}[2, 3] says {buffer.dtype}{list(buffer.shape)}")
        expect(buffer.device == device and buffer.client is client,
               "the buffer's device or client is not the one it was made on")
        expect(buffer.nbytes == kept.nbytes, f"nbytes {buffer.nbytes}, expected {kept.nbytes}")
        out = buffer.to_numpy()
        expect(np.array_equal(out, kept), f"{kept.dtype} round trip gave {out.tolist()}")
        expect(not out.flags.writeable, "to_numpy() returned a writable array")
        expect(np.array_equal(np.asarray(buffer), kept), "np.asarray(buffer) differs")


def buffer_copy_to_device(suite) -> None:
    first, second = suite.devices(2)
    (x,) = _arrays(1, (4,))
    source = suite.client.buffer_from_numpy(x, first)
    moved = source.copy_to_device(second)
    expect(moved.device == second, f"copy_to_device({second}) gave a buffer on {moved.device}")
    source.delete()
    expect(not moved.is_deleted, "deleting the source deleted the copy")
    expect(np.array_equal(moved.to_numpy(), x), "the copy's value differs")


# ---------------------------------------------------------------------------
# events

def events_of_buffers_and_executions(suite) -> None:
    client = suite.client
    exe = suite.compile(ADD)
    a, b = _arrays(2, (2, 3), (2, 3))
    outputs, event = exe.execute([a, b], with_event=True)
    event.wait(_WAIT_S)
    expect(event.is_ready() and event.error() is None, "a finished execution's event")
    (out,) = outputs
    called = threading.Event()
    seen = []
    out.ready_event().on_ready(lambda error: (seen.append(error), called.set()))
    expect(called.wait(_WAIT_S), "on_ready of a ready buffer never called back")
    expect(seen == [None], f"on_ready reported {seen}")
    expect(out.block_until_ready() is out, "block_until_ready() did not return the buffer")
    buffer = client.buffer_from_numpy(a)
    buffer.ready_event().wait(_WAIT_S)
    expect_close(out.to_numpy(), a + b, "add")


# ---------------------------------------------------------------------------
# execution

def execute_buffers_and_host_arrays(suite) -> None:
    from pjrt.api import Buffer
    client = suite.client
    exe = suite.compile(LAYER)
    x, w, b = _arrays(3, (2, 3), (3, 4), (4,))
    expected = _layer_reference(x, w, b)
    outputs = exe.execute([client.buffer_from_numpy(x), w, client.buffer_from_numpy(b)])
    expect(len(outputs) == 2 and all(isinstance(o, Buffer) for o in outputs),
           f"execute returned {outputs!r}")
    expect(all(o.device == exe.addressable_devices()[0] for o in outputs),
           "results are not on the device the executable ran on")
    for out, ref, what in zip(outputs, expected, ("tanh layer", "its column sums")):
        expect_close(out.to_numpy(), ref, what)
    for out, ref, what in zip(exe(x, w, b), expected, ("exe(*arrays)", "its sums")):
        expect_close(out, ref, what)


def execute_on_another_device(suite) -> None:
    _, device = suite.devices(2)
    client = suite.client
    exe = suite.compile(ADD)
    a, b = _arrays(4, (2, 3), (2, 3))
    (out,) = exe.execute([client.buffer_from_numpy(a, device), b], device=device)
    expect(out.device == device, f"ran on {device}, the result is on {out.device}")
    expect_close(out.to_numpy(), a + b, "add on the second device")


def results_are_the_callers_own(suite) -> None:
    """Results share no storage with the arguments or the executable: overwriting the
    results of one call (where writable) and its arguments changes nothing later."""
    exe = suite.compile(LAYER)
    x, w, b = _arrays(5, (2, 3), (3, 4), (4,))
    expected = _layer_reference(x, w, b)
    first = exe(x, w, b)
    for result in first:
        if isinstance(result, np.ndarray) and result.flags.writeable:
            result[...] = 7
    x_kept = x.copy()
    second = exe(x, w, b)
    x[...] = 0
    for out, ref, what in zip(second, expected, ("result 0", "result 1")):
        expect_close(out, ref, f"{what} after the previous results and the arguments "
                               f"were overwritten")
    expect_close(exe(x_kept, w, b)[0], expected[0], "a third call")


def text_and_module_compile_alike(suite) -> None:
    import stablehlo
    from_text = suite.compile(ADD)
    from_module = suite.client.compile(stablehlo.parse(ADD))
    expect(from_text.executable.fingerprint == from_module.executable.fingerprint,
           "a program compiled from text and from its Module have different fingerprints")
    a, b = _arrays(6, (2, 3), (2, 3))
    expect_close(from_module(a, b)[0], a + b, "add compiled from a Module")


def execute_from_two_threads(suite) -> None:
    exe = suite.compile(ADD)
    problems: list = []

    def work(seed: int) -> None:
        try:
            for i in range(5):
                a, b = _arrays(seed * 10 + i, (2, 3), (2, 3))
                (out,) = exe.execute([a, b])
                got = out.to_numpy()
                if not np.allclose(got, a + b, rtol=1e-6):
                    problems.append(f"thread {seed}: got {got.tolist()}")
        except Exception as exc:  # noqa: BLE001 - reported below
            problems.append(f"thread {seed}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(_WAIT_S)
    expect(not any(t.is_alive() for t in threads), "an execution never finished")
    expect(not problems, "; ".join(problems[:3]))


# ---------------------------------------------------------------------------
# multi-device

def execute_sharded_with_all_reduce(suite) -> None:
    first, second = suite.devices(2)
    from pjrt.api import CompileOptions
    exe = suite.compile(ALL_REDUCE, CompileOptions(device_assignment=[[first.id],
                                                                      [second.id]]))
    a, b = _arrays(7, (3,), (3,))
    outputs = exe.execute_sharded([[a], [b]])
    expect(len(outputs) == 2, f"execute_sharded gave {len(outputs)} result lists")
    for (out,), device in zip(outputs, (first, second)):
        expect(out.device == device, f"a result of {device} is on {out.device}")
        expect_close(out.to_numpy(), a + b, f"all_reduce on {device}")


def each_replica_knows_its_id(suite) -> None:
    from pjrt.api import CompileOptions
    first, second = suite.devices(2)
    exe = suite.compile(REPLICA_ID, CompileOptions(num_replicas=2,
                                                   device_assignment=[[second.id],
                                                                      [first.id]]))
    outputs = exe.execute_sharded([[], []])
    ids = [int(out.to_numpy()) for (out,) in outputs]
    expect(ids == [0, 1], f"replica_id per instance: {ids}, expected [0, 1]")
    expect([out.device for (out,) in outputs] == [second, first],
           "results are not on the assigned devices")


# ---------------------------------------------------------------------------
# donation

def donation_deletes_the_donated_buffer(suite) -> None:
    from pjrt.errors import BufferDeletedError
    client = suite.client
    exe = suite.compile(ADD)
    a, b = _arrays(8, (2, 3), (2, 3))
    donated, kept = client.buffer_from_numpy(a), client.buffer_from_numpy(b)
    (out,) = exe.execute([donated, kept], donate=[0])
    expect(donated.is_deleted and not kept.is_deleted,
           "after donating argument 0 only it is deleted")
    expect_close(out.to_numpy(), a + b, "the result of a donating execution")
    expect_raises(BufferDeletedError, lambda: exe.execute([donated, kept]),
                  contains="argument 0 of @main", what="running on a donated buffer")


def donation_misuse_is_refused(suite) -> None:
    from pjrt.errors import ArgumentError
    client = suite.client
    exe = suite.compile(ADD)
    (a,) = _arrays(9, (2, 3))
    twice = client.buffer_from_numpy(a)
    expect_raises(ArgumentError, lambda: exe.execute([twice, twice], donate=[0]),
                  contains="donated", what="donating a buffer passed twice")
    expect(not twice.is_deleted, "a refused call deleted its buffer")
    expect_raises(ArgumentError, lambda: exe.execute([a, a], donate=[5]),
                  contains="donate", what="donating an argument that does not exist")


# ---------------------------------------------------------------------------
# deleted buffers and executables

def deleted_buffers_refuse_use(suite) -> None:
    from pjrt.errors import BufferDeletedError
    client = suite.client
    exe = suite.compile(ADD)
    (a,) = _arrays(10, (2, 3))
    buffer = client.buffer_from_numpy(a)
    buffer.delete()
    expect(buffer.is_deleted, "is_deleted is False after delete()")
    expect_raises(BufferDeletedError, buffer.to_numpy, what="to_numpy of a deleted buffer")
    expect_raises(BufferDeletedError, buffer.block_until_ready,
                  what="block_until_ready of a deleted buffer")
    expect_raises(BufferDeletedError, lambda: exe.execute([buffer, a]),
                  contains="argument 0 of @main", what="running on a deleted buffer")


def closed_clients_and_deleted_executables(suite) -> None:
    from pjrt.errors import FailedPreconditionError
    client = suite.make_client()
    exe = suite.compile(ADD, client=client)
    (a,) = _arrays(11, (2, 3))
    exe.delete()
    expect(exe.is_deleted, "is_deleted is False after delete()")
    expect_raises(FailedPreconditionError, lambda: exe.execute([a, a]),
                  contains="deleted", what="running a deleted executable")
    client.close()
    expect_raises(FailedPreconditionError, lambda: client.compile(ADD),
                  contains="closed", what="compiling on a closed client")
    expect_raises(FailedPreconditionError, lambda: client.buffer_from_numpy(a),
                  contains="closed", what="a transfer to a closed client")


# ---------------------------------------------------------------------------
# argument errors

def wrong_count_shape_and_dtype(suite) -> None:
    from pjrt.errors import ArgumentError
    exe = suite.compile(ADD)
    x = np.zeros((2, 3), np.float32)
    expect_raises(ArgumentError, lambda: exe.execute([x]), contains="takes 2 argument(s)",
                  what="one argument of two")
    expect_raises(ArgumentError, lambda: exe.execute([x, np.zeros((3, 2), np.float32)]),
                  contains="argument 1 of @main", what="a wrong shape")
    expect_raises(ArgumentError, lambda: exe.execute([x.astype(np.float64), x]),
                  contains="float64", what="a wrong dtype")
    expect_raises(ArgumentError, lambda: exe(x, x, x), contains="takes 2",
                  what="three arguments to exe(*arrays)")


def hostile_arguments(suite) -> None:
    from pjrt.errors import ArgumentError
    exe = suite.compile(ADD)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    expect_close(exe(x.tolist(), x)[0], 2 * x, "nested lists converted to the declared dtype")
    big_endian = x.astype(">f4")
    expect_close(exe(big_endian, x)[0], 2 * x, "a big-endian float32 argument")
    expect_close(exe(x.T.copy().T, x)[0], 2 * x, "a Fortran-ordered argument")
    structured = np.zeros((2, 3), dtype=[("a", np.float32)])
    expect_raises(ArgumentError, lambda: exe(structured, x), contains="argument 0",
                  what="a structured array")
    expect_raises(ArgumentError, lambda: exe(np.full((2, 3), "x", object), x),
                  contains="argument 0", what="an array of strings")
    expect_raises(ArgumentError, lambda: exe(object(), x), contains="argument 0",
                  what="an arbitrary object")


def buffers_of_another_device_or_client(suite) -> None:
    from pjrt.errors import ArgumentError
    client = suite.client
    exe = suite.compile(ADD)
    x = np.zeros((2, 3), np.float32)
    other = suite.make_client().buffer_from_numpy(x)
    expect_raises(ArgumentError, lambda: exe.execute([x, other]), contains="another client",
                  what="a buffer of another client")
    _, second = suite.devices(2)
    elsewhere = client.buffer_from_numpy(x, second)
    expect_raises(ArgumentError, lambda: exe.execute([elsewhere, x]), contains=str(second),
                  what="a buffer on another device")


# ---------------------------------------------------------------------------
# compile errors

def compile_errors_name_the_place(suite) -> None:
    import stablehlo
    from stablehlo.errors import OpenHLOError, ParseError, VerificationError
    from pjrt.errors import ArgumentError, ErrorCode, error_code
    client = suite.client
    error = expect_raises(
        ParseError, lambda: client.compile("func.func @main() {\n  %0 = stablehlo.constant "
                                           "dense<1> : tensor<i32>\n  %1 = stablehlo.bogus "
                                           "%0\n}"),
        contains="<string>:3:", what="an unknown op in program text")
    expect(error_code(error) == ErrorCode.INVALID_ARGUMENT, "a parse error's code")
    bad = stablehlo.parse("""
    func.func @main(%a: tensor<2xf32>, %b: tensor<3xf32>) -> tensor<2xf32> {
      %0 = stablehlo.add %a, %b : (tensor<2xf32>, tensor<3xf32>) -> tensor<2xf32>
      func.return %0 : tensor<2xf32>
    }""", verify=False)
    expect_raises(VerificationError, lambda: client.compile(bad), contains="stablehlo.add",
                  what="a Module that does not verify")
    expect_raises(ArgumentError, lambda: client.compile(42), contains="Module",
                  what="compile(42)")
    expect_raises(OpenHLOError, lambda: client.compile(ADD, entry="nosuch"),
                  contains="nosuch", what="an entry function that does not exist")


# ---------------------------------------------------------------------------
# execution failures

def a_failed_execution_reports_through_its_event(suite) -> None:
    from stablehlo.errors import OpenHLOError
    exe = suite.compile(EXPECT_1_3)
    results, event = exe.execute([[1, 3]], with_event=True)
    event.wait(_WAIT_S)
    expect(results == [] and event.error() is None, "a passing check op")
    _, event = exe.execute([[1, 2]], with_event=True)
    expect_raises(OpenHLOError, lambda: event.wait(_WAIT_S), what="a failing check op")
    expect(event.is_ready() and event.error() is not None,
           "the failed execution's event has no error")
    expect_raises(OpenHLOError, lambda: exe([1, 2]), what="exe(*arrays) of a failing check")


AREAS = {
    "devices": (identity_and_devices, memory_spaces_and_device_assignment),
    "buffers": (buffer_round_trip, buffer_copy_to_device),
    "events": (events_of_buffers_and_executions,),
    "execution": (execute_buffers_and_host_arrays, execute_on_another_device,
                  results_are_the_callers_own, text_and_module_compile_alike,
                  execute_from_two_threads),
    "multi-device": (execute_sharded_with_all_reduce, each_replica_knows_its_id),
    "donation": (donation_deletes_the_donated_buffer, donation_misuse_is_refused),
    "deleted": (deleted_buffers_refuse_use, closed_clients_and_deleted_executables),
    "arguments": (wrong_count_shape_and_dtype, hostile_arguments,
                  buffers_of_another_device_or_client),
    "compile errors": (compile_errors_name_the_place,),
    "failures": (a_failed_execution_reports_through_its_event,),
}
