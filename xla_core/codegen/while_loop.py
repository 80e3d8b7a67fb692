"""The while template: a whole ``stablehlo.while`` as one kernel with the loop inside.

A loop whose condition and body (after fusion) are made of fusions, lone dot_generals,
contiguous dynamic_slices and dynamic_update_slices, reshapes, constants, scalar broadcasts
and elementwise ops the renderer handles (the trip counter's compare and add) becomes one
generated function: the condition is evaluated and the body run in compiled code, with every
temporary allocated once per call, so an iteration costs its arithmetic, not a trip through
the backend's executor per op. Nothing is generated twice: a fusion in the body runs the
kernel its kind's template writes (templates.py), a lone dot the output template's GEMM
(``output.dot_kernel``), an elementwise op the scalar-op protocol (scalar.py); the loop
kernel calls them. So a loop gives the bits its ops give when the executor runs it. Anything
else keeps the loop in the executor (``loop_source`` returns None and logs why).

Values and buffers (Note [loop buffers]): a carried value that the body changes lives in a
buffer of the kernel (``c<k>``); a body value computed by a fusion, dot or elementwise op in a
buffer of its own, allocated once; reshapes and contiguous dynamic slices are pointers into
their operand (no copy); a dynamic_update_slice writes into the carried value it updates
where nothing else reads that value (a scan's stacked outputs); constants are filled once,
before the loop. A carried value the body returns unchanged (a scan's stacked weights) is
read where it is, and is no result of the kernel: the backend aliases that result to the
operand (``GeneratedLoop.results``).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from stablehlo.ir.core import Operation
from stablehlo.ir.ops.base import ELEMENTWISE

from xla_core.codegen.attrs import attr
from xla_core.codegen.index import strides
from xla_core.codegen.output import dot_kernel
from xla_core.codegen.scalar import NotGeneratable
from xla_core.codegen.target import SYMBOL, KernelTarget
from xla_core.codegen.templates import TEMPLATES, fusion_kernel

LOG = logging.getLogger("openhlo.codegen")

# Note [loop buffers]
# At the end of an iteration every carried value k takes its new value v. All reads of the
# iteration are done by then, so where v is a buffer of the kernel returned for k alone, the
# two pointers swap (the old storage of k becomes v's buffer, written again only by v's op
# in the next iteration). Where v is anything else (an input, a view into another carried
# value, a value returned twice, another carried value), it is copied into k's second
# buffer ``n<k>``, all copies before any swap, so a copy never reads storage that this
# iteration has already overwritten; then ``c<k>`` and ``n<k>`` swap.


def _size(type) -> int:
    return int(np.prod(type.shape, dtype=np.int64))


@dataclass
class GeneratedLoop:
    """A while loop as one kernel: its text (``SYMBOL`` for its name), the values it reads
    from outside the loop (its inputs after the loop operands, in this order), the math
    library functions it uses, and which of the loop's results it computes (its outputs, in
    this order); every other result is its operand unchanged."""
    source: str
    captured: list
    math: set
    results: list


class _LoopWriter:
    """Text of one loop kernel: every value is a named pointer (see Note [loop buffers])."""

    def __init__(self, module, target: KernelTarget):
        self.module = module
        self.target = target
        self.renderer = target.renderer
        self.names: dict = {}
        self.owned: dict = {}        # C name -> (ctype, elements) of buffers allocated once
        self.hoisted: list[str] = []  # statements run once, before the loop
        self.constants: set = set()   # buffers the hoisted statements fill (never swapped)
        self.kernels: list[str] = []  # the fusion and dot kernels the loop calls
        self.math: set = set()
        self.count = 0
        self.in_place: set = set()    # dynamic_update_slices that write into their operand

    def fresh(self) -> str:
        self.count += 1
        return f"v{self.count - 1}"

    def buffer(self, v) -> str:
        name = self.fresh()
        self.names[v] = name
        self.owned[name] = (self.renderer.ctype(v.type), max(_size(v.type), 1))
        return name

    def ops(self, block, lines: list[str]) -> list:
        """Emits ``block``'s ops into ``lines``; returns the values its terminator returns."""
        for op in block.operations:
            if op.name in ("stablehlo.return", "func.return"):
                return list(op.operands)
            for v in (*op.operands, *op.results):
                self.renderer.elem(v.type)  # raises for a type the renderer lacks
            if op.name == "func.call" or (op.name == "stablehlo.composite"
                                          and not _is_fusion(op)):
                self._inline(op, lines)
            elif op.name == "stablehlo.composite":
                text, used, defs = fusion_kernel(op, self.module, self.target)
                self._call("\n".join(defs) + "\n" + text, used, op, lines)
            elif op.name == "stablehlo.dot_general":
                self._call(dot_kernel(self.target, op), set(), op, lines)
            elif op.name == "stablehlo.reshape":
                self.names[op.results[0]] = self.names[op.operands[0]]
            elif op.name == "stablehlo.dynamic_slice":
                lines.append(self._dynamic_slice(op))
            elif op.name == "stablehlo.dynamic_update_slice":
                self._dynamic_update_slice(op, lines)
            elif op.name == "stablehlo.constant":
                self.hoisted.append(self._elementwise(op))
                self.constants.add(self.names[op.results[0]])
            else:
                lines.append(self._elementwise(op))
        raise NotGeneratable("block without terminator")

    def _inline(self, op: Operation, lines: list[str]) -> None:
        # A call, or a composite that is no fusion: its body, inline in the loop.
        target = op.attributes["callee" if op.name == "func.call" else "decomposition"]
        callee = self.module.lookup(target.name)
        for arg, v in zip(callee.body.arguments, op.operands):
            self.names[arg] = self.names[v]
        for r, v in zip(op.results, self.ops(callee.body, lines)):
            self.names[r] = self.names[v]

    def _call(self, text: str, used: set, op: Operation, lines: list[str]) -> None:
        """A call of the kernel ``text`` (``SYMBOL`` for its name) computing ``op``'s results
        into buffers of their own."""
        symbol = f"{SYMBOL}_k{len(self.kernels)}"
        self.kernels.append(text.replace(SYMBOL, symbol))
        self.math |= used
        ins = ", ".join(f"(const void*){self.names[v]}" for v in op.operands)
        outs = ", ".join(f"(void*){self.buffer(r)}" for r in op.results)
        lines.append(f"  {{ const void* ki[] = {{{ins or 'nullptr'}}}; void* ko[] = {{{outs}}}; "
                     f"{symbol}(env, ki, ko); }}")

    def _offset(self, op: Operation, shape: list, sizes: list, indices: list) -> str:
        """The element offset of the block of ``sizes`` at ``indices`` (scalar values) in a
        row-major ``shape``, the indices clamped as dynamic_slice and dynamic_update_slice
        clamp them; the block must be one contiguous run (dimensions of size 1, then one of
        any size, then whole ones)."""
        first = next((d for d, n in enumerate(sizes) if n != 1), len(sizes))
        if any(sizes[d] != shape[d] for d in range(first + 1, len(shape))):
            raise NotGeneratable(f"a {op.name} that is no contiguous run of its operand")
        terms = []
        for d, (index, st) in enumerate(zip(indices, strides(shape))):
            hi = shape[d] - sizes[d]
            if d > first or hi == 0:
                continue
            s = f"(int64_t){self.names[index]}[0]"
            terms.append(f"({s} < 0 ? 0 : ({s} > {hi} ? {hi} : {s})) * {st}")
        return " + ".join(terms) or "0"

    def _dynamic_slice(self, op: Operation) -> str:
        """A pointer into the operand (no copy)."""
        src = op.operands[0]
        offset = self._offset(op, list(src.type.shape), list(attr(op, "slice_sizes")),
                              list(op.operands[1:]))
        name = self.fresh()
        self.names[op.results[0]] = name
        ctype = self.renderer.ctype(op.results[0].type)
        return f"  const {ctype}* {name} = {self.names[src]} + {offset};"

    def _dynamic_update_slice(self, op: Operation, lines: list[str]) -> None:
        """The update written over its block: into the carried buffer itself where the op is
        that carried value's only use and gives its next value (a scan's stacked outputs,
        Note [loop buffers]), else into a copy of the operand."""
        src, update = op.operands[0], op.operands[1]
        r = self.renderer
        ctype = r.ctype(src.type)
        offset = self._offset(op, list(src.type.shape), list(update.type.shape),
                              list(op.operands[2:]))
        if op in self.in_place:
            out = self.names[src]
            self.names[op.results[0]] = out
        else:
            out = self.buffer(op.results[0])
            lines.append("  " + r.copy(out, self.names[src], ctype, max(_size(src.type), 1)))
        lines.append("  " + r.copy(f"{out} + {offset}", self.names[update], ctype,
                                   _size(update.type)))

    def _elementwise(self, op: Operation) -> str:
        r = self.renderer
        result = op.results[0]
        ctype = r.ctype(result.type)
        n = _size(result.type)
        ins = [self.names[v] for v in op.operands]
        out = self.buffer(result)
        elem = r.elem(result.type)
        loop = f"  for (int64_t i = 0; i < {n}; ++i) {out}[i] = "
        if op.name == "stablehlo.constant":
            flat = np.asarray(op.attributes["value"].array).reshape(-1)
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
        if op.regions or op.opdef is None or not op.opdef.has(ELEMENTWISE):
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


def _is_fusion(op: Operation) -> bool:
    name = op.attributes.get("name")
    return name is not None and name.value == "openhlo.fusion"


def _in_place_updates(op: Operation) -> set:
    """The body's dynamic_update_slices whose operand is a carried value used by nothing else
    in the body and whose result is that carried value's next value (and nothing else's)."""
    body = op.regions[1].blocks[0]
    returned = list(body.operations[-1].operands)
    found = set()
    for inner in body.operations:
        if inner.name != "stablehlo.dynamic_update_slice":
            continue
        arg, result = inner.operands[0], inner.results[0]
        if arg not in body.arguments or returned.count(result) != 1:
            continue
        uses = sum(list(o.operands).count(arg) for o in body.operations)
        if uses == 1 and returned.index(result) == body.arguments.index(arg):
            found.add(inner)
    return found


def _unchanged(op: Operation) -> list[bool]:
    """Per loop operand: whether the body returns it as it got it."""
    body = op.regions[1].blocks[0]
    returned = body.operations[-1].operands
    return [v is arg for v, arg in zip(returned, body.arguments)]


def while_kernel(op: Operation, module, captured: list, target: KernelTarget) -> GeneratedLoop:
    """The kernel of ``op`` (a stablehlo.while); its inputs: the loop operands, then
    ``captured``."""
    w = _LoopWriter(module, target)
    w.in_place = _in_place_updates(op)
    r = target.renderer
    params = []
    for k, v in enumerate(list(op.operands) + list(captured)):
        w.names[v] = f"in{k}"
        t = r.ctype(v.type)
        params.append(f"  const {t}* in{k} = (const {t}*)(ins[{k}]);")
    cond_block, body_block = op.regions[0].blocks[0], op.regions[1].blocks[0]
    unchanged = _unchanged(op)
    carried = []  # (index, name, ctype, elements) of the values the body changes
    for k, (v, carg, barg) in enumerate(zip(op.operands, cond_block.arguments,
                                            body_block.arguments)):
        name = f"in{k}" if unchanged[k] else f"c{k}"
        if not unchanged[k]:
            carried.append((k, name, r.ctype(v.type), max(_size(v.type), 1)))
        w.names[carg] = name
        w.names[barg] = name
    cond_lines, body_lines = [], []
    (pred,) = w.ops(cond_block, cond_lines)
    returned = w.ops(body_block, body_lines)
    ends, seconds = _iteration_end(w, carried, returned)
    lines = [target.loop_kernel(SYMBOL)] + params
    for k, name, ctype, n in carried:
        lines.append(f"  {r.alloc(name, ctype, n)} {r.copy(name, f'in{k}', ctype, n)}")
    lines += [f"  {r.alloc(name, ctype, n)}" for name, (ctype, n) in w.owned.items()]
    lines += [f"  {r.alloc(f'n{k}', ctype, n)}" for k, _, ctype, n in carried if k in seconds]
    lines += w.hoisted
    lines.append("  for (;;) {")
    lines += ["  " + line for line in cond_lines]
    lines.append(f"    if (!{w.names[pred]}[0]) break;")
    lines += ["  " + line for line in body_lines]
    lines += ["    " + line for line in ends]
    lines.append("  }")
    for j, (k, name, ctype, n) in enumerate(carried):
        lines.append(f"  {r.copy(f'outs[{j}]', name, ctype, n)}")
    frees = [name for _, name, _, _ in carried] + list(w.owned)
    frees += [f"n{k}" for k, _, _, _ in carried if k in seconds]
    lines += [f"  {r.free(name)}" for name in frees]
    lines.append("}")
    source = "\n".join(w.kernels) + "\n" + "\n".join(lines) + "\n"
    return GeneratedLoop(source, list(captured), w.math, [k for k, _, _, _ in carried])


def _iteration_end(w: _LoopWriter, carried: list, returned: list) -> tuple[list[str], set]:
    """(statements giving each carried value its new value, the carried indices that need a
    second buffer): Note [loop buffers]."""
    r = w.renderer
    copies, swaps, seconds, claimed = [], [], set(), set()
    for k, name, ctype, n in carried:
        src = w.names[returned[k]]
        if src == name:  # updated in place
            continue
        if src in w.owned and src not in w.constants and src not in claimed:
            claimed.add(src)
            swaps.append(f"{{ {ctype}* t = {name}; {name} = {src}; {src} = t; }}")
        else:
            seconds.add(k)
            copies.append(r.copy(f"n{k}", src, ctype, n))
            swaps.append(f"{{ {ctype}* t = {name}; {name} = n{k}; n{k} = t; }}")
    return copies + swaps, seconds


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


def loop_source(op: Operation, module, target: KernelTarget) -> GeneratedLoop | None:
    """``op`` as one kernel, or None when the generator refuses the loop (the backend's
    executor runs it; the reason is logged)."""
    try:
        if any(len(r.blocks) != 1 for r in op.regions):
            raise NotGeneratable("multi-block region")
        return TEMPLATES.get("while")(op, module, captured_in_order(op), target)
    except NotGeneratable as exc:
        LOG.debug("%s stays in the executor: %s", op.where(), exc)
        return None
