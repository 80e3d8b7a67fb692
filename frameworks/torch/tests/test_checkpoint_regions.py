"""``torch.utils.checkpoint`` regions through the openhlo backend: AOTAutograd recomputes the
region in the backward graph, which openhlo compiles (and cleans up with cse) on its own,
so the recomputation stays; gradients match eager PyTorch's."""
import torch
from torch.utils.checkpoint import checkpoint

from frameworks.torch.tests.torch_support import fresh_compile


class _Checkpointed(torch.nn.Module):
    def __init__(self, use_checkpoint: bool):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(3))
        self.use_checkpoint = use_checkpoint

    def block(self, h):
        for layer in self.layers:
            h = torch.tanh(layer(h))
        return h

    def forward(self, x):
        # One region of three layers: only its input is saved, the two inner tanh
        # outputs (which tanh's derivative needs) are recomputed in the backward graph.
        x = checkpoint(self.block, x, use_reentrant=False) if self.use_checkpoint \
            else self.block(x)
        return x.square().mean()


def test_checkpointed_regions_are_recomputed_and_match_eager(monkeypatch):
    import frameworks.torch.backend as backend
    graphs = []
    runner = backend.GraphRunner

    def recording(gm, client, name):
        graphs.append((name, gm))
        return runner(gm, client, name=name)
    monkeypatch.setattr(backend, "GraphRunner", recording)
    torch.manual_seed(0)
    model = _Checkpointed(use_checkpoint=True)
    x = torch.randn(8, 16)
    loss = fresh_compile(model)(x)
    loss.backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model.use_checkpoint = False
    model(x).backward()
    for g, want in zip(got, [p.grad for p in model.parameters()]):
        torch.testing.assert_close(g, want, rtol=1e-5, atol=1e-6)

    def tanh_count(gm):
        return sum(n.op == "call_function" and "tanh" in str(n.target) for n in gm.graph.nodes)
    (forward,) = [gm for name, gm in graphs if name.startswith("forward")]
    (backward,) = [gm for name, gm in graphs if name.startswith("backward")]
    assert tanh_count(forward) == 3
    assert tanh_count(backward) >= 2, "the checkpointed layers are not recomputed"
