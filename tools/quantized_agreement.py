"""Measurement (not a test): how often ``quantize_``'s weight-only modes change a decoder's
greedy next token, next to the two limits no quantizer moves; random weights, or with
``--trained`` weights trained here.

    python -m tools.quantized_agreement [--models nn,llama,qwen2] [--init-range R]
        [--seeds 0,1,2] [--modes weight-int8,weight-int4,weight-int4:g64,...]
        [--hidden 512] [--layers 4] [--vocab 8192] [--batch 4] [--length 128]
        [--trained [--steps 400] [--retrain] [--compiled-modes weight-int8,weight-int4]]

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

``--trained``: one byte-level model per kind (vocabulary 256; ``--vocab`` and
``--init-range`` unused), trained for ``--steps`` on the standard library's source or loaded
from the cache (tools/trained_decoder.py); a seed picks ``batch`` windows of ``length`` bytes
of the held-out files instead of random tokens. It prints the model's held-out next-byte loss
and accuracy (did it learn), the rows above, and for each of ``--compiled-modes`` whether the
quantized model under ``torch.compile(backend="openhlo")`` picks the eager reference's argmax
on 2 x 32 of those positions (the compiled program is what users run).
"""
from __future__ import annotations

import argparse
import copy
import math
import os
import time

import torch

from tools.bench_quantized_decode import TRANSFORMERS_DECODERS, build_model, quantized_copy
from tools.trained_decoder import TrainingSettings, next_byte_quality, stdlib_text, \
    trained_decoder, windows

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
        rows["f64"] = (agreement(in_f64, wanted), relative_error(in_f64, reference.double()), 0.0)
        noise = torch.Generator().manual_seed(1000 + seed)
        spread = reference.std(-1, keepdim=True)
        for level in NOISE_LEVELS:
            noisy = reference + level * spread * torch.randn(reference.shape, generator=noise)
            rows[f"noise {level:g}"] = (agreement(noisy, wanted),
                                        relative_error(noisy, reference), 0.0)
        for spec in modes:
            start = time.perf_counter()
            quantized = quantized_copy(model, spec)
            seconds = time.perf_counter() - start
            logits = quantized(ids)
            rows[spec] = (agreement(logits, wanted), relative_error(logits, reference), seconds)
    return rows


def agreement(logits: torch.Tensor, wanted: torch.Tensor) -> float:
    """Share of positions whose argmax of ``logits`` is ``wanted``."""
    return (logits.argmax(-1) == wanted).double().mean().item()


def compiled_agreement(quantized: torch.nn.Module, ids: torch.Tensor) -> tuple[float, float]:
    """``(argmax agreement, relative logit error)`` of ``quantized`` under
    ``torch.compile(backend="openhlo")`` against its eager, dequantizing reference on ``ids``."""
    from frameworks.torch import openhlo_backend
    with torch.no_grad():
        eager = quantized(ids)
        compiled = torch.compile(quantized, backend=openhlo_backend)(ids)
    return agreement(compiled, eager.argmax(-1)), relative_error(compiled, eager)


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
    parser.add_argument("--trained", action="store_true",
                        help="byte-level models trained on the standard library's source "
                             "(tools/trained_decoder.py), measured on held-out files")
    parser.add_argument("--steps", type=int, default=TrainingSettings.steps,
                        help="training steps (--trained)")
    parser.add_argument("--retrain", action="store_true",
                        help="train again instead of loading the cached model (--trained)")
    parser.add_argument("--compiled-modes", default="weight-int8,weight-int4",
                        help="modes also run under torch.compile on 2 x 32 positions "
                             "(--trained; empty: none)")
    args = parser.parse_args(argv)
    seeds = [int(seed) for seed in args.seeds.split(",")]
    modes = args.modes.split(",")
    if args.trained:
        print(f"trained byte-level models: hidden {args.hidden}, {args.layers} layers, "
              f"{args.steps} steps of {TrainingSettings.batch} x {args.length} bytes; "
              f"{args.batch}x{args.length} held-out positions per seed; "
              f"load average {os.getloadavg()[0]:.2f}")
    else:
        print(f"hidden {args.hidden}, {args.layers} layers, vocab {args.vocab}, init range "
              f"{args.init_range or 'default'}, {args.batch}x{args.length} positions per "
              f"seed; load average {os.getloadavg()[0]:.2f}")
    for kind in args.models.split(","):
        if args.trained:
            _measure_trained(kind, args, seeds, modes)
        else:
            _measure_random(kind, args, seeds, modes)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


def _measure_random(kind: str, args, seeds, modes) -> None:
    results: dict = {}
    for seed in seeds:
        torch.manual_seed(seed)
        model = build_model(kind, args.hidden, args.layers, args.vocab, args.init_range)
        ids = torch.randint(0, args.vocab, (args.batch, args.length),
                            generator=torch.Generator().manual_seed(100 + seed))
        for row, values in measure_seed(model, ids, modes, seed).items():
            results.setdefault(row, []).append(values)
    _print_rows(kind, results)


def _measure_trained(kind: str, args, seeds, modes) -> None:
    settings = TrainingSettings(kind=kind, hidden=args.hidden, layers=args.layers,
                                steps=args.steps, length=args.length)
    model, seconds = trained_decoder(settings, retrain=args.retrain)
    _, held_out = stdlib_text()
    results: dict = {}
    quality = []
    for seed in seeds:
        ids, targets = windows(held_out, args.batch, args.length,
                               torch.Generator().manual_seed(100 + seed))
        quality.append(next_byte_quality(model, ids, targets))
        for row, values in measure_seed(model, ids, modes, seed).items():
            results.setdefault(row, []).append(values)
    loss = sum(q[0] for q in quality) / len(quality)
    print(f"{kind:<8} " + (f"trained in {seconds:.0f} s; " if seconds else "cached; ")
          + f"held-out next byte: loss {loss:.3f} nats ({loss / math.log(2):.2f} bits), "
          f"accuracy {sum(q[1] for q in quality) / len(quality):.2%}")
    _print_rows(kind, results)
    for spec in filter(None, args.compiled_modes.split(",")):
        same, error = compiled_agreement(quantized_copy(model, spec), ids[:2, :32])
        print(f"{kind:<8} {spec + ' compiled':<24} argmax as eager {same:.4f}  "
              f"rel.err {error:.2e}")


def _print_rows(kind: str, results: dict) -> None:
    for row, values in results.items():
        agreements = " ".join(f"{a:.4f}" for a, _, _ in values)
        mean = sum(a for a, _, _ in values) / len(values)
        error = sorted(e for _, e, _ in values)[len(values) // 2]
        seconds = max(s for _, _, s in values)
        print(f"{kind:<8} {row:<24} {agreements}  mean {mean:.4f}  rel.err {error:.2e}"
              + (f"  quantize_ {seconds:.1f} s" if seconds else ""))


if __name__ == "__main__":
    main()
