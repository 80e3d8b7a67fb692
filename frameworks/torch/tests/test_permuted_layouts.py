"""Tensors exchanged in a transposed dense layout (permuted_layouts.py, Note [Permuted
layouts]): which layouts qualify, and a training step whose forward saves ``t(weight)`` and a
transposed attention score for its backward gives eager's loss and gradients, with those
tensors passed between the compiled graphs in their traced layout (no copies), and the same
results when a call brings them in other strides."""
import torch

from frameworks.torch import backend as torch_backend
from frameworks.torch.permuted_layouts import dense_order
from frameworks.torch.runner import GraphRunner


def test_dense_order_of_layouts():
    assert dense_order((4, 3), (3, 1), 0) is None  # row-major: nothing to do
    assert dense_order((64, 32), (1, 64), 0) == (1, 0)  # t() of a (32, 64) weight
    assert dense_order((2, 4, 16, 8), (512, 8, 32, 1), 0) == (0, 2, 1, 3)  # heads moved
    assert dense_order((4, 3), (0, 1), 0) is None  # an expand: elements share memory
    assert dense_order((4, 3), (6, 2), 0) is None  # every other element: gaps
    assert dense_order((4, 3), (1, 4), 2) is None  # offset into a larger storage
    assert dense_order((0, 3), (1, 0), 0) is None  # empty
    # dims of one element may take any stride: row-major order, numpy's strides differ
    assert dense_order((2, 1, 3), (3, 1, 1), 0) == (0, 1, 2)


class _Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(32, 96)
        self.out = torch.nn.Linear(32, 16)

    def forward(self, x):  # x: (batch, tokens, 32), 4 heads of 8
        b, n, _ = x.shape
        q, k, v = (t.view(b, n, 4, 8).transpose(1, 2) for t in self.qkv(x).chunk(3, dim=-1))
        weights = torch.softmax(q @ k.transpose(-1, -2) / 8 ** 0.5, dim=-1)
        return self.out((weights @ v).transpose(1, 2).reshape(b, n, 32))


def _step(model, run, x):
    """A backward through ``run`` (``model`` or its compiled form): loss and gradients."""
    model.zero_grad(set_to_none=True)
    loss = torch.tanh(run(x)).square().sum()
    loss.backward()
    return loss.detach(), {n: p.grad for n, p in model.named_parameters()}


def test_training_step_passes_transposed_tensors_as_they_lie(monkeypatch):
    runners, calls = [], []

    class Recording(GraphRunner):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            runners.append(self)

        def __call__(self, args):
            calls.append((self, list(args)))
            return super().__call__(args)

    monkeypatch.setattr(torch_backend, "GraphRunner", Recording)
    torch._dynamo.reset()
    torch.manual_seed(0)
    model, x = _Attention(), torch.randn(2, 6, 32)
    compiled = torch.compile(model, backend=torch_backend.openhlo_backend)
    want_loss, want_grads = _step(model, model, x)
    for _ in range(2):  # the first call runs op by op, the second the generated kernels
        loss, grads = _step(model, compiled, x)
        torch.testing.assert_close(loss, want_loss, rtol=1e-5, atol=1e-5)
        for name, want in want_grads.items():
            torch.testing.assert_close(grads[name], want, rtol=1e-4, atol=1e-5,
                                       msg=lambda m: f"grad {name}: {m}")

    forward, backward = (next(r for r in runners if r.name.startswith(kind))
                         for kind in ("forward", "backward"))
    (fw_plan,), (bw_plan,) = forward.plans.values(), backward.plans.values()
    returned = [layout for seg in fw_plan.steps if hasattr(seg, "output_layouts")
                for layout in seg.output_layouts if layout is not None]
    taken = [order for seg in bw_plan.steps if hasattr(seg, "input_orders")
             for order in seg.input_orders if order is not None]
    assert returned and taken, "no tensor crossed the graphs in a transposed layout"
    # the forward's results are in their traced layouts...
    fw_args = next(args for runner, args in calls if runner is forward)
    fw_outputs = forward(fw_args)
    for node, out in zip(fw_plan.output.args[0], fw_outputs):
        val = node.meta["val"]
        assert out.stride() == val.stride() and out.storage_offset() == 0, node.name
        assert out._base is None, node.name  # Note [Output layouts]: no view of ours
    # ... and the backward gives the same gradients from row-major copies of its inputs
    bw_args = next(args for runner, args in calls if runner is backward)
    as_given = backward(bw_args)
    copied = backward([a.contiguous() if isinstance(a, torch.Tensor) else a for a in bw_args])
    assert any(not a.is_contiguous() for a in bw_args if isinstance(a, torch.Tensor))
    for got, want in zip(copied, as_given):
        if isinstance(want, torch.Tensor):
            torch.testing.assert_close(got, want, rtol=0, atol=0)
