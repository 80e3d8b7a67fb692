"""The benchmark workloads: each one written once in JAX and once in PyTorch, same math.

A ``Workload`` builds an ``Instance`` for given sizes: the input arrays (numpy, from a
seeded generator, shared by every runner) and the two functions, each taking those arrays
(as jax arrays / torch tensors) positionally and returning a tuple of arrays. Sizes are
parameters so the tests can check JAX against PyTorch on small shapes; ``sizes`` holds the
benchmark's shapes, ``test_sizes`` the reduced ones.

Training steps are pure functions in both frameworks (``jax.value_and_grad`` and
``torch.func.grad_and_value``), so ``torch.compile`` sees the whole step as one graph, as
``jax.jit`` does.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

LAYER_NORM_EPS = 1e-5
BATCH_NORM_EPS = 1e-5


@dataclass(frozen=True)
class Instance:
    inputs: tuple          # numpy arrays, the same for every runner
    jax_fn: Callable       # (*jax arrays) -> tuple of arrays
    torch_fn: Callable     # (*torch tensors) -> tuple of tensors


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    build: Callable[..., Instance]   # build(rng, **sizes)
    sizes: dict
    test_sizes: dict
    quick_sizes: dict = field(default_factory=dict)  # --quick overrides (empty: full sizes)

    def instance(self, seed: int = 0, sizes: dict | None = None) -> Instance:
        return self.build(np.random.default_rng(seed), **(self.sizes if sizes is None else sizes))


def _normal(rng, shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _dense_init(rng, fan_in, fan_out):
    return _normal(rng, (fan_in, fan_out), 1.0 / math.sqrt(fan_in)), \
        _normal(rng, (fan_out,), 0.01)


# ---- mlp_train --------------------------------------------------------------------------

def _mlp_train(rng, batch, d_in, hidden, classes, lr=0.01):
    w1, b1 = _dense_init(rng, d_in, hidden)
    w2, b2 = _dense_init(rng, hidden, hidden)
    w3, b3 = _dense_init(rng, hidden, classes)
    x = _normal(rng, (batch, d_in))
    labels = rng.integers(0, classes, size=batch).astype(np.int32)

    def jax_fn(w1, b1, w2, b2, w3, b3, x, labels):
        import jax
        import jax.numpy as jnp

        def loss(params):
            w1, b1, w2, b2, w3, b3 = params
            h = jax.nn.relu(x @ w1 + b1)
            h = jax.nn.relu(h @ w2 + b2)
            logp = jax.nn.log_softmax(h @ w3 + b3, axis=-1)
            return -jnp.mean(jnp.sum(jax.nn.one_hot(labels, classes) * logp, axis=-1))
        params = (w1, b1, w2, b2, w3, b3)
        value, grads = jax.value_and_grad(loss)(params)
        return (*(p - lr * g for p, g in zip(params, grads)), value)

    def torch_fn(w1, b1, w2, b2, w3, b3, x, labels):
        import torch
        import torch.nn.functional as F

        def loss(params):
            w1, b1, w2, b2, w3, b3 = params
            h = torch.relu(x @ w1 + b1)
            h = torch.relu(h @ w2 + b2)
            logp = F.log_softmax(h @ w3 + b3, dim=-1)
            return -torch.mean(torch.sum(F.one_hot(labels.long(), classes) * logp, dim=-1))
        params = (w1, b1, w2, b2, w3, b3)
        grads, value = torch.func.grad_and_value(loss)(params)
        return (*(p - lr * g for p, g in zip(params, grads)), value)

    return Instance((w1, b1, w2, b2, w3, b3, x, labels), jax_fn, torch_fn)


# ---- gpt_block_fwd / gpt_block_train ----------------------------------------------------

def _gpt_params(rng, d):
    ones, zeros = np.ones(d, np.float32), np.zeros(d, np.float32)
    w_qkv, b_qkv = _dense_init(rng, d, 3 * d)
    w_proj, b_proj = _dense_init(rng, d, d)
    w_fc, b_fc = _dense_init(rng, d, 4 * d)
    w_out, b_out = _dense_init(rng, 4 * d, d)
    return (ones, zeros, w_qkv, b_qkv, w_proj, b_proj, ones.copy(), zeros.copy(),
            w_fc, b_fc, w_out, b_out)


def _gpt_block_jax(x, params, heads):
    import jax
    import jax.numpy as jnp
    ln1_g, ln1_b, w_qkv, b_qkv, w_proj, b_proj, ln2_g, ln2_b, w_fc, b_fc, w_out, b_out = params
    batch, seq, d = x.shape
    hd = d // heads

    def layer_norm(v, g, b):
        mean = jnp.mean(v, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(v - mean), axis=-1, keepdims=True)
        return (v - mean) * jax.lax.rsqrt(var + LAYER_NORM_EPS) * g + b

    qkv = layer_norm(x, ln1_g, ln1_b) @ w_qkv + b_qkv
    q, k, v = (t.reshape(batch, seq, heads, hd).transpose(0, 2, 1, 3)
               for t in jnp.split(qkv, 3, axis=-1))
    scores = (q @ k.transpose(0, 1, 3, 2)) / math.sqrt(hd)
    causal = jnp.tril(jnp.ones((seq, seq), dtype=bool))
    probs = jax.nn.softmax(jnp.where(causal, scores, -jnp.inf), axis=-1)
    attn = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, d)
    x = x + attn @ w_proj + b_proj
    h = jax.nn.gelu(layer_norm(x, ln2_g, ln2_b) @ w_fc + b_fc, approximate=True)
    return x + h @ w_out + b_out


def _gpt_block_torch(x, params, heads):
    import torch.nn.functional as F
    ln1_g, ln1_b, w_qkv, b_qkv, w_proj, b_proj, ln2_g, ln2_b, w_fc, b_fc, w_out, b_out = params
    batch, seq, d = x.shape
    hd = d // heads
    qkv = F.layer_norm(x, (d,), ln1_g, ln1_b, LAYER_NORM_EPS) @ w_qkv + b_qkv
    q, k, v = (t.reshape(batch, seq, heads, hd).transpose(1, 2) for t in qkv.split(d, dim=-1))
    attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # scale 1/sqrt(hd)
    attn = attn.transpose(1, 2).reshape(batch, seq, d)
    x = x + attn @ w_proj + b_proj
    h = F.gelu(F.layer_norm(x, (d,), ln2_g, ln2_b, LAYER_NORM_EPS) @ w_fc + b_fc,
               approximate="tanh")
    return x + h @ w_out + b_out


def _gpt_block_fwd(rng, batch, seq, d, heads):
    params = _gpt_params(rng, d)
    x = _normal(rng, (batch, seq, d))

    def jax_fn(x, *params):
        return (_gpt_block_jax(x, params, heads),)

    def torch_fn(x, *params):
        return (_gpt_block_torch(x, params, heads),)
    return Instance((x, *params), jax_fn, torch_fn)


def _gpt_block_train(rng, batch, seq, d, heads):
    params = _gpt_params(rng, d)
    x = _normal(rng, (batch, seq, d))

    def jax_fn(x, *params):
        import jax
        import jax.numpy as jnp
        value, grads = jax.value_and_grad(
            lambda p: jnp.mean(jnp.square(_gpt_block_jax(x, p, heads))))(params)
        return (value, *grads)

    def torch_fn(x, *params):
        import torch
        grads, value = torch.func.grad_and_value(
            lambda p: torch.mean(torch.square(_gpt_block_torch(x, p, heads))))(params)
        return (value, *grads)
    return Instance((x, *params), jax_fn, torch_fn)


# ---- layernorm_gelu ---------------------------------------------------------------------

def _layernorm_gelu(rng, rows, cols):
    x = _normal(rng, (rows, cols))
    gamma = (1.0 + _normal(rng, (cols,), 0.1))
    beta = _normal(rng, (cols,), 0.1)

    def jax_fn(x, gamma, beta):
        import jax
        import jax.numpy as jnp
        mean = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
        y = (x - mean) * jax.lax.rsqrt(var + LAYER_NORM_EPS) * gamma + beta
        return (x + jax.nn.gelu(y, approximate=True),)

    def torch_fn(x, gamma, beta):
        import torch.nn.functional as F
        y = F.layer_norm(x, (x.shape[-1],), gamma, beta, LAYER_NORM_EPS)
        return (x + F.gelu(y, approximate="tanh"),)
    return Instance((x, gamma, beta), jax_fn, torch_fn)


# ---- softmax_xent -----------------------------------------------------------------------

def _softmax_xent(rng, rows, vocab):
    logits = _normal(rng, (rows, vocab), 2.0)
    labels = rng.integers(0, vocab, size=rows).astype(np.int32)

    def jax_fn(logits, labels):
        import jax
        import jax.numpy as jnp

        def loss(z):
            logp = jax.nn.log_softmax(z, axis=-1)
            return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=-1))
        value, grad = jax.value_and_grad(loss)(logits)
        return value, grad

    def torch_fn(logits, labels):
        import torch
        import torch.nn.functional as F
        grad, value = torch.func.grad_and_value(
            lambda z: F.cross_entropy(z, labels.long()))(logits)
        return value, grad
    return Instance((logits, labels), jax_fn, torch_fn)


# ---- conv_block -------------------------------------------------------------------------

def _conv_block(rng, batch, height, width, channels):
    x = _normal(rng, (batch, height, width, channels))
    layers = []
    for _ in range(2):
        w = _normal(rng, (3, 3, channels, channels), 1.0 / math.sqrt(9 * channels))  # HWIO
        mean = _normal(rng, (channels,), 0.1)
        var = (1.0 + np.abs(_normal(rng, (channels,), 0.1))).astype(np.float32)
        gamma = (1.0 + _normal(rng, (channels,), 0.1))
        beta = _normal(rng, (channels,), 0.1)
        layers += [w, mean, var, gamma, beta]

    def jax_fn(x, *layers):
        import jax
        for i in range(0, len(layers), 5):
            w, mean, var, gamma, beta = layers[i:i + 5]
            x = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                             dimension_numbers=("NHWC", "HWIO", "NHWC"))
            x = (x - mean) * jax.lax.rsqrt(var + BATCH_NORM_EPS) * gamma + beta
            x = jax.nn.relu(x)
        return (x,)

    def torch_fn(x, *layers):
        import torch
        import torch.nn.functional as F
        # NHWC storage seen as NCHW is exactly PyTorch's channels_last format: no copy.
        x = x.permute(0, 3, 1, 2)
        for i in range(0, len(layers), 5):
            w, mean, var, gamma, beta = layers[i:i + 5]
            w = w.permute(3, 2, 0, 1).contiguous(memory_format=torch.channels_last)  # OIHW
            x = F.conv2d(x, w, padding=1)
            x = F.batch_norm(x, mean, var, gamma, beta, training=False, eps=BATCH_NORM_EPS)
            x = torch.relu(x)
        return (x.permute(0, 2, 3, 1),)
    return Instance((x, *layers), jax_fn, torch_fn)


# ---- tiny_dispatch / while_loop ---------------------------------------------------------

def _tiny_dispatch(rng, n):
    x = _normal(rng, (n,))
    return Instance((x,), lambda x: (x + 1,), lambda x: (x + 1,))


def _while_loop(rng, n, iterations):
    x = _normal(rng, (n,))

    def jax_fn(x):
        from jax import lax
        return (lax.fori_loop(0, iterations, lambda i, v: v * 0.99 + 0.01, x),)

    def torch_fn(x):
        for _ in range(iterations):  # torch.compile unrolls this Python loop
            x = x * 0.99 + 0.01
        return (x,)
    return Instance((x,), jax_fn, torch_fn)


WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    Workload("mlp_train", "MLP 784-1024-1024-10, batch 128: fwd+bwd+SGD", _mlp_train,
             {"batch": 128, "d_in": 784, "hidden": 1024, "classes": 10},
             {"batch": 8, "d_in": 20, "hidden": 32, "classes": 5}),
    Workload("gpt_block_fwd", "GPT-2 block d=768 h=12 seq=256 batch=2, forward",
             _gpt_block_fwd, {"batch": 2, "seq": 256, "d": 768, "heads": 12},
             {"batch": 2, "seq": 8, "d": 32, "heads": 4},
             {"batch": 1, "seq": 64, "d": 256, "heads": 4}),
    Workload("gpt_block_train", "the same GPT-2 block, forward + backward",
             _gpt_block_train, {"batch": 2, "seq": 256, "d": 768, "heads": 12},
             {"batch": 2, "seq": 8, "d": 32, "heads": 4},
             {"batch": 1, "seq": 64, "d": 256, "heads": 4}),
    Workload("layernorm_gelu", "x[8192,1024]: layer norm, GELU, residual",
             _layernorm_gelu, {"rows": 8192, "cols": 1024}, {"rows": 16, "cols": 64},
             {"rows": 1024, "cols": 1024}),
    Workload("softmax_xent", "logits[256,32000]: softmax x-entropy loss and gradient",
             _softmax_xent, {"rows": 256, "vocab": 32000}, {"rows": 8, "vocab": 100},
             {"rows": 64, "vocab": 32000}),
    Workload("conv_block", "NHWC 16x56x56x64: 2 x (3x3 conv, batch norm, ReLU)",
             _conv_block, {"batch": 16, "height": 56, "width": 56, "channels": 64},
             {"batch": 2, "height": 6, "width": 5, "channels": 4},
             {"batch": 2, "height": 28, "width": 28, "channels": 64}),
    Workload("tiny_dispatch", "x + 1 on 16 floats", _tiny_dispatch, {"n": 16}, {"n": 16}),
    Workload("while_loop", "fori_loop of 1000 x*0.99+0.01 on 16 floats", _while_loop,
             {"n": 16, "iterations": 1000}, {"n": 16, "iterations": 20},
             {"n": 16, "iterations": 200}),  # inductor unrolls the loop: compile time
)}
