"""The native flash-attention kernels (native/kernels_attention.cc) against a float64 numpy
reference: forward (with its logsumexp) and backward, causal, masked, biased, grouped- and
multi-query heads, leading dims, lengths that are no multiple of the kernel's blocks.

Each program is one ``openhlo.attention`` / ``openhlo.attention_grad`` composite built by
stablehlo/attention.py; a test also asserts that the kernel ran it (not its decomposition).
"""
import logging
import math

import numpy as np
import pytest

import pjrt
from stablehlo.attention import attention, attention_grad
from stablehlo.builder import Builder
from stablehlo.ir.types import BF16, F32, F64, I1, TensorType

RNG = np.random.default_rng(21)


def reference(q, k, v, bias=None, mask=None, scale=1.0, causal=False, fill=-np.inf):
    """float64: (out, lse, probabilities, logits)."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    group = q.shape[-3] // k.shape[-3]
    k, v = np.repeat(k, group, axis=-3), np.repeat(v, group, axis=-3)
    s = np.einsum("...ld,...sd->...ls", q, k) * scale
    if bias is not None:
        s = s + bias.astype(np.float64)
    keep = np.ones(s.shape, bool)
    if mask is not None:
        keep &= np.broadcast_to(mask, s.shape)
    if causal:
        keep &= np.tril(np.ones(s.shape[-2:], bool))
    s = np.where(keep, s, fill)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - m)
    total = e.sum(-1, keepdims=True)
    p = e / total
    return np.einsum("...ls,...sd->...ld", p, v), (np.log(total) + m)[..., 0], p, s


def reference_grad(q, k, v, dout, bias=None, mask=None, scale=1.0, causal=False):
    out, _, p, _ = reference(q, k, v, bias, mask, scale, causal)
    kv_heads = k.shape[-3]
    group = q.shape[-3] // kv_heads
    k64, v64 = (np.repeat(x.astype(np.float64), group, axis=-3) for x in (k, v))
    dout = dout.astype(np.float64)
    dv = np.einsum("...ls,...ld->...sd", p, dout)
    dp = np.einsum("...ld,...sd->...ls", dout, v64)
    ds = p * (dp - (dout * out).sum(-1, keepdims=True)) * scale
    dq = np.einsum("...ls,...sd->...ld", ds, k64)
    dk = np.einsum("...ls,...ld->...sd", ds, q.astype(np.float64))

    def per_kv_head(g):
        return g.reshape(g.shape[:-3] + (kv_heads, group) + g.shape[-2:]).sum(-3)
    return dq, per_kv_head(dk), per_kv_head(dv)


def _types(shapes, element=F32):
    return [TensorType(tuple(s), element) for s in shapes]


def _forward_module(q, k, v, bias, mask, **config) -> str:
    b = Builder()
    types = _types([q.shape, k.shape, v.shape])
    if bias is not None:
        types += _types([bias.shape])
    if mask is not None:
        types.append(TensorType(tuple(mask.shape), I1))
    with b.function("main", types) as (_, args):
        qa, ka, va = args[:3]
        rest = list(args[3:])
        ba = rest.pop(0) if bias is not None else None
        ma = rest.pop(0) if mask is not None else None
        b.return_(*attention(b, qa, ka, va, ba, ma, with_lse=True, **config))
    return str(b.module)


def _compile_forward(q, k, v, bias, mask, **config):
    return pjrt.make_client("cpu").compile(_forward_module(q, k, v, bias, mask, **config))


def _no_decomposition(caplog):
    assert not [r for r in caplog.records if "runs its decomposition" in r.getMessage()]


CASES = {
    # name: q shape, kv shape, options
    "plain": ((1, 2, 37, 16), (1, 2, 45, 16), {}),
    "causal_odd": ((2, 3, 70, 8), (2, 3, 70, 8), {"causal": True}),
    "long_causal": ((1, 1, 600, 32), (1, 1, 600, 32), {"causal": True}),
    # JAX's finite fill: key blocks past the diagonal are still skipped
    "long_causal_jax_fill": ((1, 2, 700, 16), (1, 2, 700, 16), {"causal": True,
                                                                "fill": -2.38e38}),
    "gqa_bias": ((2, 4, 33, 8), (2, 2, 41, 8), {"bias": (1, 4, 33, 41)}),
    "mqa_mask": ((1, 6, 19, 8), (1, 1, 530, 8), {"mask": (1, 1, 19, 530)}),
    "leading_dims": ((2, 3, 2, 9, 8), (2, 3, 1, 11, 8), {"causal": True, "bias": (1, 3, 1, 1, 11)}),
    "rank3_finite_fill": ((2, 21, 8), (2, 21, 8), {"mask": (1, 21, 21), "fill": -1e30}),
    # a small ViT's 17 tokens: k's panel holds one strip of keys, not a whole key block
    "vit_tokens": ((2, 3, 17, 64), (2, 3, 17, 64), {}),
}


def _inputs(q_shape, kv_shape, opts):
    q = RNG.standard_normal(q_shape).astype(np.float32)
    k = RNG.standard_normal(kv_shape).astype(np.float32)
    v = RNG.standard_normal(kv_shape).astype(np.float32)
    bias = RNG.standard_normal(opts["bias"]).astype(np.float32) if "bias" in opts else None
    mask = None
    if "mask" in opts:
        mask = RNG.random(opts["mask"]) < 0.7
        mask[..., 0] = True  # no fully masked row (its -inf math is NaN on every path)
    config = {"scale": 1.0 / math.sqrt(q_shape[-1]), "causal": opts.get("causal", False)}
    if "fill" in opts:
        config["fill"] = opts["fill"]
    return q, k, v, bias, mask, config


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_matches_float64(name, caplog):
    caplog.set_level(logging.INFO, "openhlo.cpu")
    q, k, v, bias, mask, config = _inputs(*CASES[name])
    exe = _compile_forward(q, k, v, bias, mask, **config)
    args = [x for x in (q, k, v, bias, mask) if x is not None]
    out, lse = exe(*args)
    want, want_lse, _, _ = reference(q, k, v, bias, mask, **config)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-4, atol=1e-5)
    assert not exe.fallbacks
    _no_decomposition(caplog)


@pytest.mark.parametrize("name", ["plain", "causal_odd", "gqa_bias", "mqa_mask", "leading_dims"])
def test_backward_matches_float64(name, caplog):
    caplog.set_level(logging.INFO, "openhlo.cpu")
    q, k, v, bias, mask, config = _inputs(*CASES[name])
    out, lse, _, _ = reference(q, k, v, bias, mask, **config)
    dout = RNG.standard_normal(out.shape).astype(np.float32)
    b = Builder()
    shapes = [q.shape, k.shape, v.shape] + ([bias.shape] if bias is not None else [])
    types = _types(shapes) + ([TensorType(mask.shape, I1)] if mask is not None else []) + \
        _types([out.shape, lse.shape, dout.shape])
    with b.function("main", types) as (_, args):
        n = len(args) - 3
        qa, ka, va = args[:3]
        ba = args[3] if bias is not None else None
        ma = args[n - 1] if mask is not None else None
        b.return_(*attention_grad(b, qa, ka, va, ba, ma, *args[n:], **config))
    exe = pjrt.make_client("cpu").compile(str(b.module))
    ins = [x for x in (q, k, v, bias, mask) if x is not None] + [
        out.astype(np.float32), lse.astype(np.float32), dout]
    got = exe(*ins)
    for g, w in zip(got, reference_grad(q, k, v, dout, bias, mask, **config)):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=2e-5)
    _no_decomposition(caplog)


def test_bf16_accumulates_in_f32():
    import ml_dtypes
    q, k, v, _, _, config = _inputs((1, 2, 40, 16), (1, 2, 40, 16), {"causal": True})
    q, k, v = (x.astype(ml_dtypes.bfloat16) for x in (q, k, v))
    b = Builder()
    with b.function("main", _types([q.shape, k.shape, v.shape], BF16)) as (_, args):
        b.return_(*attention(b, *args, **config))
    (out,) = pjrt.make_client("cpu").compile(str(b.module))(q, k, v)
    want = reference(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32),
                     **config)[0]
    np.testing.assert_allclose(out.astype(np.float32), want, rtol=2e-2, atol=2e-2)


def test_a_type_the_kernel_refuses_runs_the_decomposition(caplog):
    """f64 has no flash kernel: the composite runs its decomposition, op by op, natively."""
    caplog.set_level(logging.INFO, "openhlo.cpu")
    q, k, v, _, _, config = _inputs((1, 2, 9, 8), (1, 1, 11, 8), {"causal": True})
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    b = Builder()
    with b.function("main", _types([q.shape, k.shape, v.shape], F64)) as (_, args):
        b.return_(*attention(b, *args, **config))
    exe = pjrt.make_client("cpu").compile(str(b.module))
    (out,) = exe(q, k, v)
    np.testing.assert_allclose(out, reference(q, k, v, **config)[0], rtol=1e-12)
    assert [r for r in caplog.records if "runs its decomposition" in r.getMessage()]
    assert not exe.fallbacks


def test_interpreter_runs_the_decomposition():
    """Every backend runs the composite: the reference interpreter by its decomposition."""
    q, k, v, bias, mask, config = _inputs(*CASES["gqa_bias"])
    exe = pjrt.make_client("interpreter").compile(_forward_module(q, k, v, bias, mask, **config))
    out, lse = exe(q, k, v, bias)
    np.testing.assert_allclose(out, reference(q, k, v, bias, **config)[0], rtol=1e-4,
                               atol=1e-5)
