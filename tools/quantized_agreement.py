"""Measurement (not a test): how often ``quantize_``'s weight-only modes change a random-weight
decoder's greedy next token, next to the two limits no quantizer moves.

    python -m tools.quantized_agreement [--models nn,llama,qwen2] [--init-range R]
        [--seeds 0,1,2] [--modes weight-int8,weight-int4,weight-int4:g64,...]
        [--hidden 512] [--layers 4] [--vocab 8192] [--batch 4] [--length 128]

Per model (tools/bench_quantized_decode.py's ``build_model``; ``--init-range`` sets the
transformers configs' ``initializer_range``, default theirs, 0.02) and seed: f32 eager logits
on ``batch x length`` random tokens (every position counts), then per mode the share of
positions whose argmax matches f32's, the median relative logit error ``|l_q - l| / |l -
mean(l)|`` per position, and the seconds ``quantize_`` took. The quantized models run eagerly:
the dequantizing reference, which the compiled programs match to 1e-4
(frameworks/torch/tests/test_torch_quantize.py). A mode is ``quantize_``'s, optionally
``:gN`` (group size N) and ``:int4-head`` (``int8_lm_head=False``). Two rows bound what any
quantizer can reach:

* ``f64``: the model in float64 against f32 (the noise floor: f32's own rounding);
* ``noise e``: f32's logits plus Gaussian noise of ``e`` times each position's logit spread,
  the agreement a logit error of that size buys (random weights leave near ties).

Each row prints the agreement per seed, its mean and the median relative error, then the share
of positions the most common argmax takes (a sign of degenerate logits) and the load average.
"""
from __future__ import annotations

import argparse
import copy
import os
import time

import torch

from tools.bench_quantized_decode import TRANSFORMERS_DECODERS, build_model, quantized_copy

NOISE_LEVELS = (0.003, 0.01, 0.03)
DEFAULT_MODES = ("weight-int8", "weight-int4", "weight-int4:g64", "weight-int4:g128",
                 "weight-int4:int4-head")


def relative_error(logits: torch.Tensor, reference: torch.Tensor) -> float:
    """Median over positions of ``|logits - reference|`` over ``reference``'s spread."""
    spread = (reference - reference.mean(-1, keepdim=True)).norm(dim=-1)
    return ((logits - reference).norm(dim=-1) / spread).median().item()


def measure_seed(model: torch.nn.Module, ids: torch.Tensor, modes, seed: int) -> dict:
    """``{row: (agreement, relative error, seconds)}`` for one model and its inputs."""
    rows = {}
    with torch.no_grad():
        reference = model(ids)
        wanted = reference.argmax(-1)
        rows["most common argmax"] = (torch.bincount(wanted.flatten()).max().item()
                                      / wanted.numel(), 0.0, 0.0)
        in_f64 = copy.deepcopy(model).double()(ids)
        rows["f64"] = (_agreement(in_f64, wanted), relative_error(in_f64, reference.double()), 0.0)
        noise = torch.Generator().manual_seed(1000 + seed)
        spread = reference.std(-1, keepdim=True)
        for level in NOISE_LEVELS:
            noisy = reference + level * spread * torch.randn(reference.shape, generator=noise)
            rows[f"noise {level:g}"] = (_agreement(noisy, wanted),
                                        relative_error(noisy, reference), 0.0)
        for spec in modes:
            start = time.perf_counter()
            quantized = quantized_copy(model, spec)
            seconds = time.perf_counter() - start
            logits = quantized(ids)
            rows[spec] = (_agreement(logits, wanted), relative_error(logits, reference), seconds)
    return rows


def _agreement(logits: torch.Tensor, wanted: torch.Tensor) -> float:
    return (logits.argmax(-1) == wanted).double().mean().item()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="nn,llama,qwen2",
                        help=f"comma-separated: {', '.join((*TRANSFORMERS_DECODERS, 'nn'))}")
    parser.add_argument("--init-range", type=float, default=None)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES))
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--length", type=int, default=128)
    args = parser.parse_args(argv)
    seeds = [int(seed) for seed in args.seeds.split(",")]
    modes = args.modes.split(",")
    print(f"hidden {args.hidden}, {args.layers} layers, vocab {args.vocab}, init range "
          f"{args.init_range or 'default'}, {args.batch}x{args.length} positions per seed; "
          f"load average {os.getloadavg()[0]:.2f}")
    for kind in args.models.split(","):
        results: dict = {}
        for seed in seeds:
            torch.manual_seed(seed)
            model = build_model(kind, args.hidden, args.layers, args.vocab, args.init_range)
            ids = torch.randint(0, args.vocab, (args.batch, args.length),
                                generator=torch.Generator().manual_seed(100 + seed))
            for row, values in measure_seed(model, ids, modes, seed).items():
                results.setdefault(row, []).append(values)
        for row, values in results.items():
            agreements = " ".join(f"{a:.4f}" for a, _, _ in values)
            mean = sum(a for a, _, _ in values) / len(values)
            error = sorted(e for _, e, _ in values)[len(values) // 2]
            seconds = max(s for _, _, s in values)
            print(f"{kind:<8} {row:<24} {agreements}  mean {mean:.4f}  rel.err {error:.2e}"
                  + (f"  quantize_ {seconds:.1f} s" if seconds else ""))
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
