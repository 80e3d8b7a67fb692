"""Continuous batching over a paged KV cache for Hugging Face Llama-family causal LMs.

    engine = ServingEngine(model, max_batch=8, block_size=16)      # Llama, Mistral, Qwen2
    a = engine.add_request([5, 17, 3], max_new_tokens=32)
    b = engine.add_request(other_prompt, max_new_tokens=8)
    while engine.has_work():
        engine.step()                       # one token for every active request
    engine.tokens(a)                        # the greedy tokens of request a
    engine.stats()                          # tokens/s, per-token latency, compiles

Requests join and leave between steps (continuous batching): a step first admits waiting
requests while a batch row and enough cache blocks are free, then runs one token of every
active request in one batched call, then retires the requests that are done and frees their
blocks for the next ones.

* **Paged KV cache** (``PagedKVCache``): per layer, keys and values in fixed-size blocks
  ``[num_blocks, block_size, kv_heads, head_dim]``; a request holds a list of blocks, in any
  order, reserved when it is admitted (its prompt plus its new tokens, so a running request
  never waits for memory) and returned when it finishes.
* **Decode step**: one function over the whole batch (``max_batch`` rows; empty rows have
  context length 0), compiled once with ``torch.compile`` (openhlo by default): the model's
  embeddings, norms, projections, rotary embedding and MLP (its own modules), and attention
  as the paged-attention decode kernel (pjrt/custom_kernels/paged_attention.py, the custom
  op ``torch.ops.openhlo.paged_attention_decode``) reading each row's blocks through the
  block table. Every step has the same shapes (batch rows, block-table width), so it never
  recompiles. The step returns the new token's keys and values, which are written into the
  cache after it (the compiled function is pure: the cache is read in place, never copied).
* **Prompts** go through the same step, one token a step (a row is a request's next
  prompt token until the prompt is in the cache, then its last generated token), so there
  is one compiled program for everything and no eager prefill of a new length per request;
  a request's first token comes when its last prompt token has run (time to first token
  grows with the prompt, which suits short prompts: a long one would want a prefill
  program of its own).

Decoding is greedy (argmax), as ``generate(do_sample=False)``; each request gets the tokens
it gets alone. Errors a caller can cause (a model of another family, a request longer than
the model's positions or the cache) are ``ServingError``s.
"""
from __future__ import annotations

import itertools
import math
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from stablehlo.errors import OpenHLOError


class ServingError(OpenHLOError):
    """A request or model the serving engine cannot take; the message says why."""


class PagedKVCache:
    """Every layer's keys and values in ``num_blocks`` blocks of ``block_size`` tokens, and
    the free list of blocks."""

    def __init__(self, layers: int, num_blocks: int, block_size: int, kv_heads: int,
                 head_dim: int, dtype=torch.float32):
        shape = (num_blocks, block_size, kv_heads, head_dim)
        self.keys = [torch.zeros(shape, dtype=dtype) for _ in range(layers)]
        self.values = [torch.zeros(shape, dtype=dtype) for _ in range(layers)]
        self.block_size = block_size
        self.free = list(range(num_blocks))

    def blocks_for(self, tokens: int) -> int:
        return math.ceil(tokens / self.block_size)

    def allocate(self, count: int) -> list:
        blocks, self.free = self.free[:count], self.free[count:]
        return blocks

    def release(self, blocks: list) -> None:
        self.free.extend(blocks)

    def slots(self, blocks: list, positions) -> torch.Tensor:
        """Flat slot indices (block * block_size + offset) of token ``positions``."""
        positions = torch.as_tensor(positions)
        table = torch.tensor(blocks, dtype=torch.long)
        return table[positions // self.block_size] * self.block_size + \
            positions % self.block_size

    def write(self, layer: int, slots: torch.Tensor, keys: torch.Tensor,
              values: torch.Tensor) -> None:
        """Store ``keys``/``values`` (``[tokens, kv_heads, head_dim]``) of ``layer`` at
        ``slots``."""
        flat = (-1, *self.keys[layer].shape[2:])
        self.keys[layer].view(flat)[slots] = keys
        self.values[layer].view(flat)[slots] = values


@dataclass
class Request:
    id: int
    prompt: list
    max_new_tokens: int
    tokens: list = field(default_factory=list)    # generated so far
    fed: int = 0                                   # tokens in the cache (run through steps)
    blocks: list = field(default_factory=list)
    row: int = -1                                  # its batch row while active
    added_s: float = 0.0
    token_s: list = field(default_factory=list)    # when each token was produced

    @property
    def next_input(self) -> int:
        """The token the next step runs: the next prompt token, then the last generated."""
        return self.prompt[self.fed] if self.fed < len(self.prompt) else self.tokens[-1]

    @property
    def done(self) -> bool:
        return len(self.tokens) >= self.max_new_tokens


class _LlamaStep:
    """The decode step of a Llama-family model (Llama, Mistral, Qwen2: pre-norm decoder
    layers with rotary embeddings), batched over rows, with paged attention."""

    FAMILY = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM")

    def __init__(self, model):
        if type(model).__name__ not in self.FAMILY:
            raise ServingError(f"serving: {type(model).__name__} is not supported (the decode "
                               f"step is written for {', '.join(self.FAMILY)})")
        from frameworks.torch.custom_kernels import torch_op
        from pjrt.custom_kernels import paged_attention
        paged_attention.define()
        self.paged_attention = torch_op(paged_attention.NAME)
        # the model family's own rotary helper (each modeling file defines one)
        self.apply_rotary = sys.modules[type(model).__module__].apply_rotary_pos_emb
        self.model = model
        attention = model.model.layers[0].self_attn
        self.head_dim = attention.head_dim
        self.heads = model.config.num_attention_heads
        self.kv_heads = model.config.num_key_value_heads
        self.scaling = float(attention.scaling)

    def __call__(self, ids, positions, block_tables, context_lens, key_cache, value_cache):
        """Next tokens ``[rows]`` and the new keys and values ``[layers, rows, kv_heads,
        head_dim]`` for tokens ``ids`` at ``positions``."""
        inner = self.model.model
        hidden = inner.embed_tokens(ids[:, None])                        # [rows, 1, hidden]
        cos, sin = inner.rotary_emb(hidden, positions[:, None])
        rows = ids.shape[0]
        new_keys, new_values = [], []
        for layer, k_cache, v_cache in zip(inner.layers, key_cache, value_cache):
            attention = layer.self_attn
            x = layer.input_layernorm(hidden)
            q = attention.q_proj(x).view(rows, 1, self.heads, self.head_dim).transpose(1, 2)
            k = attention.k_proj(x).view(rows, 1, self.kv_heads, self.head_dim).transpose(1, 2)
            v = attention.v_proj(x).view(rows, self.kv_heads, self.head_dim)
            q, k = self.apply_rotary(q, k, cos, sin)
            q, k = q[:, :, 0], k[:, :, 0]                                 # [rows, heads, d]
            out = self.paged_attention(q, k, v, k_cache, v_cache, block_tables, context_lens,
                                       scale=self.scaling)
            hidden = hidden + attention.o_proj(out.reshape(rows, 1, -1))
            hidden = hidden + layer.mlp(layer.post_attention_layernorm(hidden))
            new_keys.append(k)
            new_values.append(v)
        logits = self.model.lm_head(inner.norm(hidden))[:, 0]
        return logits.argmax(-1), torch.stack(new_keys), torch.stack(new_values)


class ServingEngine:
    """Requests decoded together, one token each per ``step()`` (see the module docstring).

    ``max_batch``: rows of the decode step (requests decoded at once); ``block_size``: tokens
    a cache block holds; ``num_blocks``: blocks of the cache (default: enough for
    ``max_batch`` requests of the model's full length); ``backend``: what compiles the step
    (a torch.compile backend; None: eager)."""

    def __init__(self, model, max_batch: int = 8, block_size: int = 16,
                 num_blocks: int | None = None, backend: str | Callable | None = "openhlo"):
        self.step_fn = _LlamaStep(model)
        self.model = model
        self.max_positions = model.config.max_position_embeddings
        self.max_batch = max_batch
        self.table_width = math.ceil(self.max_positions / block_size)
        self.cache = PagedKVCache(model.config.num_hidden_layers,
                                  num_blocks or max_batch * self.table_width, block_size,
                                  self.step_fn.kv_heads, self.step_fn.head_dim,
                                  next(model.parameters()).dtype)
        if backend == "openhlo":
            from frameworks.torch.backend import openhlo_backend
            backend = openhlo_backend
        self.decode = self.step_fn if backend is None else torch.compile(
            self.step_fn, backend=backend, fullgraph=True, dynamic=False)
        self.waiting: list = []
        self.active: list = []
        self.requests: dict = {}
        self._ids = itertools.count()
        self.step_seconds: list = []
        self._started: float | None = None
        self._finished_s = 0.0

    def add_request(self, prompt, max_new_tokens: int) -> int:
        """Queue a request (token ids, how many tokens to generate); returns its id."""
        prompt = [int(t) for t in prompt]
        if not prompt or max_new_tokens < 1:
            raise ServingError("serving: a request needs a prompt and max_new_tokens >= 1")
        length = len(prompt) + max_new_tokens - 1
        if length > self.max_positions:
            raise ServingError(f"serving: a request of {len(prompt)} prompt and "
                               f"{max_new_tokens} new tokens is longer than the model's "
                               f"{self.max_positions} positions")
        if self.cache.blocks_for(length) > len(self.cache.keys[0]):
            raise ServingError(f"serving: a request of {length} tokens needs more blocks than "
                               f"the cache has ({len(self.cache.keys[0])})")
        request = Request(next(self._ids), prompt, max_new_tokens, added_s=time.perf_counter())
        self.requests[request.id] = request
        self.waiting.append(request)
        return request.id

    def has_work(self) -> bool:
        return bool(self.waiting or self.active)

    def tokens(self, request_id: int) -> list:
        return list(self.requests[request_id].tokens)

    def step(self) -> dict:
        """Admit what fits, run one token of every active request, retire the finished
        ones; returns {request id: the token it got} (requests still in their prompt get none)."""
        if self._started is None:
            self._started = time.perf_counter()
        self._admit()
        produced = {}
        if self.active:
            start = time.perf_counter()
            produced = self._run_rows(self.active)
            self.step_seconds.append(time.perf_counter() - start)
        for request in [r for r in self.active if r.done]:
            self.active.remove(request)
            self.cache.release(request.blocks)
            request.blocks = []
        self._finished_s = time.perf_counter()
        return produced

    def run(self) -> dict:
        """Step until every request is done; {request id: its tokens}."""
        while self.has_work():
            self.step()
        return {i: r.tokens for i, r in self.requests.items()}

    def _admit(self) -> None:
        while self.waiting and len(self.active) < self.max_batch:
            request = self.waiting[0]
            need = self.cache.blocks_for(len(request.prompt) + request.max_new_tokens - 1)
            if need > len(self.cache.free):
                break  # first come, first served: wait for blocks to be freed
            self.waiting.pop(0)
            request.blocks = self.cache.allocate(need)
            rows_used = {r.row for r in self.active}
            request.row = next(i for i in range(self.max_batch) if i not in rows_used)
            self.active.append(request)

    def _run_rows(self, running: list) -> dict:
        rows = self.max_batch
        ids = torch.zeros(rows, dtype=torch.long)
        positions = torch.zeros(rows, dtype=torch.long)
        tables = torch.zeros(rows, self.table_width, dtype=torch.int32)
        lens = torch.zeros(rows, dtype=torch.int32)
        for r in running:
            ids[r.row] = r.next_input
            positions[r.row] = r.fed
            tables[r.row, :len(r.blocks)] = torch.tensor(r.blocks, dtype=torch.int32)
            lens[r.row] = r.fed
        with torch.no_grad():
            next_ids, new_keys, new_values = self.decode(ids, positions, tables, lens,
                                                         self.cache.keys, self.cache.values)
        now = time.perf_counter()
        rows_of = torch.tensor([r.row for r in running])
        slots = torch.cat([self.cache.slots(r.blocks, [r.fed]) for r in running])
        for layer in range(len(self.cache.keys)):
            self.cache.write(layer, slots, new_keys[layer, rows_of], new_values[layer, rows_of])
        produced = {}
        for r in running:
            r.fed += 1
            if r.fed >= len(r.prompt):  # the prompt is in: the step's output is a new token
                r.tokens.append(int(next_ids[r.row]))
                r.token_s.append(now)
                produced[r.id] = r.tokens[-1]
        return produced

    def reset_stats(self) -> None:
        """Forget finished requests and restart the clock (active and waiting ones stay):
        ``stats()`` then covers what comes after, e.g. not the first step's compile."""
        for request_id in [i for i, r in self.requests.items()
                           if r.done and r not in self.active]:
            del self.requests[request_id]
        self.step_seconds = []
        self._started = None

    def stats(self) -> dict:
        """Throughput and latency so far: generated tokens per second of wall time (prompts
        included), per-token latency (the time between a request's consecutive tokens:
        median and max), time to first token (median), decode steps."""
        requests = self.requests.values()
        tokens = sum(len(r.tokens) for r in requests)
        wall = (self._finished_s - self._started) if self._started is not None else 0.0
        gaps = [b - a for r in requests for a, b in zip(r.token_s, r.token_s[1:])]
        first = [r.token_s[0] - r.added_s for r in requests if r.token_s]
        return {"tokens": tokens, "seconds": wall,
                "tokens_per_s": tokens / wall if wall else 0.0,
                "per_token_latency_ms": statistics.median(gaps) * 1e3 if gaps else 0.0,
                "max_token_latency_ms": max(gaps) * 1e3 if gaps else 0.0,
                "time_to_first_token_ms": statistics.median(first) * 1e3 if first else 0.0,
                "steps": len(self.step_seconds)}
