"""Benchmark (not a test): a batch-1 decode step of a Llama-style model, f32 against
``quantize_``'s weight-int8, weight-int4 and dynamic-int8, each under
``torch.compile(backend="openhlo")``, with eager PyTorch f32 beside them.

    python -m tools.bench_quantized_decode [--hidden 512] [--layers 4] [--vocab 8192]
                                           [--model llama|qwen2|mistral|nn] [--budget 2]

The model is a transformers ``LlamaForCausalLM`` (or ``--model`` another decoder of its
kind) from a config with random weights when transformers is installed (``--model nn``:
frameworks/torch/models/llama_nn.py), and the
step is one token through it without a KV cache: the cost a decode step spends streaming
every weight once, which is what quantized weights shrink (attention over a cache, small
at these lengths, is left out). Contenders run in alternating rounds
(tools/bench/timing.py), so load from elsewhere slows all of them; prints the median time
per step (and the spread), the speed-up over our own f32, the weight bytes each step reads,
the greedy next-token agreement with f32 (each variant's eager, dequantizing model on 8 x
128 random tokens, every position) and the machine's load. ``weight-int4`` keeps the output
projection (``lm_head``) at int8 (``quantize_``'s default), ``weight-int4:int4-head`` does
not. tools/quantized_agreement.py measures agreement more thoroughly.
"""
from __future__ import annotations

import argparse
import copy
import importlib.util
import os
from typing import Optional

import torch


# transformers decoders of the Llama kind: (config class, model class, key/value heads)
TRANSFORMERS_DECODERS = {"llama": ("LlamaConfig", "LlamaForCausalLM", None),
                         "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", 2),
                         "mistral": ("MistralConfig", "MistralForCausalLM", 2)}


def build_model(kind: str, hidden: int, layers: int, vocab: int,
                init_range: Optional[float] = None) -> torch.nn.Module:
    """A random-weight decoder returning logits: ``kind`` one of ``TRANSFORMERS_DECODERS``
    (weights N(0, ``init_range``), the config's default 0.02 when None) or ``nn``
    (frameworks/torch/models/llama_nn.py, torch's default initialisation)."""
    intermediate = hidden * 8 // 3 // 64 * 64
    if kind == "nn":
        from frameworks.torch.models.llama_nn import LlamaNN
        return LlamaNN(vocab, hidden, layers, hidden // 64, intermediate).eval()
    from frameworks.torch.models.vision import import_transformers
    transformers = import_transformers()
    config_name, model_name, kv_heads = TRANSFORMERS_DECODERS[kind]
    extra = {} if init_range is None else {"initializer_range": init_range}
    if kind != "llama":
        extra["tie_word_embeddings"] = False
    config = getattr(transformers, config_name)(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=intermediate,
        num_hidden_layers=layers, num_attention_heads=hidden // 64,
        num_key_value_heads=kv_heads or hidden // 64, max_position_embeddings=256, **extra)
    return _Logits(getattr(transformers, model_name)(config).eval())


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


def quantized_copy(model: torch.nn.Module, spec: str) -> torch.nn.Module:
    """``model`` quantized by ``spec``: a ``quantize_`` mode, with ``:gN`` (group size) and
    ``:int4-head`` (``lm_head`` at int4 too) options."""
    from frameworks.torch import quantize_
    mode, *options = spec.split(":")
    kwargs = {}
    for option in options:
        if option == "int4-head":
            kwargs["int8_lm_head"] = False
        elif option.startswith("g") and option[1:].isdigit():
            kwargs["group_size"] = int(option[1:])
        else:
            raise SystemExit(f"unknown option '{option}' in the quantization '{spec}'")
    return quantize_(copy.deepcopy(model), mode, **kwargs)


def agreement(model: torch.nn.Module, variant: torch.nn.Module, vocab: int) -> float:
    """Fraction of positions whose greedy next token ``variant`` and ``model`` agree on."""
    ids = torch.randint(0, vocab, (8, 128), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return (variant(ids).argmax(-1) == model(ids).argmax(-1)).float().mean().item()


def _no_grad(fn, ids):
    def step():
        with torch.no_grad():
            return fn(ids)
    return step


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--budget", type=float, default=2.0,
                        help="seconds of steps per contender")
    parser.add_argument("--model", choices=(*TRANSFORMERS_DECODERS, "nn"), default=None)
    args = parser.parse_args(argv)
    kind = args.model
    if kind is None:
        # installed or not, without importing it here (frameworks/torch/models/vision.py)
        kind = "llama" if importlib.util.find_spec("transformers") is not None else "nn"
    from frameworks.torch import openhlo_backend
    torch.manual_seed(0)
    model = build_model(kind, args.hidden, args.layers, args.vocab)
    ids = torch.randint(0, args.vocab, (1, 1))
    print(f"model: {kind}, hidden {args.hidden}, {args.layers} layers, vocab "
          f"{args.vocab}; batch 1, one token; load average {os.getloadavg()[0]:.2f}")
    from tools.bench.timing import interleaved_medians
    steps = {"eager PyTorch f32": _no_grad(model, ids)}
    variants = {}
    torch._dynamo.reset()
    for mode in ("f32", "weight-int8", "weight-int4", "weight-int4:int4-head", "dynamic-int8"):
        variants[mode] = model if mode == "f32" else quantized_copy(model, mode)
        steps[f"openhlo {mode}"] = _no_grad(torch.compile(variants[mode],
                                                          backend=openhlo_backend), ids)
    # alternating rounds: load from elsewhere slows every contender alike
    times = interleaved_medians(steps, args.budget)
    baseline = times["openhlo f32"]["median_s"]
    for name, t in times.items():
        seconds = t["median_s"]
        line = f"{name:<29} {seconds * 1e3:8.2f} ms  {baseline / seconds:5.2f}x our f32"
        mode = name.removeprefix("openhlo ")
        if mode in variants:
            line += f"  weights {weight_bytes(variants[mode]) / 2**20:7.2f} MiB"
            line += f"  agreement {agreement(model, variants[mode], args.vocab):6.2%}"
        print(line + f"  (min {t['min_s'] * 1e3:.2f}, max {t['max_s'] * 1e3:.2f})")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
