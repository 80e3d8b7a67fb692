"""A small byte-level decoder trained here, so weight-only quantization can be measured on
weights that learned something (tools/quantized_agreement.py ``--trained``).

The text is the Python standard library's own top-level ``*.py`` files (on every machine,
no download), in sorted order; every ``HELD_OUT_EVERY``-th file is held out for measuring
and never trained on. The vocabulary is the 256 byte values, so no tokenizer is needed.
The model is tools/bench_quantized_decode.py's ``build_model`` (a transformers decoder, or
``nn``) at that vocabulary, trained with AdamW on random windows of the training text:
seeded, single-threaded (``torch.set_num_threads(1)``: the machine stays usable by others),
progress on stderr. The trained ``state_dict`` is cached under ``xla_core.cache_root``'s
``trained_decoders`` folder (``$OPENHLO_CACHE_DIR``, else ``~/.cache/openhlo``), in a file
named for a hash of the settings, the training text and torch's version, so a re-run loads
it (the training code is not in the key: after changing it, ``--retrain``).
"""
from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import math
import os
import sys
import sysconfig
import time
from typing import Optional, TextIO

import torch

from tools.bench_quantized_decode import build_model

BYTE_VOCAB = 256
HELD_OUT_EVERY = 8


@dataclasses.dataclass(frozen=True)
class TrainingSettings:
    """What the trained weights depend on (besides the text): the cache key hashes it."""
    kind: str = "llama"
    hidden: int = 512
    layers: int = 4
    steps: int = 400
    batch: int = 8
    length: int = 128
    learning_rate: float = 1e-3
    seed: int = 0


def stdlib_text() -> tuple[torch.Tensor, torch.Tensor]:
    """``(train, held_out)``: the bytes of the standard library's sorted top-level ``*.py``
    files, every ``HELD_OUT_EVERY``-th file (from the last of each run of that many) held out,
    each part concatenated into one uint8 tensor."""
    files = sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py")))
    parts: tuple[list, list] = ([], [])
    for index, path in enumerate(files):
        with open(path, "rb") as handle:
            parts[index % HELD_OUT_EVERY == HELD_OUT_EVERY - 1].append(handle.read())
    return tuple(torch.frombuffer(bytearray(b"".join(part)), dtype=torch.uint8)
                 for part in parts)


def windows(text: torch.Tensor, batch: int, length: int,
            generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids, targets)``: ``batch`` random windows of ``length`` bytes of ``text`` and the
    byte after each position."""
    starts = torch.randint(0, len(text) - length - 1, (batch,), generator=generator)
    rows = torch.stack([text[start:start + length + 1] for start in starts.tolist()]).long()
    return rows[:, :-1], rows[:, 1:]


def next_byte_quality(model: torch.nn.Module, ids: torch.Tensor,
                      targets: torch.Tensor) -> tuple[float, float]:
    """``(cross-entropy in nats, share of positions whose argmax is the next byte)``."""
    with torch.no_grad():
        logits = model(ids)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             targets.reshape(-1))
    return loss.item(), (logits.argmax(-1) == targets).double().mean().item()


def train(settings: TrainingSettings, text: torch.Tensor,
          log: Optional[TextIO] = sys.stderr) -> torch.nn.Module:
    """A model of ``settings.kind`` trained on ``text``, in eval mode; a line to ``log``
    every tenth of the steps."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(settings.seed)
        model = build_model(settings.kind, settings.hidden, settings.layers, BYTE_VOCAB).train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate,
                                      weight_decay=0.01)
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda step: _warmup_cosine(step, settings.steps))
        batches = torch.Generator().manual_seed(settings.seed)
        start = time.perf_counter()
        for step in range(1, settings.steps + 1):
            ids, targets = windows(text, settings.batch, settings.length, batches)
            logits = model(ids)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, BYTE_VOCAB),
                                                     targets.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            if log is not None and (step % max(1, settings.steps // 10) == 0
                                    or step == settings.steps):
                print(f"  step {step}/{settings.steps}: training loss {loss.item():.3f} "
                      f"({time.perf_counter() - start:.0f} s)", file=log, flush=True)
    finally:
        torch.set_num_threads(threads)
    return model.eval()


def _warmup_cosine(step: int, steps: int) -> float:
    # a short warm-up keeps AdamW's first, badly estimated updates small
    warmup = max(1, steps // 20)
    if step < warmup:
        return (step + 1) / warmup
    return 0.1 + 0.45 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))


def cache_path(settings: TrainingSettings, text: torch.Tensor) -> str:
    """The cached ``state_dict``'s file: a hash of the settings, the training text and the
    torch version (whose kernels round the training steps)."""
    from xla_core.cache_root import cache_root
    key = hashlib.sha256(json.dumps(dataclasses.asdict(settings), sort_keys=True).encode())
    key.update(text.numpy().tobytes())
    key.update(torch.__version__.encode())
    return cache_root("trained_decoders", f"{settings.kind}-{key.hexdigest()[:16]}.pt")


def trained_decoder(settings: TrainingSettings, retrain: bool = False,
                    log: Optional[TextIO] = sys.stderr) -> tuple[torch.nn.Module, float]:
    """``(model, seconds of training)``: the cached model for ``settings`` (0 seconds), else
    (or with ``retrain``) one trained on ``stdlib_text()``'s training part and cached."""
    text, _ = stdlib_text()
    path = cache_path(settings, text)
    if os.path.exists(path) and not retrain:
        model = build_model(settings.kind, settings.hidden, settings.layers, BYTE_VOCAB)
        model.load_state_dict(torch.load(path, weights_only=True))
        return model.eval(), 0.0
    if log is not None:
        print(f"training {settings} on {len(text)} bytes; caching it in {path}",
              file=log, flush=True)
    start = time.perf_counter()
    model = train(settings, text, log)
    seconds = time.perf_counter() - start
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # written under another name and renamed: a run stopped midway leaves no half file
    torch.save(model.state_dict(), path + ".partial")
    os.replace(path + ".partial", path)
    return model, seconds
