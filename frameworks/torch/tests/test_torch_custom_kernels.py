"""Custom kernels from PyTorch: the C++ RMS norm of pjrt/custom_kernels/tests/rms_norm.py as
``torch.ops.openhlo.rms_norm``: torch.library.opcheck passes, and torch.compile on openhlo
lowers it to a native custom_call (forward and backward) with no graph break and no eager
fallback; results against the numpy reference."""
import numpy as np
import pytest
import torch
from torch._dynamo.utils import counters

import pjrt
from frameworks.torch import custom_kernels
from frameworks.torch.tests.torch_support import fresh_compile
from pjrt.custom_kernels.tests import rms_norm

pytestmark = pytest.mark.skipif(
    __import__("pjrt.plugins.cpu.codegen.build", fromlist=["find_compiler"]).find_compiler()
    is None, reason="needs a C++ compiler")


@pytest.fixture(scope="module")
def op():
    rms_norm.define()
    return custom_kernels.torch_op("rms_norm")


def test_opcheck_passes(op):
    torch.manual_seed(0)
    args = (torch.randn(4, 8, requires_grad=True), torch.rand(8, requires_grad=True))
    torch.library.opcheck(op, args, {"eps": 1e-5})


def test_eager_call_matches_reference(op):
    x, w = torch.randn(3, 5, 16), torch.rand(16) + 0.5
    np.testing.assert_allclose(op(x, w, eps=1e-5).numpy(),
                               rms_norm.reference(x.numpy(), w.numpy(), 1e-5), rtol=1e-5,
                               atol=1e-6)


def test_compiled_forward_and_backward_run_the_kernel_natively(op, monkeypatch):
    torch.manual_seed(1)
    x = torch.randn(6, 16, requires_grad=True)
    w = (torch.rand(16) + 0.5).requires_grad_()
    weights = torch.arange(16.0)
    f = fresh_compile(lambda x, w: (op(x, w, eps=1e-5) ** 2 * weights).sum())
    calls = []
    monkeypatch.setattr(custom_kernels, "run_kernel",  # the eager implementation's path
                        lambda *a, **k: calls.append(a) or pytest.fail("eager kernel call"))
    pjrt.reset_metrics()
    counters.clear()
    loss = f(x, w)
    loss.backward()
    assert calls == [] and pjrt.metrics().fallbacks == {}
    assert not counters["graph_break"]
    xs, ws = x.detach().numpy(), w.detach().numpy()
    y = rms_norm.reference(xs, ws, 1e-5)
    np.testing.assert_allclose(loss.item(), (y.astype(np.float64) ** 2 * np.arange(16)).sum(),
                               rtol=1e-5)
    dx, dw = rms_norm.reference_vjp(xs, ws, 2 * y * np.arange(16, dtype=np.float32), 1e-5)
    np.testing.assert_allclose(x.grad.numpy(), dx, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(w.grad.numpy(), dw, rtol=1e-4, atol=1e-5)
