"""A Llama-style decoder in plain ``torch.nn`` (no transformers needed), for quantization
tests and the decode benchmark: token embedding, per layer RMSNorm -> causal multi-head
attention (q/k/v/o projections, no rotary embedding) -> RMSNorm -> SwiGLU MLP (gate, up,
down), a final RMSNorm and an untied ``lm_head``. Every projection is an ``nn.Linear``
without bias, as in Llama.
"""
from __future__ import annotations

import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Block(nn.Module):
    def __init__(self, hidden: int, heads: int, intermediate: int):
        super().__init__()
        self.heads = heads
        self.attn_norm, self.mlp_norm = RMSNorm(hidden), RMSNorm(hidden)
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (
            nn.Linear(hidden, hidden, bias=False) for _ in range(4))
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x):
        batch, seq, hidden = x.shape
        h = self.attn_norm(x)

        def heads(t):
            return t.view(batch, seq, self.heads, hidden // self.heads).transpose(1, 2)
        q, k, v = heads(self.q_proj(h)), heads(self.k_proj(h)), heads(self.v_proj(h))
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o_proj(a.transpose(1, 2).reshape(batch, seq, hidden))
        h = self.mlp_norm(x)
        return x + self.down_proj(nn.functional.silu(self.gate_proj(h)) * self.up_proj(h))


class LlamaNN(nn.Module):
    """``LlamaNN(vocab, hidden, layers, heads, intermediate)(ids) -> logits``."""

    def __init__(self, vocab: int = 512, hidden: int = 256, layers: int = 2, heads: int = 4,
                 intermediate: int = 512):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads, intermediate) for _ in range(layers))
        self.norm = RMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.norm(x))
