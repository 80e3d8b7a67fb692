"""Scaled dot-product attention, kept whole: ``scaled_dot_product_attention`` (export),
``_scaled_dot_product_flash_attention_for_cpu`` and its backward (AOTAutograd graphs), each
lowered to one ``openhlo.attention`` / ``openhlo.attention_grad`` composite
(stablehlo/attention.py: the math as its decomposition, a fused kernel where the backend
has one). Grouped-query attention (``enable_gqa``: fewer k/v heads than q heads) is the
composite's own case.

The forward also returns the row logsumexp, which the backward uses to rebuild the
probabilities.
"""
from __future__ import annotations

import math

import torch

from stablehlo.attention import attention, attention_grad
from frameworks.torch.lowering.registry import Unsupported, lowers

aten = torch.ops.aten


def _check(dropout_p, q, k, enable_gqa=True):
    if dropout_p:
        raise Unsupported("attention dropout (its random mask would not match eager)")
    heads, kv_heads = q.type.shape[-3], k.type.shape[-3]
    if len(q.type.shape) < 3 or (heads != kv_heads and not enable_gqa) or heads % kv_heads:
        raise Unsupported(f"attention of q {q.type} and k {k.type}")


def _operands(ctx, q, k, attn_mask, scale):
    """(scale, bias, mask): a float mask is an additive bias, a bool one a keep-mask, both
    with q's rank (torch broadcasts from the right)."""
    scale = scale if scale is not None else 1.0 / math.sqrt(q.type.shape[-1])
    if attn_mask is None:
        return scale, None, None
    shape = attn_mask.type.shape
    rank = len(q.type.shape)
    if len(shape) < rank:
        attn_mask = ctx.b.reshape(attn_mask, (1,) * (rank - len(shape)) + tuple(shape))
    if ctx.dtype(attn_mask) == torch.bool:
        return scale, None, attn_mask
    return scale, ctx.cast(attn_mask, ctx.dtype(q)), None


@lowers(aten.scaled_dot_product_attention.default)
def _sdpa(ctx, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None,
          enable_gqa=False):
    _check(dropout_p, q, k, enable_gqa)  # without it torch itself refuses unequal heads
    scale, bias, mask = _operands(ctx, q, k, attn_mask, scale)
    return attention(ctx.b, q, k, v, bias, mask, scale=scale, causal=is_causal)[0]


@lowers(aten._scaled_dot_product_flash_attention_for_cpu.default)
def _flash_cpu(ctx, q, k, v, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
    _check(dropout_p, q, k)
    scale, bias, mask = _operands(ctx, q, k, attn_mask, scale)
    out, lse = attention(ctx.b, q, k, v, bias, mask, scale=scale, causal=is_causal,
                         with_lse=True)
    return out, ctx.b.reshape(ctx.cast(lse, ctx.out_dtype(1)), ctx.out_shape(1))


@lowers(aten._scaled_dot_product_flash_attention_for_cpu_backward.default)
def _flash_cpu_backward(ctx, grad, q, k, v, out, lse, dropout_p=0.0, is_causal=False, *,
                        attn_mask=None, scale=None):
    _check(dropout_p, q, k)
    scale, bias, mask = _operands(ctx, q, k, attn_mask, scale)
    wide = torch.float64 if ctx.dtype(q) == torch.float64 else torch.float32  # compute type
    lse = ctx.b.reshape(ctx.cast(lse, wide), q.type.shape[:-1])
    grads = attention_grad(ctx.b, q, k, v, bias, mask, out, lse, ctx.cast(grad, ctx.dtype(q)),
                           scale=scale, causal=is_causal)
    return tuple(ctx.cast(g, ctx.out_dtype(i)) for i, g in enumerate(grads))
