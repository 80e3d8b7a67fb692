"""The cpu-opt pipeline on the programs JAX emits for training workloads (small sizes):
an MLP train step, a causal attention block train step (layer norm, tanh GELU, softmax),
softmax cross-entropy with its gradient, and a conv + batch norm + relu block.

Each program keeps its interpreter results bit for bit, and the rewrites the pipeline is
for happened: no transpose feeds a dot_general, no transpose of a dot result is left that
a swap could absorb, no reduce runs over extent-1 dimensions, the causal mask stays an
iota compare instead of a folded constant, and a second run changes nothing."""
from __future__ import annotations

import numpy as np
import pytest

import stablehlo
from stablehlo.interpreter import evaluate
from stablehlo.ir.types import numpy_dtype
from xla_core.passes import PassContext, make_pipeline

jax = pytest.importorskip("jax")
jnp = jax.numpy


def _layer_norm(x, g, b):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + 1e-5) * g + b


def _cross_entropy(logits, labels):
    one_hot = jax.nn.one_hot(labels, logits.shape[-1])
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * one_hot, -1))


def _mlp_step(params, x, y):
    def loss(params):
        h = x
        for w, b in params[:-1]:
            h = jax.nn.relu(h @ w + b)
        w, b = params[-1]
        return _cross_entropy(h @ w + b, y)
    value, grads = jax.value_and_grad(loss)(params)
    return value, jax.tree.map(lambda p, g: p - 0.01 * g, params, grads)


B, S, D, H = 2, 40, 16, 2  # S * S > 1024: the mask is above cpu-opt's folding limit


def _heads(t):
    return t.reshape(B, S, H, D // H).transpose(0, 2, 1, 3)


def _attention_block(p, x):
    h = _layer_norm(x, p["g"], p["b"])
    q, k, v = jnp.split(h @ p["wqkv"], 3, -1)
    heads = lambda t: t.reshape(B, S, H, D // H).transpose(0, 2, 1, 3)
    q, k, v = heads(q), heads(k), heads(v)
    att = (q @ k.transpose(0, 1, 3, 2)) / np.sqrt(D // H)
    att = jnp.where(jnp.tril(jnp.ones((S, S), bool)), att, -1e9)
    o = (jax.nn.softmax(att, -1) @ v).transpose(0, 2, 1, 3).reshape(B, S, D)
    x = x + o @ p["wo"]
    return x + jax.nn.gelu(_layer_norm(x, p["g"], p["b"]) @ p["w1"], approximate=True) @ p["w2"]


def _attention_step(p, x):
    value, grads = jax.value_and_grad(lambda p: jnp.mean(_attention_block(p, x) ** 2))(p)
    return value, jax.tree.map(lambda a, g: a - 1e-3 * g, p, grads)


def _conv_bn_relu(w, g, b, x):
    y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
    mean, var = y.mean((0, 1, 2)), y.var((0, 1, 2))
    return jax.nn.relu((y - mean) * jax.lax.rsqrt(var + 1e-5) * g + b)


def _workloads():
    f32 = jnp.float32
    mlp = [(jnp.zeros((12, 16), f32), jnp.zeros(16, f32)), (jnp.zeros((16, 4), f32),
                                                            jnp.zeros(4, f32))]
    block = {"g": jnp.ones(D, f32), "b": jnp.zeros(D, f32),
             "wqkv": jnp.zeros((D, 3 * D), f32), "wo": jnp.zeros((D, D), f32),
             "w1": jnp.zeros((D, 4 * D), f32), "w2": jnp.zeros((4 * D, D), f32)}
    return {
        "mlp_train": (_mlp_step, (mlp, jnp.zeros((8, 12), f32), jnp.zeros(8, jnp.int32))),
        "attention_train": (_attention_step, (block, jnp.zeros((B, S, D), f32))),
        "attention_forward": (_attention_block, (block, jnp.zeros((B, S, D), f32))),
        "layer_norm_gelu": (lambda x, g, b: jax.nn.gelu(_layer_norm(x, g, b), approximate=True),
                            (jnp.zeros((4, D), f32), jnp.ones(D, f32), jnp.zeros(D, f32))),
        "cross_entropy_grad": (jax.value_and_grad(_cross_entropy),
                               (jnp.zeros((8, 10), f32), jnp.zeros(8, jnp.int32))),
        "conv_bn_relu": (_conv_bn_relu, (jnp.zeros((3, 3, 4, 8), f32), jnp.ones(8, f32),
                                         jnp.zeros(8, f32), jnp.zeros((2, 6, 6, 4), f32))),
    }


WORKLOADS = _workloads()


def _lower(name: str) -> str:
    fn, args = WORKLOADS[name]
    return jax.jit(fn).lower(*args).as_text()


def _inputs(module, seed: int) -> list:
    rng = np.random.default_rng(seed)
    args = []
    for t in module.lookup("main").type.inputs:
        dtype = numpy_dtype(t.element_type)
        if np.issubdtype(dtype, np.integer):
            args.append(rng.integers(0, 4, t.shape).astype(dtype))
        else:
            args.append(rng.standard_normal(t.shape).astype(dtype))
    return args


def _optimized(text: str):
    module = stablehlo.parse(text)
    make_pipeline("cpu-opt").run(module, PassContext())
    return module


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_results_unchanged_bit_for_bit(name):
    text = _lower(name)
    module = _optimized(text)
    args = _inputs(module, seed=0)
    before = evaluate(stablehlo.parse(text), args)
    after = evaluate(module, args)
    assert len(before) == len(after)
    for a, b in zip(before, after):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_shape_rewrites_happened(name):
    module = _optimized(_lower(name))
    ops = list(module.walk())
    for op in ops:
        if op.name == "stablehlo.dot_general":
            assert all(v.owner.name != "stablehlo.transpose" for v in op.operands
                       if not v.is_block_argument), f"a transpose feeds {op.where()}"
        if op.name == "stablehlo.reduce":
            x = op.operands[0]
            dims = op.attributes["dimensions"].values
            assert any(x.type.shape[d] != 1 for d in dims), f"unit reduce left: {op.where()}"
    assert not make_pipeline("cpu-opt").run(module, PassContext())


def test_attention_transposes_and_mask():
    text = _lower("attention_train")
    before = [op.name for op in stablehlo.parse(text).walk()]
    module = _optimized(text)
    after = [op.name for op in module.walk()]
    # the head split's transposes feeding dots and the weight gradients' transpose(dot)
    # are gone; only transposes moving the head dimension after a batched dot remain
    assert after.count("stablehlo.transpose") < before.count("stablehlo.transpose") // 2
    # tril(ones) stays a fusible iota compare rather than an S x S constant
    assert after.count("stablehlo.iota") == 2
    mask_type = f"tensor<{S}x{S}xi1>"
    assert not any(op.name == "stablehlo.constant" and str(op.results[0].type) == mask_type
                   for op in module.walk())
