"""Hugging Face ``generate()`` (greedy, static KV cache) on openhlo, TorchInductor and eager
PyTorch in one run, and the serving API's continuous batching against one-at-a-time decoding.

    python -m tools.bench_generate                        # gpt2, llama, qwen2; 64 new tokens
    python -m tools.bench_generate --models llama --new-tokens 32 --json out.json
    python -m tools.bench_generate --serving              # also: 8 requests, paged KV cache

For each model (frameworks.torch.models.causal_lm: d=64, 2 layers, random weights; qwen2 is
held out: nothing was tuned on it), the decode step is compiled by generate's own
auto-compile (frameworks/torch/generation.py) with each backend; rows give the tokens/s of
a warm ``generate`` call (prefill included: it is eager for every backend), whether its
tokens equal eager PyTorch's, and how many graphs were compiled for the whole call: Dynamo's
graphs (any backend) and, for openhlo, pjrt's compiles and recompilations. Eager rows: the
same static cache uncompiled, and transformers' default dynamic cache. Backends are timed
in alternation (``--repeats`` rounds), the median is reported; the load average is printed
(the dev machine is shared).

``--serving``: the serving API (frameworks/torch/serving.py) on 8 requests of mixed lengths,
continuous batching (8 rows) against one request at a time (1 row), both compiled by openhlo
and warm: throughput, per-token latency (median and max), time to first token (median),
and whether each request got the same tokens both ways.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from pjrt.plugins.cpu import tiering

BACKENDS = ("openhlo", "inductor", "eager_static", "eager_dynamic")
PROMPT = 8


def _run(model, ids, new_tokens: int, backend: str) -> torch.Tensor:
    from frameworks.torch.generation import generate_static
    if backend == "eager_dynamic":
        with torch.no_grad():
            return model.generate(ids, do_sample=False, max_new_tokens=new_tokens,
                                  eos_token_id=None, pad_token_id=0, disable_compile=True)
    return generate_static(model, ids, new_tokens,
                           backend=None if backend == "eager_static" else backend)


def _graphs() -> int:
    return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])


def measure(name: str, new_tokens: int, repeats: int) -> list:
    """One row per backend. Dynamo keeps compiled code per backend, so after each backend's
    first call the timed rounds alternate between them without compiling again (checked:
    ``graphs_while_timed``)."""
    import pjrt
    from frameworks.torch.models import causal_lm
    model = causal_lm(name, max_positions=PROMPT + new_tokens + 8)
    ids = torch.randint(1, model.config.vocab_size, (1, PROMPT),
                        generator=torch.Generator().manual_seed(1))
    reference = _run(model, ids, new_tokens, "eager_static")
    torch._dynamo.reset()
    rows = {}
    for backend in BACKENDS:
        pjrt.reset_metrics()
        graphs = _graphs()
        start = time.perf_counter()
        first = _run(model, ids, new_tokens, backend)
        first_s = time.perf_counter() - start
        if backend == "openhlo":
            tiering.wait_all()
        metrics = pjrt.metrics()
        ours = backend == "openhlo"
        rows[backend] = {
            "model": name, "backend": backend, "first_call_s": first_s,
            "tokens_equal_eager": bool(torch.equal(first, reference)),
            "dynamo_graphs": _graphs() - graphs,
            "openhlo_compiles": metrics.compiles if ours else None,
            "openhlo_recompilations": sum(metrics.recompilations.values()) if ours else None,
            "times": []}
    graphs = _graphs()
    pjrt.reset_metrics()
    for _ in range(repeats):
        for backend in BACKENDS:
            start = time.perf_counter()
            _run(model, ids, new_tokens, backend)
            rows[backend]["times"].append(time.perf_counter() - start)
    graphs_while_timed = _graphs() - graphs + pjrt.metrics().compiles
    out = []
    for row in rows.values():
        seconds = statistics.median(row.pop("times"))
        row.update(seconds=seconds, tokens_per_s=new_tokens / seconds,
                   graphs_while_timed=graphs_while_timed)
        out.append(row)
    return out


def _serve(model, requests: list, max_batch: int) -> dict:
    """The requests through a ServingEngine of ``max_batch`` rows, after one warm-up request
    (the step's compile is not timed); its stats and the tokens by request."""
    from frameworks.torch.serving import ServingEngine
    engine = ServingEngine(model, max_batch=max_batch)
    engine.add_request(requests[0][0], 2)
    engine.run()
    tiering.wait_all()
    engine.reset_stats()
    ids = [engine.add_request(prompt, new) for prompt, new in requests]
    engine.run()
    return {**engine.stats(), "tokens_by_request": [engine.tokens(i) for i in ids]}


def measure_serving(name: str, count: int = 8) -> list:
    """``count`` requests of mixed prompt (4..40) and output (16..64) lengths: continuous
    batching (``count`` rows) against one at a time (1 row: each request decoded alone)."""
    from frameworks.torch.models import causal_lm
    model = causal_lm(name)
    g = torch.Generator().manual_seed(2)
    requests = [(torch.randint(1, model.config.vocab_size, (int(p),), generator=g).tolist(),
                 int(n)) for p, n in zip(torch.randint(4, 41, (count,), generator=g),
                                         torch.randint(16, 65, (count,), generator=g))]
    torch._dynamo.reset()
    batched = _serve(model, requests, count)
    alone = _serve(model, requests, 1)
    same = batched.pop("tokens_by_request") == alone.pop("tokens_by_request")
    return [{"model": name, "mode": f"continuous batching ({count} rows)", **batched,
             "same_tokens_as_alone": same},
            {"model": name, "mode": "one at a time", **alone, "same_tokens_as_alone": True}]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_generate",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="gpt2,llama,qwen2")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--serving", action="store_true",
                        help="also the serving API: 8 requests, batched vs one at a time")
    parser.add_argument("--serving-model", default="llama")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cpus, torch "
          f"{torch.__version__}, {args.new_tokens} new tokens after a {PROMPT}-token prompt")
    models = [name for name in args.models.split(",") if name]  # --models "": serving only
    if models:
        print(f"{'model':<9}{'backend':<15}{'tokens/s':>10}{'first call s':>14}"
              f"{'same tokens':>13}{'dynamo graphs':>15}{'compiles':>10}{'recompiles':>12}")
    rows = []
    for name in models:
        for row in measure(name, args.new_tokens, args.repeats):
            rows.append(row)
            dash = lambda v: "-" if v is None else str(v)  # noqa: E731
            print(f"{row['model']:<9}{row['backend']:<15}{row['tokens_per_s']:>10.1f}"
                  f"{row['first_call_s']:>14.2f}{str(row['tokens_equal_eager']):>13}"
                  f"{row['dynamo_graphs']:>15}{dash(row['openhlo_compiles']):>10}"
                  f"{dash(row['openhlo_recompilations']):>12}")
        speed = {r["backend"]: r["tokens_per_s"] for r in rows if r["model"] == name}
        print(f"  {name}: openhlo {speed['openhlo'] / speed['inductor']:.2f}x Inductor's "
              f"tokens/s, {speed['openhlo'] / speed['eager_static']:.2f}x eager's; graphs "
              f"compiled while timing: {rows[-1]['graphs_while_timed']}")
    if args.serving:
        print(f"{'serving':<30}{'tokens/s':>10}{'token latency ms':>18}{'max ms':>9}"
              f"{'first token ms':>16}{'steps':>7}{'same tokens':>13}")
        serving = measure_serving(args.serving_model)
        for row in serving:
            print(f"{row['mode']:<30}{row['tokens_per_s']:>10.1f}"
                  f"{row['per_token_latency_ms']:>18.2f}{row['max_token_latency_ms']:>9.1f}"
                  f"{row['time_to_first_token_ms']:>16.1f}{row['steps']:>7}"
                  f"{str(row['same_tokens_as_alone']):>13}")
        ratio = serving[0]["tokens_per_s"] / serving[1]["tokens_per_s"]
        print(f"  continuous batching: {ratio:.2f}x the throughput of one at a time")
        rows += serving
    print(f"load average {os.getloadavg()[0]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
