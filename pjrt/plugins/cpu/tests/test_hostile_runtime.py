"""Hostile input to executables, buffers and clients: an OpenHLOError naming the argument,
or the correct result; never numpy's or the native layer's own exception."""
from __future__ import annotations

import numpy as np
import pytest

from pjrt import BufferDeletedError, FailedPreconditionError, make_client
from stablehlo.errors import OpenHLOError

BACKENDS = ("cpu", "interpreter")
DOUBLE = """
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""
X = np.arange(4, dtype=np.float32)


def _hostile_arguments():
    """(name, argument tuple, expected result or None for an error)."""
    import torch
    twice = 2 * X
    return [
        ("none", (None,), None),
        ("no arguments", (), None),
        ("two arguments", (X, X), None),
        ("str", ("abcd",), None),
        ("dict", ({},), None),
        ("object array", (np.array([1, 2, 3, 4], dtype=object),), None),
        ("str array", (np.array(list("abcd")),), None),
        ("structured 4-byte", (np.zeros(4, dtype=[("a", "i2"), ("b", "i2")]),), None),
        ("raw V4", (np.zeros(4, dtype="V4"),), None),
        ("complex", (X.astype(np.complex64),), None),
        ("float64", (X.astype(np.float64),), None),
        ("int32", (X.astype(np.int32),), None),
        ("0-d", (np.float32(1),), None),
        ("python scalar", (3.0,), None),
        ("2-d", (X.reshape(2, 2),), None),
        ("too long list", ([1.0] * 5,), None),
        ("huge broadcast view", (np.broadcast_to(np.float32(1), (10**12,)),), None),
        ("huge 2-d view", (np.broadcast_to(np.float32(1), (2**30, 2**30)),), None),
        ("non-contiguous", (np.arange(8, dtype=np.float32)[::2],), 2 * X * 2),
        ("read-only view", (np.broadcast_to(np.float32(1.5), (4,)),), np.full(4, 3, np.float32)),
        ("list", ([0.0, 1.0, 2.0, 3.0],), twice),
        ("big-endian", (np.arange(4, dtype=">f4"),), twice),
        ("torch tensor", (torch.arange(4, dtype=torch.float32),), twice),
    ]


@pytest.fixture(scope="module", params=BACKENDS)
def client(request):
    return make_client(request.param)


@pytest.mark.parametrize("name, args, expected", _hostile_arguments(),
                         ids=[case[0] for case in _hostile_arguments()])
def test_hostile_arguments(client, name, args, expected):
    exe = client.compile(DOUBLE)
    for run in (lambda: exe(*args), lambda: [b.to_numpy() for b in exe.execute(args)]):
        if expected is None:
            with pytest.raises(OpenHLOError, match="argument"):
                run()
        else:
            np.testing.assert_array_equal(run()[0], expected)


def test_jax_array_argument(client):
    jnp = pytest.importorskip("jax.numpy")
    exe = client.compile(DOUBLE)
    np.testing.assert_array_equal(exe(jnp.arange(4, dtype=jnp.float32))[0], 2 * X)
    with pytest.raises(OpenHLOError, match="argument 0"):
        exe(jnp.arange(4, dtype=jnp.int32))


def test_structured_dtype_names_argument_and_dtype(client):
    exe = client.compile(DOUBLE)
    with pytest.raises(OpenHLOError, match=r"argument 0 of @main.*\('a', '<i2'\)"):
        exe(np.zeros(4, dtype=[("a", "i2"), ("b", "i2")]))
    with pytest.raises(OpenHLOError, match="argument 0 of @main.*void32"):
        exe(np.zeros(4, dtype="V4"))


def test_raw_bytes_of_ml_dtypes_are_still_accepted(client):
    import ml_dtypes
    exe = client.compile(DOUBLE.replace("f32", "bf16"))
    values = np.arange(4).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(exe(values.view("V2"))[0], 2 * values)


def test_huge_transfer_is_refused(client):
    with pytest.raises(OpenHLOError, match="buffer_from_numpy.*OPENHLO_MAX_BUFFER_BYTES"):
        client.buffer_from_numpy(np.broadcast_to(np.float32(1), (2**30, 2**30)))


def test_big_endian_buffer_holds_native_values(client):
    buffer = client.buffer_from_numpy(np.arange(4, dtype=">f4"))
    assert buffer.dtype == np.float32
    np.testing.assert_array_equal(buffer.to_numpy(), X)


@pytest.mark.parametrize("use", ["copy_to_device", "to_numpy", "execute"])
def test_donated_buffer_raises_buffer_deleted(client, use):
    exe = client.compile(DOUBLE)
    buffer = client.buffer_from_numpy(X)
    exe.execute([buffer], donate=[0])
    calls = {"copy_to_device": lambda: buffer.copy_to_device(client.devices()[0]),
             "to_numpy": buffer.to_numpy, "execute": lambda: exe.execute([buffer])}
    with pytest.raises(BufferDeletedError, match="float32"):
        calls[use]()


@pytest.mark.parametrize("backend", BACKENDS)
def test_closed_client_refuses_work(backend):
    with make_client(backend) as client:
        exe = client.compile(DOUBLE)
        np.testing.assert_array_equal(exe(X)[0], 2 * X)
    client.close()  # idempotent
    for call in (lambda: client.compile(DOUBLE), lambda: client.buffer_from_numpy(X),
                 lambda: exe(X), lambda: exe.execute([X])):
        with pytest.raises(FailedPreconditionError, match="closed"):
            call()


@pytest.mark.parametrize("backend", BACKENDS)
def test_constants_held_as_read_only_broadcast_views(backend):
    # The IR may hold a splat constant as a zero-strided read-only view of one element: the
    # backend reads it (copying where it writes), and results stay independent of it.
    import stablehlo
    from stablehlo.ir.attributes import DenseElementsAttr
    module = stablehlo.parse("""
func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<f32>) {
  %c = stablehlo.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %s = stablehlo.constant dense<5.0> : tensor<f32>
  %0 = stablehlo.add %x, %c : tensor<4xf32>
  return %0, %c, %s : tensor<4xf32>, tensor<4xf32>, tensor<f32>
}""")
    for op in module.lookup("main").body.operations[:2]:
        attr = op.attributes["value"]
        element = np.asarray(attr.array).reshape(-1)[:1].reshape(())
        op.attributes["value"] = DenseElementsAttr(
            attr.type, np.broadcast_to(element + 0.5, attr.type.shape))
    client = make_client(backend)
    for _ in range(2):  # a second run sees the constants unchanged
        total, constant, scalar = client.compile(module)(X)
        np.testing.assert_array_equal(total, X + 1.5)
        np.testing.assert_array_equal(constant, np.full(4, 1.5, np.float32))
        assert scalar == np.float32(5.5)
