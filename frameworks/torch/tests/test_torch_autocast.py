"""``torch.autocast("cpu", dtype=torch.bfloat16)`` regions under
``torch.compile(backend="openhlo")``: AOTAutograd traces the region with autocast's casts in
the graph, and they lower to real bf16 programs (bf16 x bf16 matrix products, reductions
accumulated in f32), forward and backward. Training a small GPT-2 (the model zoo's, d=64,
2 layers) for 20 steps in bf16 autocast ends within 1% of the f32 loss. Speed is
``tools/bench_amp.py``'s (never asserted). Skipped without ``transformers``.
"""
import pytest
import torch
import torch.nn.functional as F

from frameworks.torch.tests.torch_support import fresh_compile, records

pytest.importorskip("transformers", reason="needs transformers (pip install '.[models]')")

from frameworks.torch.models import VOCAB, build

STEPS = 20


def _train(amp: bool, programs: list) -> list:
    """Losses of ``STEPS`` Adam steps on one batch of next-token prediction, the forward
    and loss compiled, inside an autocast region when ``amp``."""
    model, (ids,) = build("gpt2", batch=4, seq=32)
    model.train()

    def loss_of(ids):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            logits = model(ids)[0]
            return F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1))

    step = fresh_compile(loss_of)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = step(ids)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@pytest.fixture
def compiled_programs(monkeypatch):
    """The programs the backend's client compiles while the test runs."""
    from frameworks.torch.backend import client
    seen = []
    cpu = client()
    compile_ = cpu.compile

    def recording(program, *args, **kwargs):
        exe = compile_(program, *args, **kwargs)
        seen.append(exe.executable.module)
        return exe
    monkeypatch.setattr(cpu, "compile", recording)
    return seen


def _element(value) -> str:
    return str(getattr(value.type, "element_type", ""))


def test_bf16_autocast_training_stays_within_one_percent_of_f32(compiled_programs, caplog):
    full = _train(False, [])
    assert not any(_element(v) == "bf16" for m in compiled_programs for op in m.op.walk()
                   for v in op.operands)
    compiled_programs.clear()
    mixed = _train(True, compiled_programs)
    assert records(caplog, "runs in eager") == []
    assert full[-1] < 0.8 * full[0]  # it learned something
    assert abs(mixed[-1] - full[-1]) <= 0.01 * full[-1]
    assert mixed != full  # and the bf16 run really rounded differently
    ops = [op for m in compiled_programs for op in m.op.walk()]
    # forward and backward products of the autocast region run on bf16 operands (those in
    # the decompositions of attention composites widen to f32, as attention kernels do)
    attention = {op.attributes["decomposition"].name for op in ops
                 if op.name == "stablehlo.composite"
                 and op.attr("name").value in ("openhlo.attention", "openhlo.attention_grad")}
    products = [op for m in compiled_programs for f in m.functions() if f.name not in attention
                for op in f.op.walk() if op.name == "stablehlo.dot_general"]
    assert sum(all(_element(v) == "bf16" for v in op.operands) for op in products) >= \
        0.9 * len(products) > 0
    # reductions (softmax's, layer norm's, the loss's, the gradients' sums) stay f32
    reductions = [op for op in ops if op.name == "stablehlo.reduce"]
    assert reductions and all(_element(v) in ("f32", "i1", "i32", "i64")
                              for op in reductions for v in op.operands)
    assert any(op.name == "stablehlo.exponential" and _element(op.operands[0]) == "f32"
               for op in ops)
