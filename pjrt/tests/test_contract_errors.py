"""Clear errors from the shared checks of the contract, with their PJRT codes."""
from __future__ import annotations

import numpy as np
import pytest

import stablehlo
from stablehlo.errors import ParseError, VerificationError
from pjrt import (ArgumentError, BufferDeletedError, CompileOptions, DeadlineExceededError,
                  ErrorCode, ExecutionError, FailedPreconditionError, HostEvent, PluginError,
                  UnimplementedError, error_code, make_client, ready_event)

ADD = """
func.func @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.add %a, %b : tensor<2x3xf32>
  func.return %0 : tensor<2x3xf32>
}
"""
X = np.zeros((2, 3), np.float32)


@pytest.fixture(scope="module")
def client():
    return make_client("interpreter", num_devices=2)


@pytest.fixture(scope="module")
def exe(client):
    return client.compile(ADD)


def test_argument_count_shape_and_dtype(exe, client):
    with pytest.raises(ArgumentError, match=r"@main takes 2 argument\(s\), got 1"):
        exe.execute([X])
    with pytest.raises(ArgumentError, match=r"argument 1 of @main: expected tensor<2x3xf32> "
                                            r"\(shape \(2, 3\)\), got shape \(3, 2\)"):
        exe.execute([X, np.zeros((3, 2), np.float32)])
    with pytest.raises(ArgumentError, match=r"argument 0 of @main: expected tensor<2x3xf32> "
                                            r"\(dtype float32\), got dtype int32"):
        exe.execute([X.astype(np.int32), X])
    # The same checks for buffers.
    with pytest.raises(ArgumentError, match=r"argument 1 of @main: .* got a buffer of shape "
                                            r"\(6,\)"):
        exe.execute([X, client.buffer_from_numpy(np.zeros(6, np.float32))])
    with pytest.raises(ArgumentError, match=r"argument 0 of @main: .* got a buffer of dtype "
                                            r"float64"):
        exe.execute([client.buffer_from_numpy(X.astype(np.float64)), X])


def test_buffer_on_another_device(exe, client):
    elsewhere = client.buffer_from_numpy(X, client.devices()[1])
    with pytest.raises(ArgumentError, match="argument 0 of @main is on interpreter:1, the "
                                            "executable runs on interpreter:0"):
        exe.execute([elsewhere, X])


def test_buffer_of_another_client(exe):
    other = make_client("interpreter").buffer_from_numpy(X)
    with pytest.raises(ArgumentError, match="argument 1 of @main is a buffer of another client"):
        exe.execute([X, other])


def test_deleted_buffer_and_double_donation(exe, client):
    buffer = client.buffer_from_numpy(X)
    buffer.delete()
    with pytest.raises(BufferDeletedError) as err:
        exe.execute([buffer, X])
    assert err.value.code == ErrorCode.FAILED_PRECONDITION
    with pytest.raises(BufferDeletedError):
        buffer.block_until_ready()
    with pytest.raises(BufferDeletedError):
        buffer.copy_to_device(client.devices()[1])
    twice = client.buffer_from_numpy(X)
    with pytest.raises(ArgumentError, match="argument 0 of @main is donated, but the same "
                                            "buffer is also passed as argument 1"):
        exe.execute([twice, twice], donate=[0])
    assert not twice.is_deleted  # a refused call changes nothing
    with pytest.raises(ArgumentError, match="cannot donate argument 5"):
        exe.execute([X, X], donate=[5])


def test_unknown_devices(client, exe):
    with pytest.raises(ArgumentError, match=r"no device with id 7 .*ids: 0, 1"):
        client.lookup_device(7)
    foreign = make_client("interpreter", num_devices=3).devices()[2]
    with pytest.raises(ArgumentError, match="not a device of this interpreter client"):
        client.buffer_from_numpy(X, foreign)
    with pytest.raises(ArgumentError, match="not an addressable device"):
        exe.execute([X, X], device=foreign)


def test_replica_and_partition_counts(client):
    with pytest.raises(ArgumentError, match=r"4 replica\(s\) x 1 partition\(s\) need 4 "
                                            r"devices; this interpreter client has 2"):
        client.compile(ADD, CompileOptions(num_replicas=4))
    with pytest.raises(ArgumentError, match="num_partitions must be a positive integer"):
        client.compile(ADD, CompileOptions(num_partitions=0))
    with pytest.raises(ArgumentError, match=r"must be 2 row\(s\) \(replicas\) of 1 device"):
        client.compile(ADD, CompileOptions(num_replicas=2, device_assignment=[[0, 1]]))
    with pytest.raises(ArgumentError, match="names a device twice"):
        client.compile(ADD, CompileOptions(num_replicas=2, device_assignment=[[1], [1]]))
    with pytest.raises(ArgumentError, match="no device with id 9"):
        client.compile(ADD, CompileOptions(device_assignment=[[9]]))
    sharded = client.compile(ADD, CompileOptions(num_replicas=2))
    with pytest.raises(ArgumentError, match="use execute_sharded"):
        sharded.execute([X, X])
    with pytest.raises(ArgumentError, match=r"runs on 2 device\(s\) \(interpreter:0, "
                                            r"interpreter:1\); execute_sharded got 1"):
        sharded.execute_sharded([[X, X]])


def test_deleted_executable(client):
    exe = client.compile(ADD)
    exe.delete()
    assert exe.is_deleted
    with pytest.raises(FailedPreconditionError, match="executable main was deleted"):
        exe.execute([X, X])


def test_compile_errors_name_the_place(client):
    with pytest.raises(ParseError, match=r"<string>:3:"):
        client.compile("func.func @main() {\n  %0 = stablehlo.constant dense<1> : tensor<i32>\n"
                       "  %1 = stablehlo.bogus %0\n}")
    bad = stablehlo.parse("""
    func.func @main(%a: tensor<2xf32>, %b: tensor<3xf32>) -> tensor<2xf32> {
      %0 = stablehlo.add %a, %b : (tensor<2xf32>, tensor<3xf32>) -> tensor<2xf32>
      func.return %0 : tensor<2xf32>
    }""", verify=False)
    with pytest.raises(VerificationError, match="stablehlo.add"):
        client.compile(bad)
    with pytest.raises(ArgumentError, match="takes a stablehlo Module or its text"):
        client.compile(42)


def test_events_wait_timeout_and_double_set(capfd):
    event = HostEvent()
    with pytest.raises(DeadlineExceededError, match="not ready after 0.01 s") as err:
        event.wait(0.01)
    assert isinstance(err.value, TimeoutError)

    def broken_callback(error):
        raise RuntimeError("callback bug")
    calls = []
    event.on_ready(broken_callback)
    event.on_ready(calls.append)
    failure = ExecutionError("boom")
    event.set(failure)  # a failing callback does not stop the others
    assert calls == [failure] and "callback bug" in capfd.readouterr().err
    assert event.is_ready() and event.error() is failure
    with pytest.raises(ExecutionError, match="boom"):
        event.wait()
    with pytest.raises(FailedPreconditionError, match="already set"):
        event.set()
    assert ready_event().is_ready() and ready_event().error() is None


def test_error_codes():
    assert ArgumentError.code == ErrorCode.INVALID_ARGUMENT
    assert UnimplementedError.code == ErrorCode.UNIMPLEMENTED == 12
    assert ExecutionError.code == ErrorCode.INTERNAL
    assert PluginError.code == ErrorCode.UNAVAILABLE
    assert error_code(BufferDeletedError("x")) == ErrorCode.FAILED_PRECONDITION
    assert error_code(VerificationError("x")) == ErrorCode.INVALID_ARGUMENT
    assert error_code(stablehlo.CheckFailure("x")) == ErrorCode.INTERNAL
    assert error_code(KeyError("x")) == ErrorCode.UNKNOWN
    assert ErrorCode.UNAUTHENTICATED == 16 and ErrorCode.CANCELLED == 1
