"""Hugging Face ``generate()`` (greedy, 64 new tokens, static KV cache) with its decode step
compiled by the openhlo backend: the tokens of eager PyTorch for GPT-2, Llama and the
held-out Qwen2 (d=64, 2 layers, random weights), one compiled graph for all 63 decode steps
(no recompilation per token) and no eager fallback. Skipped without ``transformers``."""
import logging

import pytest
import torch

import pjrt

from frameworks.torch.tests.torch_support import records

pytest.importorskip("transformers", reason="needs transformers (pip install '.[models]')")

from frameworks.torch.generation import generate_static
from frameworks.torch.models import causal_lm

NEW_TOKENS = 64


@pytest.mark.parametrize("name", ["gpt2", "llama", "qwen2"])
def test_generate_gives_eager_tokens_with_one_compile(name, caplog):
    model = causal_lm(name)
    prompt = torch.randint(1, model.config.vocab_size, (1, 7),
                           generator=torch.Generator().manual_seed(3))
    with torch.no_grad():  # transformers' default dynamic cache, never compiled
        expected = model.generate(prompt, do_sample=False, max_new_tokens=NEW_TOKENS,
                                  eos_token_id=None, pad_token_id=0, disable_compile=True)
    torch._dynamo.reset()
    logging.getLogger("openhlo.torch").setLevel(logging.INFO)
    pjrt.reset_metrics()
    got = generate_static(model, prompt, NEW_TOKENS)
    metrics = pjrt.metrics()
    assert got.shape == (1, 7 + NEW_TOKENS)
    assert torch.equal(got, expected)
    # prefill is eager; the other 63 tokens run one compiled program
    assert metrics.compiles == 1 and metrics.executions == NEW_TOKENS - 1
    assert sum(metrics.recompilations.values()) == 0
    assert not metrics.fallbacks and records(caplog, "runs in eager") == []
