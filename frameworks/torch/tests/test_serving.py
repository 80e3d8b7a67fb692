"""The serving engine (frameworks/torch/serving.py): 8 concurrent requests of mixed prompt
and output lengths, decoded 4 at a time over a paged KV cache of half the blocks they need
in all, with requests joining and leaving between steps, each get the greedy tokens eager
``generate()`` gives them alone (Llama, and the held-out Qwen2); the decode step compiles
once with no eager fallback, and blocks freed by finished requests serve later ones.
Skipped without ``transformers``."""
import pytest
import torch

import pjrt

pytest.importorskip("transformers", reason="needs transformers (pip install '.[models]')")

from frameworks.torch.models import causal_lm
from frameworks.torch.serving import ServingEngine, ServingError
from pjrt.plugins.cpu.codegen.build import find_compiler

pytestmark = pytest.mark.skipif(find_compiler() is None, reason="needs a C++ compiler")


def _requests(vocab: int) -> list:
    g = torch.Generator().manual_seed(5)
    lengths = [(3, 12), (17, 5), (1, 9), (8, 20), (12, 3), (5, 14), (20, 7), (2, 11)]
    return [(torch.randint(1, vocab, (p,), generator=g).tolist(), n) for p, n in lengths]


@pytest.mark.parametrize("name", ["llama", "qwen2"])
def test_each_request_gets_its_tokens_alone(name):
    model = causal_lm(name)
    requests = _requests(model.config.vocab_size)
    alone = []
    with torch.no_grad():
        for prompt, new in requests:
            out = model.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=new,
                                 eos_token_id=None, pad_token_id=0, disable_compile=True)
            alone.append(out[0, len(prompt):].tolist())
    torch._dynamo.reset()
    pjrt.reset_metrics()
    engine = ServingEngine(model, max_batch=4, block_size=4, num_blocks=20)  # 39 needed in all
    ids = [engine.add_request(prompt, new) for prompt, new in requests]
    holders: dict = {}  # block -> the requests that held it
    active_sizes = []
    while engine.has_work():
        engine.step()
        active_sizes.append(len(engine.active))
        for request in engine.active:
            for block in request.blocks:
                holders.setdefault(block, set()).add(request.id)
    assert [engine.tokens(i) for i in ids] == alone
    metrics = pjrt.metrics()
    assert metrics.compiles == 1 and not metrics.recompilations and not metrics.fallbacks
    assert max(active_sizes) == 4 and len(engine.cache.free) == len(engine.cache.keys[0])
    assert any(len(held_by) > 1 for held_by in holders.values())  # blocks were reused
    stats = engine.stats()
    assert stats["tokens"] == sum(new for _, new in requests) and stats["tokens_per_s"] > 0


def test_requests_and_models_it_cannot_take():
    model = causal_lm("llama", max_positions=32)
    engine = ServingEngine(model, max_batch=2, block_size=4, backend=None)
    with pytest.raises(ServingError, match="longer than the model's 32 positions"):
        engine.add_request(list(range(1, 30)), max_new_tokens=8)
    with pytest.raises(ServingError, match="needs a prompt"):
        engine.add_request([], max_new_tokens=8)
    with pytest.raises(ServingError, match="GPT2LMHeadModel is not supported"):
        ServingEngine(causal_lm("gpt2"))
