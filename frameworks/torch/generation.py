"""Hugging Face ``generate()`` with the decode step compiled once: ``generate_static``.

    from frameworks.torch.generation import generate_static
    tokens = generate_static(model, input_ids, max_new_tokens=64)         # greedy, on openhlo

A KV cache that grows by one token a step gives every decode step new shapes, and so a
compile per generated token (Dynamo marks the length dynamic after it changes once; a
plan is specialized per size, runner.py). transformers' ``StaticCache``
(``cache_implementation="static"``) allocates the cache at its final length once and
masks the unused tail, so every decode step has the same shapes: generate's own
auto-compile (``compile_config``) then traces the model's forward once and every later
token reuses that graph. The prompt (prefill) runs in eager PyTorch, as transformers does
it: its length differs per call and it runs once per request.

transformers only auto-compiles on accelerators unless ``CompileConfig._compile_all_devices``
is set, and passes ``mode`` to the backend (which ours does not take), so the config is
built here. For decoder models whose cache is compileable (tested: GPT-2, Llama, Qwen2 in
transformers 5.23).
"""
from __future__ import annotations

from typing import Callable

import torch


def compile_config(backend: str | Callable = "openhlo"):
    """A ``transformers.CompileConfig`` that compiles the decode step with ``backend`` on
    any device, as one graph (a graph break would be a silent eager island per token)."""
    from frameworks.torch.models.vision import import_transformers
    transformers = import_transformers()
    if backend == "openhlo":
        from frameworks.torch.backend import openhlo_backend
        backend = openhlo_backend
    config = transformers.CompileConfig(backend=backend, fullgraph=True, mode=None)
    config._compile_all_devices = True  # transformers' switch for compiling on CPU
    return config


def generate_static(model, input_ids: torch.Tensor, max_new_tokens: int,
                    backend: str | Callable | None = "openhlo", **kwargs) -> torch.Tensor:
    """Greedy ``model.generate`` with a static KV cache, the decode step compiled with
    ``backend`` (None: eager). Never stops early at an end-of-sequence token, so every
    call produces ``max_new_tokens`` tokens (what benchmarks and comparisons need)."""
    options = dict(do_sample=False, max_new_tokens=max_new_tokens, eos_token_id=None,
                   cache_implementation="static", pad_token_id=0)
    if backend is not None:
        options["compile_config"] = compile_config(backend)
    else:
        options["disable_compile"] = True
    options.update(kwargs)
    with torch.no_grad():
        return model.generate(input_ids, **options)
