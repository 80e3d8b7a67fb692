"""Scaled dot-product attention, kept whole: ``scaled_dot_product_attention`` (export),
``_scaled_dot_product_flash_attention_for_cpu`` and its backward (AOTAutograd graphs).

Written as the math path: scores = q k^T * scale (+ mask), softmax, @ v. The forward also
returns the row logsumexp, which the backward uses to rebuild the probabilities:
P = exp(scores - lse), dV = P^T dO, dS = P * (dO V^T - rowsum(dO * O)), dQ = dS K * scale,
dK = dS^T Q * scale.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from frameworks.torch.lowering.reductions import reduce
from frameworks.torch.lowering.registry import Unsupported, lowers

aten = torch.ops.aten


def _batched(ctx, a, b, a_contract: int, b_contract: int):
    """Matrix product over the last two dims with every leading dim a batch dim."""
    batch = tuple(range(len(a.type.shape) - 2))
    return ctx.b.dot_general(a, b, contracting=((a_contract,), (b_contract,)),
                             batching=(batch, batch))


def _scores(ctx, q, k, is_causal, attn_mask, scale):
    """Masked, scaled q k^T: [..., L, S]."""
    b = ctx.b
    r = len(q.type.shape)
    scale = scale if scale is not None else 1.0 / math.sqrt(q.type.shape[-1])
    s = _batched(ctx, q, k, r - 1, r - 1)
    shape = s.type.shape
    dtype = ctx.dtype(q)
    s = b.multiply(s, ctx.full(scale, dtype, shape))
    neg_inf = ctx.full(-np.inf, dtype, shape)
    if is_causal:
        length, source = shape[-2], shape[-1]
        causal = b.constant(np.tril(np.ones((length, source), dtype=bool)))
        s = b.select(ctx.broadcast(causal, shape), s, neg_inf)
    if attn_mask is not None:
        if ctx.dtype(attn_mask) == torch.bool:
            s = b.select(ctx.broadcast(attn_mask, shape), s, neg_inf)
        else:
            s = b.add(s, ctx.broadcast(ctx.cast(attn_mask, dtype), shape))
    return s, scale


def _check(dropout_p, q, k, v, enable_gqa=False):
    if dropout_p:
        raise Unsupported("attention dropout (its random mask would not match eager)")
    if enable_gqa or q.type.shape[:-2] != k.type.shape[:-2]:
        raise Unsupported("grouped-query attention (heads of q and k/v differ)")


def _forward(ctx, q, k, v, is_causal, attn_mask, scale):
    b = ctx.b
    s, _ = _scores(ctx, q, k, is_causal, attn_mask, scale)
    shape = s.type.shape
    dtype = ctx.dtype(q)
    r = len(shape)
    kept = shape[:-1] + (1,)
    row_max = reduce(ctx, s, [r - 1], "maximum", dtype, kept)
    exp = b.exponential(b.subtract(s, ctx.broadcast(row_max, shape)))
    total = reduce(ctx, exp, [r - 1], "add", dtype, kept)
    p = b.divide(exp, ctx.broadcast(total, shape))
    out = _batched(ctx, p, v, r - 1, r - 2)
    lse = b.reshape(b.add(b.log(total), row_max), shape[:-1])
    return out, lse


@lowers(aten.scaled_dot_product_attention.default)
def _sdpa(ctx, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None,
          enable_gqa=False):
    _check(dropout_p, q, k, v, enable_gqa)
    out, _ = _forward(ctx, q, k, v, is_causal, attn_mask, scale)
    return out


@lowers(aten._scaled_dot_product_flash_attention_for_cpu.default)
def _flash_cpu(ctx, q, k, v, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
    _check(dropout_p, q, k, v)
    out, lse = _forward(ctx, q, k, v, is_causal, attn_mask, scale)
    return out, ctx.b.reshape(ctx.cast(lse, ctx.out_dtype(1)), ctx.out_shape(1))


@lowers(aten._scaled_dot_product_flash_attention_for_cpu_backward.default)
def _flash_cpu_backward(ctx, grad, q, k, v, out, lse, dropout_p=0.0, is_causal=False, *,
                        attn_mask=None, scale=None):
    _check(dropout_p, q, k, v)
    b = ctx.b
    dtype = ctx.dtype(q)
    s, scale = _scores(ctx, q, k, is_causal, attn_mask, scale)
    shape = s.type.shape
    r = len(shape)
    lse = b.reshape(ctx.cast(lse, dtype), shape[:-1] + (1,))
    p = b.exponential(b.subtract(s, ctx.broadcast(lse, shape)))
    grad = ctx.cast(grad, dtype)
    dv = _batched(ctx, p, grad, r - 2, r - 2)
    dp = _batched(ctx, grad, v, r - 1, r - 1)
    rowdot = reduce(ctx, b.multiply(grad, ctx.cast(out, dtype)), [r - 1], "add", dtype,
                    shape[:-1] + (1,))
    ds = b.multiply(p, b.subtract(dp, ctx.broadcast(rowdot, shape)))
    ds = b.multiply(ds, ctx.full(scale, dtype, shape))
    dq = _batched(ctx, ds, k, r - 1, r - 2)
    dk = _batched(ctx, ds, q, r - 2, r - 2)
    return tuple(ctx.cast(g, ctx.out_dtype(i)) for i, g in enumerate((dq, dk, dv)))
