"""Benchmark (not a test): a batch-1 decode step of a Llama-style model, f32 against
``quantize_``'s weight-int8, weight-int4 and dynamic-int8, each under
``torch.compile(backend="openhlo")``, with eager PyTorch f32 beside them.

    python -m tools.bench_quantized_decode [--hidden 512] [--layers 4] [--vocab 8192]

The model is a transformers ``LlamaForCausalLM`` from a config with random weights when
transformers is installed (``--model nn``: frameworks/torch/models/llama_nn.py), and the
step is one token through it without a KV cache: the cost a decode step spends streaming
every weight once, which is what quantized weights shrink (attention over a cache, small
at these lengths, is left out). Prints the median time per step, the speed-up over our own
f32, the weight bytes each step reads, and the machine's load (other work skews times).
"""
from __future__ import annotations

import argparse
import copy
import os
import statistics
import time

import torch


def build_model(kind: str, hidden: int, layers: int, vocab: int) -> torch.nn.Module:
    if kind == "transformers":
        from frameworks.torch.models.vision import import_transformers
        transformers = import_transformers()
        config = transformers.LlamaConfig(
            vocab_size=vocab, hidden_size=hidden, intermediate_size=hidden * 8 // 3 // 64 * 64,
            num_hidden_layers=layers, num_attention_heads=hidden // 64,
            num_key_value_heads=hidden // 64, max_position_embeddings=256)
        model = transformers.LlamaForCausalLM(config).eval()
        return _Logits(model)
    from frameworks.torch.models.llama_nn import LlamaNN
    return LlamaNN(vocab, hidden, layers, hidden // 64, hidden * 8 // 3 // 64 * 64).eval()


class _Logits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(input_ids=ids, use_cache=False).logits


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of the linear layers' weights and scales (what a decode step streams)."""
    from frameworks.torch import QuantizedLinear
    total = 0
    for module in model.modules():
        if isinstance(module, QuantizedLinear):
            total += module.weight.nbytes + module.scales.nbytes
        elif isinstance(module, torch.nn.Linear):
            total += module.weight.nbytes
    return total


def time_steps(fn, ids, steps: int) -> float:
    """Median seconds of ``fn(ids)`` over ``steps`` calls, after three warm-up calls."""
    with torch.no_grad():
        for _ in range(3):
            fn(ids)
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            fn(ids)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--model", choices=("transformers", "nn"), default=None)
    args = parser.parse_args(argv)
    kind = args.model
    if kind is None:
        try:
            import transformers  # noqa: F401
            kind = "transformers"
        except ImportError:
            kind = "nn"
    from frameworks.torch import openhlo_backend, quantize_
    torch.manual_seed(0)
    model = build_model(kind, args.hidden, args.layers, args.vocab)
    ids = torch.randint(0, args.vocab, (1, 1))
    print(f"model: {kind} Llama, hidden {args.hidden}, {args.layers} layers, vocab "
          f"{args.vocab}; batch 1, one token; load average {os.getloadavg()[0]:.2f}")
    eager = time_steps(model, ids, args.steps)
    print(f"{'eager PyTorch f32':<22} {eager * 1e3:8.2f} ms")
    baseline = None
    for mode in ("f32", "weight-int8", "weight-int4", "dynamic-int8"):
        variant = model if mode == "f32" else quantize_(copy.deepcopy(model), mode)
        torch._dynamo.reset()
        compiled = torch.compile(variant, backend=openhlo_backend)
        seconds = time_steps(compiled, ids, args.steps)
        baseline = baseline or seconds
        print(f"{'openhlo ' + mode:<22} {seconds * 1e3:8.2f} ms  {baseline / seconds:5.2f}x "
              f"our f32  weights {weight_bytes(variant) / 2**20:7.2f} MiB")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
