"""The interpreter backend through the numpy convenience call, checked against numpy."""
from __future__ import annotations

import numpy as np
import pytest

import stablehlo
from stablehlo.errors import CheckFailure, VerificationError
from pjrt import ArgumentError, make_client

AFFINE = """
func.func public @main(%x: tensor<2x3xf32>, %w: tensor<3x2xf32>,
                       %b: tensor<2xf32>) -> tensor<2x2xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0]
      : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
  %1 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<2xf32>) -> tensor<2x2xf32>
  %2 = stablehlo.add %0, %1 : tensor<2x2xf32>
  func.return %2 : tensor<2x2xf32>
}
"""


@pytest.fixture(scope="module")
def client():
    return make_client("interpreter")


def test_identity(client):
    assert client.platform_name == "interpreter"
    assert len(client.devices()) == 1
    assert client.addressable_devices() == client.devices()


def test_execute_matches_numpy(client):
    exe = client.compile(stablehlo.parse(AFFINE))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    w = rng.standard_normal((3, 2)).astype(np.float32)
    b = rng.standard_normal(2).astype(np.float32)
    (out,) = exe(x, w, b)
    assert out.dtype == np.float32 and out.shape == (2, 2)
    np.testing.assert_allclose(out, x @ w + b, rtol=1e-6)
    assert [str(t) for t in exe.parameter_types] == [
        "tensor<2x3xf32>", "tensor<3x2xf32>", "tensor<2xf32>"]


def test_argument_errors_name_index_and_types(client):
    exe = client.compile(stablehlo.parse(AFFINE))
    x, w, b = np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32), np.zeros(2, np.float32)
    with pytest.raises(ArgumentError, match="takes 3 argument"):
        exe(x, w)
    with pytest.raises(ArgumentError,
                       match=r"argument 1 of @main: expected tensor<3x2xf32>.*\(4, 2\)"):
        exe(x, np.zeros((4, 2), np.float32), b)
    with pytest.raises(ArgumentError, match=r"argument 2 of @main.*float32.*float64"):
        exe(x, w, np.zeros(2))


def test_python_values_are_converted_to_the_declared_dtype(client):
    exe = client.compile(stablehlo.parse(AFFINE))
    (out,) = exe([[1, 0, 0], [0, 1, 0]], [[1, 2], [3, 4], [5, 6]], [10, 20])
    np.testing.assert_array_equal(out, np.array([[11, 22], [13, 24]], np.float32))


def test_entry_selection(client):
    two = stablehlo.parse("""
    func.func @first() -> tensor<i32> {
      %0 = stablehlo.constant dense<1> : tensor<i32>
      func.return %0 : tensor<i32>
    }
    func.func @second() -> tensor<i32> {
      %0 = stablehlo.constant dense<2> : tensor<i32>
      func.return %0 : tensor<i32>
    }""")
    with pytest.raises(ArgumentError, match="no @main and several functions"):
        client.compile(two)
    assert client.compile(two, entry="second")()[0] == 2
    with pytest.raises(ArgumentError, match="no function @third"):
        client.compile(two, entry="third")
    # the one public function, beside private callees (a composite's decomposition)
    one_public = stablehlo.parse("""
    func.func @forward() -> tensor<i32> {
      %0 = func.call @helper() : () -> tensor<i32>
      func.return %0 : tensor<i32>
    }
    func.func private @helper() -> tensor<i32> {
      %0 = stablehlo.constant dense<3> : tensor<i32>
      func.return %0 : tensor<i32>
    }""")
    assert client.compile(one_public)()[0] == 3


def test_compile_rejects_an_invalid_module(client):
    bad = stablehlo.parse("""
    func.func @main(%a: tensor<2xf32>, %b: tensor<3xf32>) -> tensor<2xf32> {
      %0 = stablehlo.add %a, %b : (tensor<2xf32>, tensor<3xf32>) -> tensor<2xf32>
      func.return %0 : tensor<2xf32>
    }""", verify=False)
    with pytest.raises(VerificationError, match="stablehlo.add"):
        client.compile(bad)


def test_check_failures_come_through(client):
    module = stablehlo.parse("""
    func.func @main() {
      %0 = stablehlo.constant dense<[1, 2]> : tensor<2xi32>
      check.expect_eq_const %0, dense<[1, 3]> : tensor<2xi32>
      func.return
    }""")
    with pytest.raises(CheckFailure):
        client.compile(module)()


def test_probe_dir_option_receives_probes(tmp_path):
    module = stablehlo.parse("""
    func.func @main() {
      %0 = stablehlo.constant dense<[1.5, 2.5]> : tensor<2xf32>
      %1 = interpreter.probe %0, probe_id = "p" : tensor<2xf32>
      check.expect_serialized_eq %1, probe_id = "p" : tensor<2xf32>
      func.return
    }""")
    make_client("interpreter", probe_dir=tmp_path).compile(module)()
    saved = list(tmp_path.glob("*.npy"))
    assert len(saved) == 1
    np.testing.assert_array_equal(np.load(saved[0]), np.array([1.5, 2.5], np.float32))
