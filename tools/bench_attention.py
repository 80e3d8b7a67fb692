"""Fused attention on the cpu backend against PyTorch eager's CPU flash kernel and against
the materialized math, in one run: forward time and the peak memory of the attention.

    python -m tools.bench_attention [--lengths 1024,2048,4096,8192] [--causal] [--repeat 3]
                                    [--rounds 3] [--materialized-max 8192] [--json OUT]

f32, batch 1, 8 heads, head dim 64 (``--heads``, ``--dim``). Three implementations:

* ``fused``: an ``openhlo.attention`` composite (stablehlo/attention.py), run by the native
  tiled kernel (pjrt/plugins/cpu/native/kernels_attention.cc);
* ``materialized``: the same composite's decomposition called as a function, compiled by
  the same backend with ``fused_attention`` off (scores, probabilities: [heads, L, L] each);
* ``torch``: ``F.scaled_dot_product_attention`` in eager PyTorch (its CPU flash kernel), with
  as many threads as our pool has.

Each (implementation, length) runs in a child process of its own. The memory is the peak
resident set during the first call minus the resident set before it (Linux:
``/proc/self/clear_refs`` resets the peak), so it counts every byte the call touches
(results, scratch) and nothing the other implementations left behind; the times are the
best wall and CPU (every thread's) time of ``--repeat`` calls after it. The machine's load
average is printed before and after: on a shared machine wall times are only comparable
within one run, and CPU times say how much work each implementation does. The fused and
torch children alternate ``--rounds`` times and each keeps its best, so that a change of
load during the run does not fall on one of them only.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time

import numpy as np


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _measure(call, repeat: int) -> dict:
    """Peak memory of the first call (later ones would reuse what the allocators cached),
    then the best wall and CPU (all threads) time of ``repeat`` calls after it."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak resident set restarts from the current one
    before = _rss_kib("VmRSS")
    result = call()
    peak = _rss_kib("VmHWM")
    del result
    best, cpu = math.inf, math.inf
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        call()
        best = min(best, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    return {"seconds": best, "cpu_seconds": cpu, "peak_bytes": max(0, peak - before) * 1024}


def _ours(q, k, v, causal: bool, fused: bool):
    import pjrt
    from pjrt.api import CompileOptions
    from stablehlo.attention import attention
    from stablehlo.builder import Builder
    from stablehlo.ir.attributes import SymbolRefAttr
    from stablehlo.ir.core import Operation
    from stablehlo.ir.types import F32, TensorType
    b = Builder()
    types = [TensorType(x.shape, F32) for x in (q, k, v)]
    with b.function("main", types) as (func, args):
        (out,) = attention(b, *args, scale=1 / math.sqrt(q.shape[-1]), causal=causal)
        ret = b.return_(out)
    if not fused:  # the decomposition, called: the math as a program would spell it
        composite = out.owner
        call = Operation("func.call", composite.operands, composite.result_types,
                         {"callee": SymbolRefAttr(composite.attr("decomposition").name)})
        body = func.body.operations
        body[body.index(composite)] = call
        call.parent = func.body
        ret.operands = [call.results[0]]
    options = CompileOptions(env_option_overrides={"fused_attention": fused})
    exe = pjrt.make_client("cpu").compile(str(b.module), options)
    exe.wait_optimized()
    return lambda: exe(q, k, v)


def _torch(q, k, v, causal: bool):
    import torch
    import torch.nn.functional as F
    from pjrt.plugins.cpu.native_module import native
    torch.set_num_threads(native().parallel_width())
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))

    def call():
        with torch.no_grad():
            return F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)
    return call


def child(impl: str, length: int, heads: int, dim: int, causal: bool, repeat: int) -> dict:
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, heads, length, dim)).astype(np.float32)
               for _ in range(3))
    call = _torch(q, k, v, causal) if impl == "torch" else \
        _ours(q, k, v, causal, fused=impl == "fused")
    return _measure(call, repeat)


def _run_child(impl, length, args) -> dict | None:
    cmd = [sys.executable, "-m", "tools.bench_attention", "--child", impl, str(length),
           "--heads", str(args.heads), "--dim", str(args.dim), "--repeat", str(args.repeat)]
    cmd += ["--causal"] if args.causal else []
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"  {impl} L={length} failed:\n{done.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def _best(results: list) -> dict | None:
    """The best times of several children of one implementation (None if any failed)."""
    if not results or None in results:
        return None
    return {"seconds": min(r["seconds"] for r in results),
            "cpu_seconds": min(r["cpu_seconds"] for r in results),
            "peak_bytes": max(r["peak_bytes"] for r in results)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_attention")
    parser.add_argument("--lengths", default="1024,2048,4096,8192")
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3,
                        help="fused and torch children, alternated this many times (best kept)")
    parser.add_argument("--materialized-max", type=int, default=8192,
                        help="longest sequence the materialized version runs at")
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--child", nargs=2, metavar=("IMPL", "LENGTH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        impl, length = args.child
        print(json.dumps(child(impl, int(length), args.heads, args.dim, args.causal,
                               args.repeat)))
        return 0
    print(f"load average before: {os.getloadavg()}; f32, batch 1, {args.heads} heads, "
          f"head dim {args.dim}, {'causal' if args.causal else 'not causal'}")
    print(f"{'L':>6} {'fused ms':>9} {'torch ms':>9} {'mater. ms':>10} {'fused/torch':>11} "
          f"{'cpu f/t':>8} {'fused MiB':>10} {'torch MiB':>10} {'mater. MiB':>11} "
          f"{'fused/mater.':>12}")
    rows = []
    for length in (int(x) for x in args.lengths.split(",")):
        row = {"length": length}
        runs = {"fused": [], "torch": []}
        for _ in range(args.rounds):  # alternated: a change of load hits both alike
            for impl, results in runs.items():
                results.append(_run_child(impl, length, args))
        row.update({impl: _best(results) for impl, results in runs.items()})
        if length <= args.materialized_max:
            row["materialized"] = _run_child("materialized", length, args)
        rows.append(row)
        print(_line(row))
    print(f"load average after: {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "load": os.getloadavg(), "causal": args.causal}, f,
                      indent=1)
    return 0


def _line(row: dict) -> str:
    def ms(r):
        return f"{r['seconds'] * 1e3:.1f}" if r else "-"

    def mib(r):
        return f"{r['peak_bytes'] / 2**20:.1f}" if r else "-"

    def ratio(a, b, key):
        return f"{a[key] / b[key]:.3f}" if a and b and b[key] else "-"
    fused, torch, mat = row.get("fused"), row.get("torch"), row.get("materialized")
    return (f"{row['length']:>6} {ms(fused):>9} {ms(torch):>9} {ms(mat):>10} "
            f"{ratio(fused, torch, 'seconds'):>11} {ratio(fused, torch, 'cpu_seconds'):>8} "
            f"{mib(fused):>10} {mib(torch):>10} {mib(mat):>11} "
            f"{ratio(fused, mat, 'peak_bytes'):>12}")


if __name__ == "__main__":
    sys.exit(main())
