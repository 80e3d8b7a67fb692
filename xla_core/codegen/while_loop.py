"""The loop-of-elementwise template: a whole ``stablehlo.while`` of elementwise math as one
kernel.

A ``stablehlo.while`` whose condition and body are made only of elementwise ops the
renderer handles (scalar.py), constants and scalar broadcasts (static shapes) becomes one
generated function: the loop runs in compiled code with its temporaries allocated once, so a
loop of 1000 tiny iterations costs what the arithmetic costs, not 1000 trips through the
backend's executor. Every op is computed by the same scalar-op protocol as the fusion
kernels, so a loop gives the bits its ops give op by op. Anything else in the loop keeps it in
the executor (``loop_source`` returns None and logs why).
"""
from __future__ import annotations

import logging

import numpy as np

from stablehlo.ir.core import Operation
from stablehlo.ir.ops.base import ELEMENTWISE

from xla_core.codegen.target import SYMBOL, KernelTarget
from xla_core.codegen.scalar import NotGeneratable

LOG = logging.getLogger("openhlo.codegen")


def _size(type) -> int:
    return int(np.prod(type.shape, dtype=np.int64))


class _Emitter:
    """Text for the ops of one loop: every value is a named array of its tensor's size."""

    def __init__(self, module, target: KernelTarget):
        self.module = module
        self.renderer = target.renderer
        self.names: dict = {}
        self.decls: list[str] = []
        self.buffers: list[str] = []  # names of the temporaries (freed at the end)
        self.math: set = set()        # math library functions used
        self.count = 0

    def value(self, v) -> str:
        return self.names[v]

    def define(self, v) -> str:
        name = f"v{self.count}"
        self.count += 1
        self.names[v] = name
        self.buffers.append(name)
        # allocated once per kernel call (not per iteration), freed at its single exit
        self.decls.append("  " + self.renderer.alloc(name, self.renderer.ctype(v.type),
                                                     max(_size(v.type), 1)))
        return name

    def ops(self, block, env_lines: list[str]) -> list:
        """Emits ``block``'s ops; returns the values its terminator returns."""
        for op in block.operations:
            if op.name in ("stablehlo.return", "func.return"):
                return list(op.operands)
            if op.name in ("func.call", "stablehlo.composite"):
                # A call, or a fusion (any composite): its body, inline in the loop.
                target = op.attributes["callee" if op.name == "func.call" else "decomposition"]
                callee = self.module.lookup(target.name)
                for arg, v in zip(callee.body.arguments, op.operands):
                    self.names[arg] = self.names[v]
                returned = self.ops(callee.body, env_lines)
                for r, v in zip(op.results, returned):
                    self.names[r] = self.names[v]
                continue
            env_lines.append(self.op(op))
        raise NotGeneratable("block without terminator")

    def op(self, op: Operation) -> str:
        if op.regions:
            raise NotGeneratable(f"nested region in {op.name}")
        r = self.renderer
        result = op.results[0]
        ctype = r.ctype(result.type)
        n = _size(result.type)
        out = self.define(result)
        ins = [self.value(v) for v in op.operands]
        elem = r.elem(result.type)
        loop = f"  for (int64_t i = 0; i < {n}; ++i) {out}[i] = "
        if op.name == "stablehlo.constant":
            array = op.attributes["value"].array
            flat = np.asarray(array).reshape(-1)
            if flat.size and np.all(flat == flat[0]) or flat.size == 1:
                return loop + r.literal(flat[0], elem) + ";"
            items = ", ".join(r.literal(x, elem) for x in flat)
            return (f"  {{ static const {ctype} data[{n}] = {{{items}}}; "
                    f"for (int64_t i = 0; i < {n}; ++i) {out}[i] = data[i]; }}")
        if op.name == "stablehlo.broadcast_in_dim":
            src = op.operands[0].type
            if _size(src) == 1:
                return loop + f"{ins[0]}[0];"
            if list(src.shape) == list(result.type.shape):
                return loop + f"{ins[0]}[i];"
            raise NotGeneratable("broadcast_in_dim of a non-scalar")
        if op.opdef is None or not op.opdef.has(ELEMENTWISE):
            raise NotGeneratable(f"op {op.name}")
        args = []
        for v, name in zip(op.operands, ins):
            if _size(v.type) == n:
                args.append(f"{name}[i]")
            elif op.name == "stablehlo.select" and v is op.operands[0] and _size(v.type) == 1:
                args.append(f"{name}[0]")  # a scalar predicate
            else:
                raise NotGeneratable(f"{op.name} mixes shapes")
        return loop + r.expression(op, args, self.math) + ";"


def while_source(op: Operation, module, captured: list, target: KernelTarget) -> tuple[str, set]:
    """(text of ``op`` (a stablehlo.while) as the kernel ``SYMBOL``, the math library functions
    it uses); its inputs: the loop operands, then ``captured``."""
    e = _Emitter(module, target)
    r = target.renderer
    params = []
    for k, v in enumerate(list(op.operands) + list(captured)):
        name = f"in{k}"
        e.names[v] = name
        t = r.ctype(v.type)
        params.append(f"  const {t}* {name} = (const {t}*)(ins[{k}]);")
    cond_block, body_block = op.regions[0].blocks[0], op.regions[1].blocks[0]
    carried = []
    for k, (v, carg, barg) in enumerate(zip(op.operands, cond_block.arguments,
                                            body_block.arguments)):
        name = f"c{k}"
        ctype, n = r.ctype(v.type), max(_size(v.type), 1)
        carried.append((name, ctype, n))
        e.names[carg] = name
        e.names[barg] = name
    cond_lines, body_lines = [], []
    (pred,) = e.ops(cond_block, cond_lines)
    returned = e.ops(body_block, body_lines)
    lines = [target.loop_kernel(SYMBOL)]
    lines += params
    for k, (name, ctype, n) in enumerate(carried):
        lines.append(f"  {r.alloc(name, ctype, n)} {r.copy(name, f'in{k}', ctype, n)}")
    lines += e.decls
    lines.append("  for (;;) {")
    lines += ["  " + line for line in cond_lines]
    lines.append(f"    if (!{e.value(pred)}[0]) break;")
    lines += ["  " + line for line in body_lines]
    # All new values are computed before any carried value is overwritten.
    for (name, ctype, n), v in zip(carried, returned):
        src = e.value(v)
        if src != name:
            lines.append(f"    {r.copy(name, src, ctype, n, overlap=True)}")
    lines.append("  }")
    for k, (name, ctype, n) in enumerate(carried):
        lines.append(f"  {r.copy(f'outs[{k}]', name, ctype, n)}")
    for name in [name for name, _, _ in carried] + e.buffers:
        lines.append(f"  {r.free(name)}")
    lines.append("}")
    return "\n".join(lines) + "\n", e.math


def _check_carried_aliases(op: Operation) -> None:
    # A body result that is another loop-carried argument would be overwritten before it is
    # read by the memmove sequence; such loops stay in the executor.
    body = op.regions[1].blocks[0]
    terminator = body.operations[-1]
    for k, v in enumerate(terminator.operands):
        if v in body.arguments and body.arguments.index(v) != k:
            raise NotGeneratable("a loop result is another loop argument")


def captured_in_order(op: Operation) -> list:
    """Values ``op``'s regions read from outside it, in order of first use: the kernel takes
    them after the loop operands, in this order."""
    inside, order = set(), {}

    def walk(region):
        for block in region.blocks:
            inside.update(block.arguments)
            for inner in block.operations:
                for v in inner.operands:
                    if v not in inside:
                        order.setdefault(v, None)
                inside.update(inner.results)
                for r in inner.regions:
                    walk(r)

    for region in op.regions:
        walk(region)
    return [v for v in order if v not in inside]


def loop_source(op: Operation, module, target: KernelTarget):
    """(text of ``op`` as the kernel ``SYMBOL``, its captured values, the math library
    functions it uses), or None when the generator refuses the loop (the backend's executor
    runs it; the reason is logged)."""
    try:
        if any(len(r.blocks) != 1 for r in op.regions):
            raise NotGeneratable("multi-block region")
        _check_carried_aliases(op)
        captured = captured_in_order(op)
        source, math = while_source(op, module, captured, target)
    except NotGeneratable as exc:
        LOG.debug("%s stays in the executor: %s", op.where(), exc)
        return None
    return source, captured, math
