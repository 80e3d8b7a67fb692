"""Attention from PyTorch: grouped-query attention as Llama/Mistral in transformers write it
(``repeat_kv`` then SDPA or the eager matmul/softmax path, or SDPA's ``enable_gqa``) under
``torch.compile(backend=openhlo)``: no eager fallback, eager's results, forward and
backward, and the fused kernel (not the decomposition) runs it."""
import copy
import logging

import pytest
import torch
import torch.nn.functional as F

from frameworks.torch.tests.torch_support import fresh_compile, records
from pjrt.plugins.cpu.profiler import profile


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """transformers' repeat_kv: [b, kv_heads, s, d] -> [b, kv_heads * n_rep, s, d]."""
    b, kv_heads, s, d = x.shape
    if n_rep == 1:
        return x
    x = x[:, :, None, :, :].expand(b, kv_heads, n_rep, s, d)
    return x.reshape(b, kv_heads * n_rep, s, d)


class GqaAttention(torch.nn.Module):
    """A Llama/Mistral attention block without rotary embeddings: q/k/v/o projections,
    8 query heads sharing 2 key/value heads, causal."""

    def __init__(self, mode: str, hidden=64, heads=8, kv_heads=2):
        super().__init__()
        self.mode, self.heads, self.kv_heads = mode, heads, kv_heads
        self.head_dim = hidden // heads
        self.q_proj = torch.nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k_proj = torch.nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v_proj = torch.nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o_proj = torch.nn.Linear(heads * self.head_dim, hidden, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        n_rep = self.heads // self.kv_heads
        if self.mode == "enable_gqa":
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        elif self.mode == "repeat_kv_sdpa":
            out = F.scaled_dot_product_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep),
                                                 is_causal=True)
        else:  # transformers' eager_attention_forward, with its additive causal mask
            mask = torch.full((s, s), torch.finfo(x.dtype).min).triu(1)
            scores = q @ repeat_kv(k, n_rep).transpose(2, 3) * self.head_dim ** -0.5 + mask
            probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
            out = probs @ repeat_kv(v, n_rep)
        return self.o_proj(out.transpose(1, 2).reshape(b, s, -1))


@pytest.mark.parametrize("mode", ["enable_gqa", "repeat_kv_sdpa", "eager_math"])
def test_gqa_attention_matches_eager_without_fallback(mode, caplog):
    caplog.set_level(logging.INFO, "openhlo.cpu")
    torch.manual_seed(0)
    model = GqaAttention(mode)
    ours = copy.deepcopy(model)
    compiled = fresh_compile(ours)
    x = torch.randn(2, 37, 64)
    results = []
    for run, m in ((model, model), (compiled, ours)):
        with profile() as prof:
            out = run(x)
            out.square().sum().backward()
        results.append((out.detach(), [p.grad for p in m.parameters()]))
    torch.testing.assert_close(results[1][0], results[0][0], rtol=1e-4, atol=1e-5)
    for ours_grad, eager_grad in zip(results[1][1], results[0][1]):
        torch.testing.assert_close(ours_grad, eager_grad, rtol=1e-4, atol=1e-5)
    assert records(caplog, "runs in eager") == []
    assert not [r for r in caplog.records if "runs its decomposition" in r.getMessage()]
    if mode == "eager_math":
        # training saves the probabilities for autograd's own backward, so only inference
        # reads as one attention (to fuse-attention)
        with torch.no_grad(), profile() as prof:
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    ran = " ".join(where for where, _, _ in prof.rows)
    assert '"openhlo.attention"' in ran
    if mode != "eager_math":  # SDPA's backward is the fused gradient kernel
        assert '"openhlo.attention_grad"' in ran
