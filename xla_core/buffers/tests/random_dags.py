"""Random small programs (elementwise and dot ops over f32 matrices) for property tests."""
from __future__ import annotations

import random

import numpy as np

DIMS = (4, 8, 16, 32)


def random_program(seed: int, num_ops: int = 12) -> str:
    """A ``@main`` of ``num_ops`` random ops; returns one or two of its values."""
    rnd = random.Random(seed)
    shapes = [(rnd.choice(DIMS), rnd.choice(DIMS)) for _ in range(2)]
    values = [(f"%arg{i}", s) for i, s in enumerate(shapes)]
    params = ", ".join(f"{n}: {_t(s)}" for n, s in values)
    lines = []
    for k in range(num_ops):
        name = f"%v{k}"
        a_name, a = rnd.choice(values)
        same = [v for v in values if v[1] == a]
        dots = [v for v in values if v[1][0] == a[1]]
        kind = rnd.random()
        if kind < 0.3 and dots:
            b_name, b = rnd.choice(dots)
            shape = (a[0], b[1])
            lines.append(f"{name} = stablehlo.dot_general {a_name}, {b_name}, "
                         f"contracting_dims = [1] x [0] : ({_t(a)}, {_t(b)}) -> {_t(shape)}")
        elif kind < 0.6:
            b_name, _ = rnd.choice(same)
            op = rnd.choice(("add", "multiply", "subtract", "maximum"))
            shape = a
            lines.append(f"{name} = stablehlo.{op} {a_name}, {b_name} : {_t(a)}")
        elif kind < 0.8:
            op = rnd.choice(("tanh", "negate", "exponential"))
            shape = a
            lines.append(f"{name} = stablehlo.{op} {a_name} : {_t(a)}")
        else:
            shape = (a[1], a[0])
            lines.append(f"{name} = stablehlo.transpose {a_name}, dims = [1, 0] : "
                         f"({_t(a)}) -> {_t(shape)}")
        values.append((name, shape))
    outs = rnd.sample(values[len(shapes):], k=min(2, num_ops))
    results = ", ".join(_t(s) for _, s in outs)
    body = "\n  ".join(lines)
    return (f"func.func public @main({params}) -> ({results}) {{\n  {body}\n"
            f"  return {', '.join(n for n, _ in outs)} : {results}\n}}\n")


def _t(shape) -> str:
    return f"tensor<{shape[0]}x{shape[1]}xf32>"


def random_topological_order(ops, seed: int) -> list[int]:
    """A random order of ``ops`` (one block, terminator last) in which operands come first."""
    rnd = random.Random(seed)
    defined_by = {r: i for i, op in enumerate(ops) for r in op.results}
    deps = [{defined_by[v] for v in op.operands if v in defined_by} for op in ops]
    placed: set[int] = set()
    order = []
    body = list(range(len(ops) - 1))
    while body:
        ready = [i for i in body if deps[i] <= placed]
        pick = rnd.choice(ready)
        body.remove(pick)
        placed.add(pick)
        order.append(pick)
    return order + [len(ops) - 1]


def brute_force_peak(ops, order) -> tuple[int, dict]:
    """Bytes live at each position: every op result from its op's position to its last reader's."""
    position = {id(ops[i]): k for k, i in enumerate(order)}
    live = {}
    for op in ops:
        for r in op.results:
            start = position[id(op)]
            readers = [position[id(o)] for o in ops if any(v is r for v in o.operands)]
            live[r] = (start, max(readers, default=start))
    peak = 0
    for k in range(len(ops)):
        now = sum(4 * int(np.prod(r.type.shape)) for r, (s, e) in live.items() if s <= k <= e)
        peak = max(peak, now)
    return peak, live
