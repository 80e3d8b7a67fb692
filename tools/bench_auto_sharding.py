"""Auto-sharding solve times and plans on a large training step.

``python -m tools.bench_auto_sharding [--layers N] [--mesh x=4,y=2] [--runs 5]
[--memory-limit 2MiB] [--hardware generic-cpu] [--time-limit S]``

The program is an SGD step of a stack of ``N`` tanh layers written as StableHLO text
(forward, loss, backward, update: about 10 ops per layer, so the default 200 layers give a
~2,000-op step). For each run it reports the wall time of ``auto_shard`` (cost graph, solve,
plan) and the solver's own time and status, and checks that every run gives the same plan;
then the plan's objective breakdown and how many weights each layout got. Exit status 1 when
the plans differ or a plan is not the solver's optimum (a time limit ran out).
"""
from __future__ import annotations

import argparse
import collections
import sys
import time


def training_step(layers: int, batch: int = 32, width: int = 256) -> str:
    """The SGD step of ``layers`` tanh layers of ``width`` on a ``batch`` as MLIR text."""
    act = f"tensor<{batch}x{width}xf32>"
    weight = f"tensor<{width}x{width}xf32>"
    args = [f"%x: {act}"] + [f"%w{i}: {weight}" for i in range(layers)]
    lines = [f"func.func public @main({', '.join(args)}) -> (tensor<f32>, "
             f"{', '.join([weight] * layers)}) {{",
             "  %one = stablehlo.constant dense<1.0> : tensor<f32>",
             f"  %ones = stablehlo.broadcast_in_dim %one, dims = [] : (tensor<f32>) -> {act}",
             "  %lr = stablehlo.constant dense<0.01> : tensor<f32>",
             f"  %lrs = stablehlo.broadcast_in_dim %lr, dims = [] : (tensor<f32>) -> {weight}",
             "  %zero = stablehlo.constant dense<0.0> : tensor<f32>",
             "  %h0 = stablehlo.negate %x : " + act]
    for i in range(layers):
        lines += [f"  %z{i} = stablehlo.dot_general %h{i}, %w{i}, contracting_dims = [1] x [0]"
                  f" : ({act}, {weight}) -> {act}",
                  f"  %h{i + 1} = stablehlo.tanh %z{i} : {act}"]
    top = f"%h{layers}"
    lines += [f"  %sq = stablehlo.multiply {top}, {top} : {act}",
              f"  %loss = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across "
              f"dimensions = [0, 1] : ({act}, tensor<f32>) -> tensor<f32>",
              f"  %g{layers} = stablehlo.add {top}, {top} : {act}"]
    for i in reversed(range(layers)):
        lines += [f"  %s{i} = stablehlo.multiply %h{i + 1}, %h{i + 1} : {act}",
                  f"  %t{i} = stablehlo.subtract %ones, %s{i} : {act}",
                  f"  %d{i} = stablehlo.multiply %g{i + 1}, %t{i} : {act}",
                  f"  %dw{i} = stablehlo.dot_general %h{i}, %d{i}, contracting_dims = [0] x [0]"
                  f" : ({act}, {act}) -> {weight}",
                  f"  %g{i} = stablehlo.dot_general %d{i}, %w{i}, contracting_dims = [1] x [1]"
                  f" : ({act}, {weight}) -> {act}",
                  f"  %u{i} = stablehlo.multiply %lrs, %dw{i} : {weight}",
                  f"  %n{i} = stablehlo.subtract %w{i}, %u{i} : {weight}"]
    results = ", ".join(["%loss"] + [f"%n{i}" for i in range(layers)])
    lines += [f"  return {results} : tensor<f32>, {', '.join([weight] * layers)}", "}"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=200)
    p.add_argument("--mesh", default="x=4,y=2")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--memory-limit", default=None)
    p.add_argument("--hardware", default="generic-cpu")
    p.add_argument("--time-limit", type=float, default=10.0)
    args = p.parse_args(argv)
    import stablehlo
    from xla_core.spmd.auto_sharding import auto_shard
    text = training_step(args.layers)
    ops = len(stablehlo.parse(text).lookup("main").body.operations)
    print(f"program: {args.layers} layers, {ops} ops; mesh {args.mesh}; hardware "
          f"{args.hardware}; memory limit {args.memory_limit or 'none'}")
    plans = []
    for run in range(args.runs):
        module = stablehlo.parse(text)
        start = time.perf_counter()
        plan = auto_shard(module, args.mesh, memory_limit=args.memory_limit,
                          hardware=args.hardware, time_limit_s=args.time_limit)
        wall = time.perf_counter() - start
        s = plan.solution
        how = ", by the LP relaxation" if s.integral_relaxation else ""
        print(f"run {run}: {wall:.2f} s in all, solver {s.seconds:.2f} s ({s.status}{how}; "
              f"{s.variables} variables, {s.constraints} constraints)")
        plans.append(plan)
    first = plans[0]
    same = all(p.arguments == first.arguments and p.layouts() == first.layouts()
               for p in plans[1:])
    weights = collections.Counter(str(dims) for dims in first.arguments[1:])
    print(f"plans identical across runs: {same}")
    print(f"objective {first.step_seconds * 1e3:.3f} ms = compute "
          f"{first.compute_s * 1e3:.3f} + communication {first.communication_s * 1e3:.3f} + "
          f"resharding {first.resharding_s * 1e3:.3f}; peak memory per device "
          f"{first.peak_memory_bytes / 2**20:.2f} MiB")
    print(f"input layout {first.arguments[0]}; weight layouts: "
          + ", ".join(f"{k} x{n}" for k, n in sorted(weights.items())))
    return 0 if same and all(p.solution.status == "optimal" for p in plans) else 1


if __name__ == "__main__":
    sys.exit(main())
