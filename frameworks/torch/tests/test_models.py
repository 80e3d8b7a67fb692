"""A small GPT-style language model (token + position embeddings, causal SDPA attention,
layer norm, GELU MLP, tied LM head, cross-entropy) through the backend: forward and an
SGD training step against eager. It exercises the training-only ATen ops:
embedding_dense_backward, the CPU flash-attention backward, nll_loss and log_softmax
backward."""
import copy

import torch
import torch.nn.functional as F

from frameworks.torch.tests.torch_support import fresh_compile, records


class _Block(torch.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc, self.out = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, s, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class TinyGPT(torch.nn.Module):
    def __init__(self, vocab=50, d=32, heads=4, layers=2, positions=16):
        super().__init__()
        self.tokens = torch.nn.Embedding(vocab, d)
        self.positions = torch.nn.Embedding(positions, d)
        self.blocks = torch.nn.ModuleList(_Block(d, heads) for _ in range(layers))
        self.ln = torch.nn.LayerNorm(d)

    def forward(self, ids, targets):
        x = self.tokens(ids) + self.positions(torch.arange(ids.shape[1]))
        for block in self.blocks:
            x = block(x)
        logits = self.ln(x) @ self.tokens.weight.t()
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten()), logits


def test_tiny_gpt_forward_and_training_step(caplog):
    torch.manual_seed(0)
    model = TinyGPT()
    ids, targets = torch.randint(0, 50, (2, 12)), torch.randint(0, 50, (2, 12))
    ours = copy.deepcopy(model)
    compiled = fresh_compile(ours)
    results = []
    for m, run in ((model, model), (ours, compiled)):
        optimizer = torch.optim.SGD(m.parameters(), lr=0.5)
        loss, logits = run(ids, targets)
        results.append((loss.detach(), logits.detach()))
        loss.backward()
        optimizer.step()
    torch.testing.assert_close(results[1], results[0], rtol=1e-4, atol=1e-5)
    for (name, p), q in zip(model.named_parameters(), ours.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-6, msg=name)
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-6, msg=name)
    assert records(caplog, "runs in eager") == []
