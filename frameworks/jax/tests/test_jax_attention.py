"""JAX's spellings of attention reach the fused kernel: ``jax.nn.dot_product_attention``
(causal, bias, mask, grouped- and multi-query heads) and the hand-written einsum + softmax
(any leading dims), lowered by JAX, compiled by the cpu backend (whose pipeline runs
fuse-attention), compared with a float64 numpy reference. A softmax that is no attention
is left alone."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pjrt
from frameworks.jax.tests.attention_reference import attention_reference as reference

RNG = np.random.default_rng(7)


def _compile(fn, *args):
    return pjrt.make_client("cpu").compile(jax.jit(fn).lower(*args).as_text())


def _composites(exe) -> list:
    return [op for op in exe.optimized_module.walk() if op.name == "stablehlo.composite"
            and op.attr("name").value == "openhlo.attention"]


def _randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


CAUSAL = np.tril(np.ones((40, 40), bool))


@pytest.mark.parametrize("kv_heads", [4, 2, 1], ids=["mha", "gqa", "mqa"])
def test_dot_product_attention_causal(kv_heads):
    q, k, v = _randn(2, 40, 4, 16), _randn(2, 40, kv_heads, 16), _randn(2, 40, kv_heads, 16)
    exe = _compile(lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=True),
                   q, k, v)
    (op,) = _composites(exe)
    assert op.attr("composite_attributes").get("causal").value
    np.testing.assert_allclose(exe(q, k, v)[0], reference(q, k, v, keep=CAUSAL), rtol=1e-4,
                               atol=1e-5)


def test_dot_product_attention_bias_and_mask():
    q, k, v = _randn(1, 33, 4, 8), _randn(1, 45, 2, 8), _randn(1, 45, 2, 8)
    bias = _randn(1, 4, 33, 45)
    mask = RNG.random((1, 1, 33, 45)) < 0.8
    mask[..., 0] = True

    def fn(q, k, v, bias, mask):
        return jax.nn.dot_product_attention(q, k, v, bias=bias, mask=mask, scale=0.3)

    exe = _compile(fn, q, k, v, bias, mask)
    assert len(_composites(exe)) == 1
    want = reference(q, k, v, bias=bias, keep=mask, scale=0.3)
    np.testing.assert_allclose(exe(q, k, v, bias, mask)[0], want, rtol=1e-4, atol=1e-5)


def test_hand_written_einsum_softmax_with_leading_dims():
    """[batch, patches, heads, L, D] (five dims, as nested vision transformers have)."""
    q, k, v = _randn(2, 3, 2, 17, 8), _randn(2, 3, 2, 23, 8), _randn(2, 3, 2, 23, 8)
    bias = _randn(17, 23)

    def fn(q, k, v, bias):
        s = jnp.einsum("bphqd,bphkd->bphqk", q, k) / jnp.sqrt(8.0) + bias
        return jnp.einsum("bphqk,bphkd->bphqd", jax.nn.softmax(s, axis=-1), v)

    exe = _compile(fn, q, k, v, bias)
    assert len(_composites(exe)) == 1
    to_btnh = (0, 1, 3, 2, 4)
    want = reference(*(x.transpose(to_btnh) for x in (q, k, v)), bias=bias).transpose(to_btnh)
    np.testing.assert_allclose(exe(q, k, v, bias)[0], want, rtol=1e-4, atol=1e-5)


def test_softmax_that_is_no_attention_is_left_alone():
    x, w = _randn(8, 40), _randn(40, 16)

    def fn(x, w):  # the probabilities are also a result: the scores are needed whole
        p = jax.nn.softmax(x @ w @ w.T, axis=-1)
        return p, p @ w

    exe = _compile(fn, x, w)
    assert _composites(exe) == []
    s = x.astype(np.float64) @ w @ w.T
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(exe(x, w)[0], p, rtol=1e-4, atol=1e-6)


# Batch 1 and a size-1 group make unit dims that cpu-opt turns JAX's transposes into
# reshapes of: the softmax's max and subtract then read the logits through different
# reshapes, and which unit dim a reshape labels as the batch is arbitrary.
GRID_OPTIONS = ["plain", "causal", "mask", "bias", "causal_bias"]


def _grid_inputs(batch, kv_heads, option):
    q, k, v = _randn(batch, 24, 4, 16), _randn(batch, 24, kv_heads, 16), \
        _randn(batch, 24, kv_heads, 16)
    bias = _randn(batch, 4, 24, 24) if "bias" in option else None
    keep = RNG.random((batch, 1, 24, 24)) < 0.7 if option == "mask" else None
    if keep is not None:
        keep[..., 0] = True
    causal = option.startswith("causal")
    want_keep = np.tril(np.ones((24, 24), bool)) if causal else keep
    return (q, k, v), bias, keep, causal, reference(q, k, v, bias=bias, keep=want_keep)


@pytest.mark.parametrize("option", GRID_OPTIONS)
@pytest.mark.parametrize("kv_heads", [4, 2, 1], ids=["mha", "gqa", "mqa"])
@pytest.mark.parametrize("batch", [1, 2])
def test_dot_product_attention_grid(batch, kv_heads, option):
    (q, k, v), bias, keep, causal, want = _grid_inputs(batch, kv_heads, option)
    extra = [x for x in (bias, keep) if x is not None]

    def fn(q, k, v, *extra):
        it = iter(extra)
        return jax.nn.dot_product_attention(q, k, v, bias=next(it) if bias is not None
                                            else None, mask=next(it) if keep is not None
                                            else None, is_causal=causal)

    exe = _compile(fn, q, k, v, *extra)
    (op,) = _composites(exe)
    assert op.attr("composite_attributes").get("causal").value == causal
    np.testing.assert_allclose(exe(q, k, v, *extra)[0], want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("option", GRID_OPTIONS)
@pytest.mark.parametrize("batch", [1, 2])
def test_hand_written_softmax_grid(batch, option):
    """softmax(q k^T * scale + additive mask) v, in JAX's BTNH layout; a boolean mask and
    causality through ``jnp.where``."""
    (q, k, v), bias, keep, causal, want = _grid_inputs(batch, 4, option)
    extra = [x for x in (bias, keep) if x is not None]

    def fn(q, k, v, *extra):
        it = iter(extra)
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k) * (1 / jnp.sqrt(16.0))
        if bias is not None:
            s = s + next(it)
        if keep is not None:
            s = jnp.where(next(it), s, -jnp.inf)
        if causal:
            s = jnp.where(jnp.tril(jnp.ones((24, 24), bool)), s, -jnp.inf)
        return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, axis=-1), v)

    exe = _compile(fn, q, k, v, *extra)
    (op,) = _composites(exe)
    assert op.attr("composite_attributes").get("causal").value == causal
    np.testing.assert_allclose(exe(q, k, v, *extra)[0], want, rtol=1e-4, atol=1e-5)
