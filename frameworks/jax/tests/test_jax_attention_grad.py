"""``jax.grad`` of JAX's attention spellings reaches the fused forward and backward kernels:
the compiled program holds ``openhlo.attention`` and ``openhlo.attention_grad`` (no score
matrix), and the gradients match a float64 numpy reference. A differentiated bias (whose
gradient needs the scores' cotangent whole) is left as written."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pjrt
from pjrt.api import CompileOptions
from frameworks.jax.tests.attention_reference import attention_reference as reference

RNG = np.random.default_rng(11)
L = 24


def _compile(fn, *args, fused=True):
    options = CompileOptions(env_option_overrides={"fused_attention": fused})
    return pjrt.make_client("cpu").compile(jax.jit(fn).lower(*args).as_text(), options)


def _composites(exe) -> list:
    return sorted(op.attr("name").value for op in exe.optimized_module.walk()
                  if op.name == "stablehlo.composite"
                  and op.attr("name").value.startswith("openhlo.attention"))


def _randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _close(got, want):
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("option", ["plain", "causal", "mask", "bias"])
@pytest.mark.parametrize("kv_heads", [4, 2, 1], ids=["mha", "gqa", "mqa"])
@pytest.mark.parametrize("batch", [1, 2])
def test_grad_of_dot_product_attention(batch, kv_heads, option):
    q, k, v = _randn(batch, L, 4, 16), _randn(batch, L, kv_heads, 16), \
        _randn(batch, L, kv_heads, 16)
    dout = _randn(batch, L, 4, 16)
    bias = _randn(batch, 4, L, L) if option == "bias" else None
    keep = RNG.random((batch, 1, L, L)) < 0.7 if option == "mask" else None
    if keep is not None:
        keep[..., 0] = True
    causal = option == "causal"
    extra = [x for x in (bias, keep) if x is not None]

    def loss(q, k, v, dout, *extra):
        out = jax.nn.dot_product_attention(
            q, k, v, bias=extra[0] if bias is not None else None,
            mask=extra[0] if keep is not None else None, is_causal=causal)
        return jnp.sum(out * dout)

    exe = _compile(jax.grad(loss, argnums=(0, 1, 2)), q, k, v, dout, *extra)
    assert _composites(exe) == ["openhlo.attention", "openhlo.attention_grad"]
    want_keep = np.tril(np.ones((L, L), bool)) if causal else keep
    want = reference(q, k, v, dout, bias=bias, keep=want_keep)
    _close(exe(q, k, v, dout, *extra), want[1:])


def test_value_and_grad_of_hand_written_softmax():
    """einsum + jax.nn.softmax, the loss read from the output: the forward composite serves
    both the loss and the backward."""
    q, k, v = _randn(2, L, 4, 8), _randn(2, L, 4, 8), _randn(2, L, 4, 8)
    dout = _randn(2, L, 4, 8)
    keep = np.tril(np.ones((L, L), bool))

    def loss(q, k, v, dout):
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(8.0)
        s = jnp.where(jnp.tril(jnp.ones((L, L), bool)), s, -1e30)
        out = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, axis=-1), v)
        return jnp.sum(out * dout)

    exe = _compile(jax.value_and_grad(loss, argnums=(0, 1, 2)), q, k, v, dout)
    assert _composites(exe) == ["openhlo.attention", "openhlo.attention_grad"]
    out, *grads = reference(q, k, v, dout, keep=keep)
    value, *got = exe(q, k, v, dout)
    np.testing.assert_allclose(value, np.sum(out * dout), rtol=1e-4)
    _close(got, grads)


def test_training_step_of_an_attention_layer():
    """Projections, causal grouped-query attention, a squared-error loss: value_and_grad
    over the weights; the fused step's results are those of the materialized one."""
    x, y = _randn(2, L, 32), _randn(2, L, 32)
    params = {"wq": _randn(32, 32) * 0.2, "wk": _randn(32, 16) * 0.2,
              "wv": _randn(32, 16) * 0.2, "wo": _randn(32, 32) * 0.2}

    def loss(params, x, y):
        q = (x @ params["wq"]).reshape(2, L, 4, 8)
        k = (x @ params["wk"]).reshape(2, L, 2, 8)
        v = (x @ params["wv"]).reshape(2, L, 2, 8)
        out = jax.nn.dot_product_attention(q, k, v, is_causal=True).reshape(2, L, 32)
        return jnp.mean((out @ params["wo"] - y) ** 2)

    step = jax.value_and_grad(loss)
    fused = _compile(step, params, x, y)
    assert _composites(fused) == ["openhlo.attention", "openhlo.attention_grad"]
    materialized = _compile(step, params, x, y, fused=False)
    assert _composites(materialized) == []
    leaves = jax.tree_util.tree_leaves((params, x, y))   # what the lowered program takes
    _close(fused(*leaves), [np.asarray(r, np.float64) for r in materialized(*leaves)])


def test_differentiated_bias_is_left_alone():
    q, k, v = _randn(1, L, 2, 8), _randn(1, L, 2, 8), _randn(1, L, 2, 8)
    dout, bias = _randn(1, L, 2, 8), _randn(1, 2, L, L)

    def loss(q, k, v, bias, dout):
        return jnp.sum(jax.nn.dot_product_attention(q, k, v, bias=bias) * dout)

    grad = jax.grad(loss, argnums=(0, 1, 2, 3))
    exe = _compile(grad, q, k, v, bias, dout)
    assert _composites(exe) == []
    got = exe(q, k, v, bias, dout)
    _close(got[:3], reference(q, k, v, dout, bias=bias)[1:])
    materialized = _compile(grad, q, k, v, bias, dout, fused=False)
    _close(got[3:], [np.asarray(materialized(q, k, v, bias, dout)[3], np.float64)])


def test_differentiated_max_is_left_alone():
    """exp(s - max(s)) / sum written out, the max not stop_gradient'ed: its backward has
    terms through the max, which the fused backward does not spell."""
    q, k, v = _randn(1, L, 2, 8), _randn(1, L, 2, 8), _randn(1, L, 2, 8)
    dout = _randn(1, L, 2, 8)

    def loss(q, k, v, dout):
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(8.0)
        e = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
        p = e / jnp.sum(e, axis=-1, keepdims=True)
        return jnp.sum(jnp.einsum("bhqk,bkhd->bqhd", p, v) * dout)

    exe = _compile(jax.grad(loss, argnums=(0, 1, 2)), q, k, v, dout)
    assert "openhlo.attention_grad" not in _composites(exe)
    _close(exe(q, k, v, dout), reference(q, k, v, dout)[1:])
