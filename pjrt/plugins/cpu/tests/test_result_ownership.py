"""Results are the caller's own storage (native executor.cc, Note [Results own their storage]).

A result that is the executable's constant, a view of it, or a value returned twice must come
back as a fresh copy on every call, on the numpy path, the Buffer path and the C entry: writing
into one result must change neither a later call's results nor another result. Expected values
are written from each program's meaning, not from a previous run.
"""
import numpy as np
import pytest

import pjrt

CONSTANT_AND_SUM = """
func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %c = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %0 = stablehlo.add %x, %c : tensor<2xf32>
  func.return %c, %0 : tensor<2xf32>, tensor<2xf32>
}
"""

# The result is a reshape of a constant: it may share the constant's storage.
CONSTANT_VIEW = """
func.func @main(%x: tensor<2x2xf32>) -> (tensor<4xf32>, tensor<2x2xf32>) {
  %c = stablehlo.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %r = stablehlo.reshape %c : (tensor<2x2xf32>) -> tensor<4xf32>
  %s = stablehlo.multiply %x, %c : tensor<2x2xf32>
  func.return %r, %s : tensor<4xf32>, tensor<2x2xf32>
}
"""

SAME_VALUE_TWICE = """
func.func @main(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %0 = stablehlo.add %x, %x : tensor<3xf32>
  func.return %0, %0 : tensor<3xf32>, tensor<3xf32>
}
"""

# A donated argument whose elementwise result may take over its storage.
SCALE = """
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %two = stablehlo.constant dense<2.0> : tensor<2xf32>
  %one = stablehlo.constant dense<1.0> : tensor<2xf32>
  %m = stablehlo.multiply %x, %two : tensor<2xf32>
  %0 = stablehlo.add %m, %one : tensor<2xf32>
  func.return %0 : tensor<2xf32>
}
"""


@pytest.fixture
def client():
    return pjrt.make_client("cpu")


def test_writing_a_constant_result_leaves_later_calls_alone(client):
    exe = client.compile(CONSTANT_AND_SUM)
    x = np.array([10.0, 20.0], np.float32)
    c, total = exe(x)
    c[:] = 100
    total[:] = -1
    c2, total2 = exe(x)
    np.testing.assert_array_equal(c2, [1.0, 2.0])
    np.testing.assert_array_equal(total2, [11.0, 22.0])
    assert not np.shares_memory(c, c2)


def test_writing_a_view_of_a_constant_leaves_later_calls_alone(client):
    exe = client.compile(CONSTANT_VIEW)
    x = np.full((2, 2), 2.0, np.float32)
    r, _ = exe(x)
    r[:] = 0
    r2, s2 = exe(x)
    np.testing.assert_array_equal(r2, [1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(s2, [[2.0, 4.0], [6.0, 8.0]])


def test_a_value_returned_twice_gives_independent_arrays(client):
    exe = client.compile(SAME_VALUE_TWICE)
    a, b = exe(np.array([1.0, 2.0, 3.0], np.float32))
    assert not np.shares_memory(a, b)
    a[:] = 0
    np.testing.assert_array_equal(b, [2.0, 4.0, 6.0])


def test_a_returned_argument_is_a_copy(client):
    exe = client.compile("""
    func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
      func.return %x : tensor<2xf32>
    }""")
    x = np.array([1.0, 2.0], np.float32)
    (y,) = exe(x)
    y[:] = 7
    np.testing.assert_array_equal(x, [1.0, 2.0])


def test_buffers_of_a_constant_are_fresh_per_execution(client):
    exe = client.compile(CONSTANT_AND_SUM)
    x = client.buffer_from_numpy(np.zeros(2, np.float32))
    first = exe.execute([x])
    second = exe.execute([x])
    np.testing.assert_array_equal(first[0].to_numpy(), [1.0, 2.0])
    assert not np.shares_memory(first[0].to_numpy(), second[0].to_numpy())


def test_donating_a_constant_result_buffer_keeps_the_constant(client):
    exe = client.compile(CONSTANT_AND_SUM)
    scale = client.compile(SCALE)
    c, _ = exe.execute([client.buffer_from_numpy(np.zeros(2, np.float32))])
    (scaled,) = scale.execute([c], donate=[0])
    np.testing.assert_array_equal(scaled.to_numpy(), [3.0, 5.0])
    again, total = exe.execute([client.buffer_from_numpy(np.zeros(2, np.float32))])
    np.testing.assert_array_equal(again.to_numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(total.to_numpy(), [1.0, 2.0])
