"""Forward speed and compile time of torch.compile(backend="openhlo") against TorchInductor,
side by side in one process: the tiny Hugging Face GPT-2 of ``frameworks.torch.models``
(d=64, 2 layers, B=2, S=16) and the benchmark suite's ``gpt_block_fwd`` (PyTorch version,
tools/bench/workloads.py; GPT-2 block d=768 h=12 seq=256 batch=2).

    python -m tools.torch_speed                     # both models, both backends
    python -m tools.torch_speed --models gpt_block_fwd --repeats 50 --json out.json

Compile time is the first call after ``torch._dynamo.reset()`` (Dynamo tracing, AOTAutograd
and the backend's compile, plus one run), cold for both: Inductor's on-disk caches are
disabled and OpenHLO's cpu caches (programs and generated kernels) go to a fresh temporary
``OPENHLO_CACHE_DIR``; each backend first compiles a trivial function so one-time imports
are not charged to the model. The cpu backend compiles in tiers (the first call runs op by
op while the generated kernels build in the background, pjrt/plugins/cpu/tiering.py), so
OpenHLO has two figures: ``compile_s`` (first call) and ``optimized_s`` (until the
background compiles are done and the optimized program is in place); timing starts after
the latter. Run time is the median of ``--repeats`` calls after
``--warmup`` calls, under ``torch.no_grad()``, the two backends called in alternation. Ratios are openhlo / inductor (below 1:
openhlo is faster). Results are checked against eager (rtol 1e-4) before timing.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
if "OPENHLO_CACHE_DIR" not in os.environ:
    import tempfile
    os.environ["OPENHLO_CACHE_DIR"] = tempfile.mkdtemp(prefix="openhlo_speed_")

import numpy as np
import torch

from pjrt.plugins.cpu import tiering

MODELS = ("tiny_gpt2", "gpt_block_fwd")
BACKENDS = ("openhlo", "inductor")


def _model(name: str):
    """(callable, example inputs)."""
    if name == "tiny_gpt2":
        from frameworks.torch.models import build
        model, inputs = build("gpt2")
        return model, inputs
    from tools.bench.workloads import WORKLOADS
    workload = WORKLOADS[name]
    instance = workload.build(np.random.default_rng(0), **workload.sizes)
    return instance.torch_fn, tuple(torch.from_numpy(np.asarray(a)) for a in instance.inputs)


def _backend(name: str):
    if name == "openhlo":
        from frameworks.torch.backend import openhlo_backend
        return openhlo_backend
    return "inductor"


def _warm_up(backend) -> None:
    torch._dynamo.reset()
    torch.compile(lambda x: (torch.sin(x) * 2,), backend=backend)(torch.zeros(7))
    if backend != "inductor":
        tiering.wait_all()


def _compile(fn, inputs, backend_name: str) -> tuple:
    """(compiled fn, first-call seconds, seconds until optimized, first outputs)."""
    compiled = torch.compile(fn, backend=_backend(backend_name))
    start = time.perf_counter()
    got = compiled(*inputs)
    compile_s = time.perf_counter() - start
    if backend_name == "openhlo":
        tiering.wait_all()
    return compiled, compile_s, time.perf_counter() - start, got


def measure(model_name: str, repeats: int, warmup: int) -> list:
    """Both backends on one model: compiled one after the other (cold), then timed in
    alternation (call ours, call Inductor, ...) so load on the machine hits both alike."""
    fn, inputs = _model(model_name)
    for backend_name in BACKENDS:
        _warm_up(_backend(backend_name))
    torch._dynamo.reset()  # Dynamo keeps one cache entry per backend: no reset in between
    rows, compiled = [], {}
    with torch.no_grad():
        expected = fn(*inputs)
        for backend_name in BACKENDS:
            compiled[backend_name], compile_s, optimized_s, got = _compile(fn, inputs,
                                                                           backend_name)
            torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
            rows.append({"model": model_name, "backend": backend_name,
                         "compile_s": compile_s, "optimized_s": optimized_s})
        times = {b: [] for b in BACKENDS}
        for i in range(warmup + repeats):
            for backend_name in BACKENDS:
                start = time.perf_counter()
                compiled[backend_name](*inputs)
                if i >= warmup:
                    times[backend_name].append(time.perf_counter() - start)
    for row in rows:
        t = times[row["backend"]]
        row.update(run_ms=1e3 * statistics.median(t), run_ms_min=1e3 * min(t))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    import warnings
    warnings.filterwarnings("ignore", message="dynamo_pgo force disabled")
    rows = []
    print(f"{'model':<15}{'backend':<10}{'compile s':>10}{'optimized s':>12}"
          f"{'run ms (median)':>17}{'min':>9}")
    for model_name in args.models:
        for r in measure(model_name, args.repeats, args.warmup):
            rows.append(r)
            print(f"{model_name:<15}{r['backend']:<10}{r['compile_s']:>10.2f}"
                  f"{r['optimized_s']:>12.2f}"
                  f"{r['run_ms']:>17.3f}{r['run_ms_min']:>9.3f}", flush=True)
    ratios = []
    for model_name in args.models:
        ours, ind = (next(r for r in rows if r["model"] == model_name and r["backend"] == b)
                     for b in BACKENDS)
        ratios.append({"model": model_name, "run_ratio": ours["run_ms"] / ind["run_ms"],
                       "compile_ratio": ours["compile_s"] / ind["compile_s"],
                       "optimized_compile_ratio": ours["optimized_s"] / ind["compile_s"]})
        print(f"{model_name}: run openhlo/inductor = {ratios[-1]['run_ratio']:.2f}x "
              f"(target <= 1.2), compile openhlo/inductor = {ratios[-1]['compile_ratio']:.2f}x "
              f"first call, {ratios[-1]['optimized_compile_ratio']:.2f}x until optimized "
              f"(target <= 1.0)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": rows, "ratios": ratios, "threads": torch.get_num_threads()},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
