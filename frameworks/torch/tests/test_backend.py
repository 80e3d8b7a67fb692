"""The ``openhlo`` torch.compile backend against eager PyTorch: inference, training through
AOTAutograd (forward and backward compiled by us), eager fallback and recompilation."""
import copy
import importlib.metadata

import pytest
import torch
import torch.nn.functional as F

from frameworks.torch.backend import openhlo_backend
from frameworks.torch.tests.torch_support import fresh_compile, records


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    torch.backends.mha.set_fastpath_enabled(False)  # else eval attention is one opaque op
    yield
    torch.backends.mha.set_fastpath_enabled(True)


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))


def _train(model, x, y, make_optimizer, steps=2):
    """Parameters and losses after ``steps`` optimizer steps on an MSE loss."""
    optimizer = make_optimizer(model.parameters())
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return losses


def _check_training(model, x, y, make_optimizer, caplog, atol=1e-5):
    ours = copy.deepcopy(model)
    compiled = fresh_compile(ours)
    expected = _train(model, x, y, make_optimizer)
    got = _train(compiled, x, y, make_optimizer)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=atol)
    for p, q in zip(model.parameters(), ours.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=atol)
    for p, q in zip(model.buffers(), ours.buffers()):  # e.g. batch norm running stats
        torch.testing.assert_close(q, p, rtol=1e-4, atol=atol)
    assert records(caplog, "runs in eager") == []


def test_mlp_inference(caplog):
    model = _mlp().eval()
    x = torch.randn(16, 8)
    with torch.no_grad():
        torch.testing.assert_close(fresh_compile(model)(x), model(x), rtol=1e-4, atol=1e-5)
    assert records(caplog, "runs in eager") == []


def test_inference_sees_parameter_updates(caplog):
    # plans keep numpy views of parameters between calls (runner.py, Note [Parameter views])
    model = _mlp().eval()
    compiled = fresh_compile(model)
    x = torch.randn(16, 8)
    first = model[0].weight
    with torch.no_grad():
        compiled(x)
        model[0].weight.mul_(2)  # in place: the kept view shows it
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
        model[0].weight.data = torch.randn(32, 8)  # new memory: the view is rebuilt
        assert model[0].weight is first  # (the same Parameter object)
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
        model[2].bias.set_(torch.randn(4))
        torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_model(dtype, caplog):
    # statistics are computed in float32 and returned in the input's dtype, as torch does
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                                torch.nn.Linear(16, 4)).to(dtype).eval()
    x = torch.randn(5, 8, dtype=dtype)
    with torch.no_grad():
        out = fresh_compile(model)(x)
        assert out.dtype == dtype
        torch.testing.assert_close(out, model(x), rtol=2e-2, atol=2e-2)
    assert records(caplog, "runs in eager") == []


@pytest.mark.parametrize("optimizer", [
    lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
    lambda p: torch.optim.Adam(p, lr=0.01),
], ids=["sgd", "adam"])
def test_mlp_training_step(optimizer, caplog):
    _check_training(_mlp(), torch.randn(16, 8), torch.randn(16, 4), optimizer, caplog)


def test_transformer_block_forward_and_training(caplog):
    block = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    x, y = torch.randn(2, 6, 32), torch.randn(2, 6, 32)
    with torch.no_grad():
        torch.testing.assert_close(fresh_compile(block.eval())(x), block(x), rtol=1e-4,
                                   atol=1e-5)
    # SGD, not Adam: Adam normalizes away the scale of exactly-zero gradients (the key
    # bias), turning 1e-9 rounding noise into full-size steps.
    _check_training(block.train(), x, y, lambda p: torch.optim.SGD(p, lr=0.1), caplog)


def test_cnn_training_uses_backward_lowerings(caplog):
    # convolution_backward, max_pool2d_with_indices_backward and batch norm in train mode
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 4, 3, stride=2, groups=2),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(4, 2))
    x, y = torch.randn(2, 3, 12, 12), torch.randn(2, 2)
    _check_training(model, x, y, lambda p: torch.optim.SGD(p, lr=0.1), caplog)


def test_op_without_lowering_runs_eagerly_and_logs(caplog):
    def f(x):
        return torch.special.i0(x * 2) + 1  # aten.i0: no lowering, in the middle of a graph

    x = torch.randn(4, 8)
    torch.testing.assert_close(fresh_compile(f)(x), f(x))
    [line] = records(caplog, "runs in eager")
    assert "aten.i0.default" in line and "no lowering registered" in line


def test_op_eager_by_design_logs_why_not_a_missing_lowering(caplog):
    def f(x):
        return F.dropout(x * 2, p=0.5, training=True) + 1  # random: eager by design

    x = torch.rand(64, 8) + 1
    out = fresh_compile(f)(x)
    kept = out != 1
    torch.testing.assert_close(out[kept], 4 * x[kept] + 1)  # kept values scaled by 1/(1-p)
    assert 0 < kept.sum() < kept.numel()
    lines = records(caplog, "runs in eager")
    assert lines and all("by design: a random op" in line for line in lines), lines
    assert not any("no lowering registered" in line for line in lines)


def test_recompilation_is_cached_and_logged(caplog):
    compiled = fresh_compile(lambda x: torch.tanh(x) * 3)
    x = torch.randn(4, 8)
    torch._dynamo.mark_dynamic(x, 0)  # one graph for every batch size: our cache decides
    for batch in (4, 6, 6, 4):
        arg = torch.randn(batch, 8)
        torch.testing.assert_close(compiled(arg if batch != 4 else x), torch.tanh(
            arg if batch != 4 else x) * 3)
    changes = records(caplog, "recompiling")
    assert len(changes) == 1 and "shape (4, 8) -> (6, 8)" in changes[0]


def test_dtype_change_gets_its_own_program(caplog):
    compiled = fresh_compile(lambda x: x * 2 + 1)
    for dtype in (torch.float32, torch.float64, torch.float32):
        x = torch.randn(3, dtype=dtype)
        out = compiled(x)
        assert out.dtype == dtype
        torch.testing.assert_close(out, x * 2 + 1)
    # once: going back to float32 reuses the first graph
    assert len(records(caplog, "input 0 dtype torch.float32 -> torch.float64")) == 1
    assert records(caplog, "dtype torch.float64 -> torch.float32") == []


def test_pyproject_entry_point_loads_the_backend():
    import pathlib
    import tomllib
    pyproject = pathlib.Path(__file__).resolve().parents[3] / "pyproject.toml"
    if not pyproject.exists():  # e.g. a Bazel sandbox without the repository root
        pytest.skip("pyproject.toml is not beside the sources")
    group = tomllib.loads(pyproject.read_text())["project"]["entry-points"][
        "torch_dynamo_backends"]
    entry = importlib.metadata.EntryPoint("openhlo", group["openhlo"], "torch_dynamo_backends")
    assert entry.load() is openhlo_backend


def test_installed_entry_point_names_the_backend():
    found = [ep for ep in importlib.metadata.entry_points(group="torch_dynamo_backends")
             if ep.name == "openhlo"]
    if not found:
        pytest.skip("openhlo is not installed with its torch_dynamo_backends entry point")
    assert found[0].load() is openhlo_backend
    assert "openhlo" in torch._dynamo.list_backends(exclude_tags=())


def test_mutating_a_returned_tensor_leaves_the_next_call_alone():
    # The second result folds to a constant of the compiled program: it must still be a
    # fresh tensor per call, as in eager PyTorch.
    def f(x):
        return x + 1, torch.full((2,), 3.0) * 2

    compiled = fresh_compile(f)
    x = torch.zeros(2)
    y, c = compiled(x)
    y.add_(5)
    c.add_(100)
    expected = f(x)
    torch.testing.assert_close(compiled(x), expected)
    torch.testing.assert_close(expected, (torch.ones(2), torch.full((2,), 6.0)))
