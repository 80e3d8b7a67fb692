"""The workloads' JAX and PyTorch versions compute the same thing (on reduced sizes)."""
import numpy as np
import pytest

from tools.bench.suite import check_outputs
from tools.bench.workloads import WORKLOADS


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_jax_and_torch_agree(name):
    import jax
    import torch
    workload = WORKLOADS[name]
    instance = workload.instance(seed=1, sizes=workload.test_sizes)
    with jax.default_device(jax.devices("cpu")[0]):
        want = [np.asarray(o) for o in jax.jit(instance.jax_fn)(*instance.inputs)]
    got = [o.detach().numpy() for o in
           instance.torch_fn(*(torch.from_numpy(a) for a in instance.inputs))]
    assert check_outputs(got, want) is None
    assert all(np.isfinite(o).all() for o in want)


def test_sizes_are_parameters():
    workload = WORKLOADS["layernorm_gelu"]
    small = workload.instance(sizes={"rows": 3, "cols": 5})
    assert [a.shape for a in small.inputs] == [(3, 5), (5,), (5,)]
    big = workload.instance()
    assert big.inputs[0].shape == (8192, 1024)


def test_inputs_are_seeded_and_float32():
    workload = WORKLOADS["mlp_train"]
    a = workload.instance(seed=3, sizes=workload.test_sizes).inputs
    b = workload.instance(seed=3, sizes=workload.test_sizes).inputs
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert {x.dtype for x in a} == {np.dtype(np.float32), np.dtype(np.int32)}


def test_mlp_train_is_one_sgd_step():
    """Independent numpy check of one workload: the updated params and the loss."""
    workload = WORKLOADS["mlp_train"]
    instance = workload.instance(sizes=workload.test_sizes)
    w1, b1, w2, b2, w3, b3, x, labels = (a.astype(np.float64) for a in instance.inputs)
    labels = labels.astype(int)
    h1 = np.maximum(x @ w1 + b1, 0)
    h2 = np.maximum(h1 @ w2 + b2, 0)
    z = h2 @ w3 + b3
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    n = len(labels)
    loss = -np.mean(np.log(p[np.arange(n), labels]))
    dz = (p - np.eye(z.shape[1])[labels]) / n
    dh2 = (dz @ w3.T) * (h2 > 0)
    dh1 = (dh2 @ w2.T) * (h1 > 0)
    grads = [x.T @ dh1, dh1.sum(0), h1.T @ dh2, dh2.sum(0), h2.T @ dz, dz.sum(0)]
    params = [w1, b1, w2, b2, w3, b3]
    want = [(p_ - 0.01 * g).astype(np.float32) for p_, g in zip(params, grads)]
    want.append(np.float32(loss))
    import jax
    got = [np.asarray(o) for o in jax.jit(instance.jax_fn)(*instance.inputs)]
    assert check_outputs(got, [np.asarray(w) for w in want]) is None
