"""``python -m tools.bench_amp``: automatic mixed precision's training step time, bf16 vs f32.

A GPT-2 (transformers config, random weights: ``--hidden``, ``--layers``, ``--batch``,
``--seq``) trains on next-token prediction with Adam, its forward and loss compiled by
``torch.compile(backend="openhlo")``, once in f32 and once inside
``torch.autocast("cpu", dtype=torch.bfloat16)``; eager PyTorch does the same as a reference.
Reported: the median step time (forward, backward, optimizer step) of each, the bf16/f32
ratio, the loss after ``--steps`` steps of each, whether this CPU computes bf16 natively
(AVX-512 BF16) and whether its GEMMs run on AMX tiles, and the CPU count and 1-minute load. Contenders are timed in alternating
rounds (tools/bench/timing.py), so load from elsewhere slows all of them. Speed is reported,
never asserted (issue 20 wants bf16 faster than f32).
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import sys

from tools.bench.timing import interleaved_medians


def _model(hidden: int, layers: int, seed: int = 0):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import transformers as tf
    torch.manual_seed(seed)
    config = tf.GPT2Config(vocab_size=512, n_positions=1024, n_embd=hidden, n_layer=layers,
                           n_head=max(1, hidden // 64), resid_pdrop=0.0, embd_pdrop=0.0,
                           attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    return tf.GPT2LMHeadModel(config).train()


def _trainer(model, ids, amp: bool, compiled: bool):
    """One training step (forward and loss compiled when ``compiled``), returning the loss."""
    import torch
    import torch.nn.functional as F
    vocab = model.config.vocab_size

    def loss_of(ids):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            logits = model(input_ids=ids, use_cache=False).logits
            return F.cross_entropy(logits[:, :-1].reshape(-1, vocab), ids[:, 1:].reshape(-1))

    forward = torch.compile(loss_of, backend="openhlo") if compiled else loss_of
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        optimizer.zero_grad()
        loss = forward(ids)
        loss.backward()
        optimizer.step()
        return loss.item()
    return step


def run(hidden: int = 256, layers: int = 2, batch: int = 8, seq: int = 64, steps: int = 20,
        budget: float = 5.0, eager: bool = True) -> dict:
    # compiles wait for the generated kernels: nothing is timed on the op-by-op tier
    os.environ["OPENHLO_CPU_ASYNC_CODEGEN"] = "0"
    import torch

    from pjrt.plugins.cpu.native_module import native
    torch.manual_seed(1)
    base = _model(hidden, layers)
    ids = torch.randint(0, base.config.vocab_size, (batch, seq))
    contenders = [("openhlo_f32", False, True), ("openhlo_bf16", True, True)]
    if eager:
        contenders += [("eager_f32", False, False), ("eager_bf16", True, False)]
    trainers, losses = {}, {}
    for name, amp, compiled in contenders:
        trainers[name] = _trainer(copy.deepcopy(base), ids, amp, compiled)
        losses[name] = [trainers[name]() for _ in range(steps)][-1]
    times = interleaved_medians(trainers, budget)
    report = {
        "config": {"hidden": hidden, "layers": layers, "batch": batch, "seq": seq,
                   "steps": steps},
        "bf16_native": bool(native().lowp.active_isa()["bf16"]),
        "amx": bool(native().lowp.active_isa()["amx"]),
        "cpus": os.cpu_count(), "load_1min": os.getloadavg()[0],
        "step_s": {name: t["median_s"] for name, t in times.items()},
        "loss_after_steps": losses,
        "bf16_over_f32": {
            prefix: times[f"{prefix}_bf16"]["median_s"] / times[f"{prefix}_f32"]["median_s"]
            for prefix in ("openhlo", "eager") if f"{prefix}_f32" in times}}
    return report


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.bench_amp", description=__doc__.split(
        "\n\n")[0])
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--steps", type=int, default=20, help="training steps before timing")
    p.add_argument("--budget", type=float, default=5.0, help="seconds of timing per contender")
    p.add_argument("--no-eager", action="store_true", help="leave eager PyTorch out")
    p.add_argument("--json", metavar="OUT", help="also write the report here")
    args = p.parse_args(argv)
    report = run(args.hidden, args.layers, args.batch, args.seq, args.steps, args.budget,
                 not args.no_eager)
    text = json.dumps(report, indent=1)
    sys.stdout.write(text + "\n")
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
