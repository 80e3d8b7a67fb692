"""The loop template: one loop nest over the result shape of a loop fusion.

The outer dimensions (and blocks of a long innermost dimension) are the part's range, so
the target splits them across its threads; the innermost dimension is the inner loop.
"""
from __future__ import annotations

from xla_core.codegen.kernel import Kernel, loop_vars, size
from xla_core.codegen.scalar import NotGeneratable


def loop_kernel(k: Kernel) -> str:
    shape = list(k.results[0].type.shape)
    for r in k.results:
        if size(r.type.shape) != size(shape):
            raise NotGeneratable("loop fusion results of different sizes")
    for op in k.ops:
        if op.name in ("stablehlo.reduce", "stablehlo.dot_general"):
            raise NotGeneratable(f"{op.name} in a loop fusion")
    body = k.body
    if not shape:
        stores = [k.store(i, r, (), []) for i, r in enumerate(k.results)]
        return k.source(body.lines + stores, 1, 1)
    last = shape[-1]
    outer = shape[:-1]
    t = k.target
    blocks = -(-last // t.block) if last >= 2 * t.block else 1
    width = -(-last // blocks)
    part = ["for (int64_t r = b; r < e; ++r) {"]
    saved = body.open()
    o = body.index_var(f"r / {blocks}") if blocks > 1 else "r"
    outer_idx = loop_vars(body, outer, o)
    lo = f"(r % {blocks}) * {width}" if blocks > 1 else "0"
    hi = f"({lo} + {width} < {last} ? {lo} + {width} : {last})" if blocks > 1 else str(last)
    head = body.lines
    body.lines = []
    idx = outer_idx + ("i",)
    stores = [k.store(i, r, idx, shape) for i, r in enumerate(k.results)]
    inner = body.lines + stores
    body.lines = head
    lines = body.close(saved)
    part += ["  " + x for x in lines]
    part.append(f"  for (int64_t i = {lo}; i < {hi}; ++i) {{")
    part += ["    " + x for x in inner]
    part += ["  }", "}"]
    tasks = size(outer) * blocks
    return k.source(part, tasks, t.task // max(1, width))
