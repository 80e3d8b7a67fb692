"""The cpu executor's cost per iteration of a loop it runs instruction by instruction.

    python -m tools.bench_loop_overhead [--bodies v1_op1,v3_op1] [--steps 10000,100000]
                                        [--budget 0.5] [--json OUT]

``tools.bench_loops`` times loops that the loop code generator compiles whole. A
``stablehlo.while`` whose body holds an op that generator does not take (here a
``stablehlo.reverse``, a data-movement op) stays in the executor
(pjrt/plugins/cpu/native/executor.cc), which then pays for every instruction of the condition
and the body on every iteration. With a body of a few tiny ops on 4 floats that payment is
nearly all of the time, so

    ns per iteration = (time of N iterations - time of 1) / (N - 1)

is the executor's own cost per iteration: the call's fixed cost (dispatch from Python, the
result's way back) cancels. The trip count is an argument of the one compiled program, so
every N runs the same executable; the calls (N = 1 and each N given) are timed in
alternating rounds (tools/bench/timing.py), and each result is checked against the same
loop in numpy first.

The bodies (issue 19 item 1): ``v<k>_op<m>`` carries a counter and k vectors of 4 floats; each
iteration the counter steps and the vectors rotate (value j takes value j+1's place), the first
one through m ops on its way to the last place: ``reverse`` alone, or ``reverse``, a multiply,
an add, a negate and a maximum (so |reverse(x) * a + b|, bounded over any number of steps).
The programs are compiled at opt_level 0, which runs no pipeline: the cpu pipeline would fuse
the elementwise ops (and the reverse with them) into one generated kernel and the loop
generator would then take the loop whole. At level 0 each op of the body is one instruction
of the executor, so the bodies hold 3 (a constant, the counter's add, the reverse) or 7
instructions and the condition 1. The report gives the executor's instruction count of the
whole program and the load average, since the figures mean little on a loaded machine.
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

import numpy as np

WIDTH = 4  # floats in each carried vector


@dataclass(frozen=True)
class Body:
    values: int   # carried float vectors besides the counter
    ops: int      # ops on the value that moves through the body: 1 or 5


BODIES = {
    "v1_op1": Body(1, 1),
    "v3_op1": Body(3, 1),
    "v10_op1": Body(10, 1),
    "v1_op5": Body(1, 5),
    "v3_op5": Body(3, 5),
}


def program_text(body: Body) -> str:
    """``@main(n, a, b, x0..x{k-1})``: the loop run n times, its carried vectors returned."""
    vec = f"tensor<{WIDTH}xf32>"
    names = [f"%v{j}" for j in range(body.values)]
    inputs = ", ".join(f"%x{j}: {vec}" for j in range(body.values))
    carried = ", ".join(f"{v} = %x{j}" for j, v in enumerate(names))
    types = ", ".join(["tensor<i32>"] + [vec] * body.values)
    ops = [f"%r = stablehlo.reverse %v0, dims = [0] : {vec}"]
    moved = "%r"
    if body.ops == 5:
        ops += [f"%m = stablehlo.multiply %r, %a : {vec}",
                f"%s = stablehlo.add %m, %b : {vec}",
                f"%t = stablehlo.negate %s : {vec}",
                f"%u = stablehlo.maximum %t, %s : {vec}"]
        moved = "%u"
    elif body.ops != 1:
        raise ValueError(f"a body has 1 or 5 ops, not {body.ops}")
    returned = ", ".join(["%j"] + names[1:] + [moved])
    outs = ", ".join([vec] * body.values)
    results = ", ".join(f"%w#{j + 1}" for j in range(body.values))
    indent = "\n      "
    return f"""func.func @main(%n: tensor<i32>, %a: {vec}, %b: {vec}, {inputs}) -> ({outs}) {{
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %w:{body.values + 1} = stablehlo.while(%i = %zero, {carried}) : {types}
    cond {{
      %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    }} do {{
      %one = stablehlo.constant dense<1> : tensor<i32>
      %j = stablehlo.add %i, %one : tensor<i32>
      {indent.join(ops)}
      stablehlo.return {returned} : {types}
    }}
  return {results} : {outs}
}}
"""


def numpy_loop(body: Body, steps: int, a, b, xs) -> list:
    """The same loop in numpy, step by step."""
    xs = list(xs)
    for _ in range(steps):
        moved = xs[0][::-1]
        if body.ops == 5:
            s = moved * a + b
            moved = np.maximum(-s, s)
        xs = xs[1:] + [moved]
    return xs


def measure(name: str, client, steps: list[int], budget: float) -> dict:
    """One body: its results against numpy at every trip count, then ns per iteration."""
    from tools.bench.timing import interleaved_medians
    body = BODIES[name]
    rng = np.random.default_rng(0)
    a = rng.uniform(-0.9, 0.9, WIDTH).astype(np.float32)
    b = rng.uniform(-1, 1, WIDTH).astype(np.float32)
    xs = [rng.standard_normal(WIDTH).astype(np.float32) for _ in range(body.values)]
    exe = client.compile(program_text(body))
    exe.wait_optimized()
    error = 0.0
    for n in [1, *steps]:
        ours = exe(np.int32(n), a, b, *xs)
        theirs = numpy_loop(body, n, a, b, xs)
        error = max(error, *(float(np.max(np.abs(o - t))) for o, t in zip(ours, theirs)))
    calls = {n: (lambda n=n: exe(np.int32(n), a, b, *xs)) for n in [1, *steps]}
    times = interleaved_medians(calls, budget)
    one = times[1]["median_s"]
    per_step = {str(n): (times[n]["median_s"] - one) / (n - 1) * 1e9 for n in steps}
    return {"body": name, "values": body.values, "ops": body.ops,
            "interpreted": not exe.program.compiled,
            "instructions": exe.program.num_instructions,
            "max_abs_diff": error, "ns_per_iteration": per_step,
            "one_iteration_us": one * 1e6}


def report(rows: list[dict], load: tuple) -> str:
    steps = list(rows[0]["ns_per_iteration"]) if rows else []
    lines = [f"{'body':<8} {'instrs':>6}  interpreted  " +
             " ".join(f"{'ns/it N=' + n:>14}" for n in steps) + "  max |diff|"]
    for r in rows:
        lines.append(f"{r['body']:<8} {r['instructions']:>6}  "
                     f"{'yes' if r['interpreted'] else 'no':<11}  " +
                     " ".join(f"{r['ns_per_iteration'][n]:>14.1f}" for n in steps) +
                     f"  {r['max_abs_diff']:.2e}")
    lines.append(f"load average before / after: {load[0]:.2f} / {load[1]:.2f} "
                 f"on {os.cpu_count()} cores")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bodies", default=",".join(BODIES),
                        help=f"comma-separated, of {', '.join(BODIES)}")
    parser.add_argument("--steps", default="10000,100000",
                        help="comma-separated trip counts N > 1, each timed against N = 1")
    parser.add_argument("--budget", type=float, default=0.5,
                        help="seconds of timing per body and trip count")
    parser.add_argument("--json", help="write the rows and the load here")
    args = parser.parse_args(argv)
    names = [n for n in args.bodies.split(",") if n]
    unknown = sorted(set(names) - set(BODIES))
    if unknown:
        parser.error(f"unknown bodies {unknown}; known: {sorted(BODIES)}")
    try:
        steps = [int(n) for n in args.steps.split(",") if n]
    except ValueError:
        parser.error(f"--steps takes integers, got {args.steps!r}")
    if not steps or min(steps) < 2:
        parser.error(f"--steps takes trip counts of at least 2, got {args.steps!r}")
    import pjrt
    client = pjrt.make_client("cpu", opt_level=0)
    from tools.bench.timing import rows_under_load, write_rows_json
    rows, load = rows_under_load(lambda name: measure(name, client, steps, args.budget), names)
    print(report(rows, load))
    write_rows_json(args.json, rows, load)
    return 0


if __name__ == "__main__":
    sys.exit(main())
