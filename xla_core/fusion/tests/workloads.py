"""Small JAX programs lowered to StableHLO text, shared by the fusion tests and timing.

Each entry returns (text, example numpy arguments). JAX is imported lazily.
"""
from __future__ import annotations

import numpy as np


def _lower(fn, *args) -> str:
    import jax
    return jax.jit(fn).lower(*args).as_text()


def _normal(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def softmax():
    import jax
    x = _normal(np.random.default_rng(0), 8, 32)
    return _lower(lambda x: jax.nn.softmax(x, axis=-1), x), [x]


def _layer_norm(x, g, b):
    import jax.numpy as jnp
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jnp.reciprocal(jnp.sqrt(var + 1e-5)) * g + b


def layer_norm_gelu():
    import jax
    rng = np.random.default_rng(1)
    args = [_normal(rng, 8, 32), _normal(rng, 32), _normal(rng, 32)]
    return _lower(lambda x, g, b: jax.nn.gelu(_layer_norm(x, g, b)), *args), args


def _attention(x, wqkv, wo, heads):
    import jax
    import jax.numpy as jnp
    t, d = x.shape
    q, k, v = jnp.split(x @ wqkv, 3, axis=-1)
    q, k, v = (a.reshape(t, heads, d // heads).transpose(1, 0, 2) for a in (q, k, v))
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(d // heads).astype(np.float32)
    mask = jnp.tril(jnp.ones((t, t), bool))
    scores = jnp.where(mask, scores, -1e9)
    out = jax.nn.softmax(scores, axis=-1) @ v
    return out.transpose(1, 0, 2).reshape(t, d) @ wo


def _block(params, x):
    import jax
    g1, b1, wqkv, wo, g2, b2, w1, c1, w2, c2 = params
    x = x + _attention(_layer_norm(x, g1, b1), wqkv, wo, heads=2)
    h = jax.nn.gelu(_layer_norm(x, g2, b2) @ w1 + c1)
    return x + h @ w2 + c2


def _block_params(rng, d):
    return [np.ones(d, np.float32), np.zeros(d, np.float32), _normal(rng, d, 3 * d) * 0.1,
            _normal(rng, d, d) * 0.1, np.ones(d, np.float32), np.zeros(d, np.float32),
            _normal(rng, d, 4 * d) * 0.1, np.zeros(4 * d, np.float32),
            _normal(rng, 4 * d, d) * 0.1, np.zeros(d, np.float32)]


def attention_block():
    rng = np.random.default_rng(2)
    params, x = _block_params(rng, 16), _normal(rng, 8, 16)
    return _lower(_block, params, x), [*params, x]


def mlp_train_step():
    import jax
    import jax.numpy as jnp
    rng = np.random.default_rng(3)

    def loss(params, x, labels):
        w1, b1, w2, b2 = params
        h = jax.nn.relu(x @ w1 + b1)
        logits = h @ w2 + b2
        logp = jax.nn.log_softmax(logits)
        return -jnp.mean(jnp.sum(logp * jax.nn.one_hot(labels, logits.shape[-1]), axis=-1))

    def step(params, x, labels):
        grads = jax.grad(loss)(params, x, labels)
        return [p - 0.1 * g for p, g in zip(params, grads)]

    params = [_normal(rng, 16, 32) * 0.1, np.zeros(32, np.float32),
              _normal(rng, 32, 10) * 0.1, np.zeros(10, np.float32)]
    x, labels = _normal(rng, 8, 16), rng.integers(0, 10, 8).astype(np.int32)
    return _lower(step, params, x, labels), [*params, x, labels]


def gpt_block_train_step(d=64, t=32, layers=1):
    """GPT blocks' forward, backward (jax.grad) and SGD update (~300 ops per layer)."""
    import jax
    import jax.numpy as jnp
    rng = np.random.default_rng(4)

    def loss(params, x):
        for layer in params:
            x = _block(layer, x)
        return jnp.mean(x ** 2)

    def step(params, x):
        grads = jax.grad(loss)(params, x)
        return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, params, grads)

    params, x = [_block_params(rng, d) for _ in range(layers)], _normal(rng, t, d)
    return _lower(step, params, x), [*(p for layer in params for p in layer), x]


WORKLOADS = {"softmax": softmax, "layer_norm_gelu": layer_norm_gelu,
             "attention_block": attention_block, "mlp_train_step": mlp_train_step,
             "gpt_block_train_step": gpt_block_train_step}
