"""JAX training steps lowered to StableHLO text, at small sizes, for the buffer tests."""
from __future__ import annotations

import itertools

import numpy as np
import pytest


def _jax():
    jax = pytest.importorskip("jax")
    return jax, jax.numpy


def mlp_train_step() -> tuple[str, list]:
    """Two hidden ReLU layers, mean squared error, one SGD step."""
    jax, jnp = _jax()

    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = jax.nn.relu(h @ w + b)
        w, b = params[-1]
        return jnp.mean((h @ w + b - y) ** 2)

    def step(params, x, y):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        return value, jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

    rng = np.random.default_rng(0)
    sizes = [32, 64, 64, 16]
    params = [(rng.standard_normal((a, b), np.float32) * 0.2, np.zeros(b, np.float32))
              for a, b in itertools.pairwise(sizes)]
    x = rng.standard_normal((8, 32), np.float32)
    y = rng.standard_normal((8, 16), np.float32)
    text = jax.jit(step).lower(params, x, y).as_text()
    return text, jax.tree.leaves((params, x, y))


def gpt_block_train_step() -> tuple[str, list]:
    """One pre-norm transformer block (causal attention + GELU MLP), next-token loss, SGD."""
    jax, jnp = _jax()
    batch, seq, dim, heads, hidden, vocab = 2, 8, 16, 2, 64, 32

    def layer_norm(x, g):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + 1e-5) * g

    def block(p, x):
        h = layer_norm(x, p["ln1"])
        q, k, v = (jnp.einsum("btd,de->bte", h, p[n]).reshape(batch, seq, heads, -1)
                   for n in ("wq", "wk", "wv"))
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(dim // heads)
        mask = np.tril(np.ones((seq, seq), bool))
        att = jax.nn.softmax(jnp.where(mask, scores, -1e9), axis=-1)
        out = jnp.einsum("bhqk,bkhd->bqhd", att, v).reshape(batch, seq, dim)
        x = x + out @ p["wo"]
        h = layer_norm(x, p["ln2"])
        return x + jax.nn.gelu(h @ p["w1"]) @ p["w2"]

    def loss(p, tokens, targets):
        x = p["embed"][tokens]
        logits = block(p, x) @ p["embed"].T
        logp = jax.nn.log_softmax(logits, -1)
        return -jnp.take_along_axis(logp, targets[..., None], -1).mean()

    def step(p, tokens, targets):
        value, grads = jax.value_and_grad(loss)(p, tokens, targets)
        return value, jax.tree.map(lambda a, g: a - 0.1 * g, p, grads)

    rng = np.random.default_rng(1)
    shapes = {"embed": (vocab, dim), "ln1": (dim,), "ln2": (dim,), "wq": (dim, dim),
              "wk": (dim, dim), "wv": (dim, dim), "wo": (dim, dim), "w1": (dim, hidden),
              "w2": (hidden, dim)}
    params = {n: (np.ones(s, np.float32) if n.startswith("ln") else
                  rng.standard_normal(s, np.float32) * 0.2) for n, s in shapes.items()}
    tokens = rng.integers(0, vocab, (batch, seq)).astype(np.int32)
    targets = rng.integers(0, vocab, (batch, seq)).astype(np.int32)
    text = jax.jit(step).lower(params, tokens, targets).as_text()
    return text, jax.tree.leaves((params, tokens, targets))
