"""Generated C++ kernels for the cpu backend: whole ``while`` loops of elementwise math.

A ``stablehlo.while`` whose condition and body are made only of elementwise arithmetic,
comparisons, selects, conversions, constants and scalar broadcasts (on f32/f64/i32/i64/i1,
static shapes) becomes one generated C++ function: the loop runs in compiled code with its
temporaries allocated once, so a loop of 1000 tiny iterations costs what the arithmetic
costs, not 1000 trips through the executor. The executor runs it as an ordinary step
(``Program.add_generated``, the fusion kernels' signature; it ignores the environment);
anything else in the loop keeps the loop in the executor.

Loop kernels join the program's one translation unit (program.py), beside its fusions.

The scalar semantics are the reference interpreter's: integer arithmetic wraps (computed
unsigned), comparisons of floats are IEEE, float math uses the C library (within the
tolerance the conformance suites allow). The source includes no standard header (each costs
compile time: <cmath> and <memory> alone were ~300 ms): the fixed-width types come from the
shared prelude (abi.py), memory and math from compiler builtins.
"""
from __future__ import annotations

import logging

import numpy as np

from stablehlo.ir.core import Operation

from pjrt.plugins.cpu.codegen.abi import KERNEL_SIGNATURE
from pjrt.plugins.cpu.codegen.scalar import NotGeneratable, elem_name, literal

LOG = logging.getLogger("openhlo.cpu")

_CTYPES = {"f32": "float", "f64": "double", "i32": "int32_t", "i64": "int64_t", "i1": "bool"}
_UNSIGNED = {"i32": "uint32_t", "i64": "uint64_t"}
_BINARY = {"stablehlo.add": "+", "stablehlo.subtract": "-", "stablehlo.multiply": "*"}
_FLOAT_BINARY = {"stablehlo.divide": "/"}
_LOGICAL = {"stablehlo.and": "&&", "stablehlo.or": "||"}
_UNARY_FLOAT = {"stablehlo.exponential": "exp", "stablehlo.log": "log", "stablehlo.tanh": "tanh",
                "stablehlo.sqrt": "sqrt", "stablehlo.sine": "sin", "stablehlo.cosine": "cos"}
_COMPARE = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}
_SYMBOL = "openhlo_kernel"


def _ctype(type) -> str:
    name = elem_name(type)  # static tensors of a type C++ has
    if name not in _CTYPES:  # the loop emitter's semantics cover fewer
        raise NotGeneratable(f"element type {name} in a loop")
    return _CTYPES[name]


def _size(type) -> int:
    return int(np.prod(type.shape, dtype=np.int64))


def _buffer(name: str, ctype: str, n: int) -> str:
    """A temporary of ``n`` elements, allocated once per kernel call (not per iteration) and
    freed by ``_free`` at the kernel's single exit."""
    return f"  {ctype}* {name} = ({ctype}*)__builtin_malloc(sizeof({ctype}) * {n});"


def _math(name: str, ctype: str) -> str:
    """The C library function ``name`` for ``ctype`` (float: the f-suffixed one)."""
    return f"__builtin_{name}{'f' if ctype == 'float' else ''}"


class _Emitter:
    """C++ text for the ops of one loop: every value is a named array of its tensor's size."""

    def __init__(self, module):
        self.module = module
        self.names: dict = {}
        self.decls: list[str] = []
        self.buffers: list[str] = []  # names of the temporaries (freed at the end)
        self.count = 0

    def value(self, v) -> str:
        return self.names[v]

    def define(self, v) -> str:
        name = f"v{self.count}"
        self.count += 1
        self.names[v] = name
        self.buffers.append(name)
        self.decls.append(_buffer(name, _ctype(v.type), max(_size(v.type), 1)))
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
        result = op.results[0]
        ctype = _ctype(result.type)
        n = _size(result.type)
        out = self.define(result)
        ins = [self.value(v) for v in op.operands]
        elem = str(result.type.element_type)
        loop = f"  for (int64_t i = 0; i < {n}; ++i) {out}[i] = "
        if op.name == "stablehlo.constant":
            array = op.attributes["value"].array
            flat = np.asarray(array).reshape(-1)
            if flat.size and np.all(flat == flat[0]) or flat.size == 1:
                return loop + literal(flat[0], elem) + ";"
            items = ", ".join(literal(x, elem) for x in flat)
            return (f"  {{ static const {ctype} data[{n}] = {{{items}}}; "
                    f"for (int64_t i = 0; i < {n}; ++i) {out}[i] = data[i]; }}")
        if op.name == "stablehlo.broadcast_in_dim":
            src = op.operands[0].type
            if _size(src) == 1:
                return loop + f"{ins[0]}[0];"
            if list(src.shape) == list(result.type.shape):
                return loop + f"{ins[0]}[i];"
            raise NotGeneratable("broadcast_in_dim of a non-scalar")
        for v in op.operands:
            if _size(v.type) != n:
                raise NotGeneratable(f"{op.name} mixes shapes")
        if op.name in _BINARY:
            a, b = ins
            if elem in _UNSIGNED:  # wrap around, as the interpreter's numpy arithmetic
                u = _UNSIGNED[elem]
                return loop + f"static_cast<{ctype}>(static_cast<{u}>({a}[i]) " \
                              f"{_BINARY[op.name]} static_cast<{u}>({b}[i]));"
            if elem == "i1":
                raise NotGeneratable(f"{op.name} on booleans")
            return loop + f"{a}[i] {_BINARY[op.name]} {b}[i];"
        if op.name in _FLOAT_BINARY and elem in ("f32", "f64"):
            return loop + f"{ins[0]}[i] {_FLOAT_BINARY[op.name]} {ins[1]}[i];"
        if op.name in _LOGICAL and elem == "i1":
            return loop + f"{ins[0]}[i] {_LOGICAL[op.name]} {ins[1]}[i];"
        if op.name == "stablehlo.negate" and elem in ("f32", "f64"):
            return loop + f"-{ins[0]}[i];"
        if op.name in _UNARY_FLOAT and elem in ("f32", "f64"):
            return loop + f"{_math(_UNARY_FLOAT[op.name], ctype)}({ins[0]}[i]);"
        if op.name == "stablehlo.logistic" and elem in ("f32", "f64"):
            return loop + f"{ctype}(1) / ({ctype}(1) + {_math('exp', ctype)}(-{ins[0]}[i]));"
        if op.name == "stablehlo.compare":
            direction = op.attributes["comparison_direction"].value
            operand_elem = str(op.operands[0].type.element_type)
            if operand_elem == "i1" and direction not in ("EQ", "NE"):
                raise NotGeneratable("ordered compare of booleans")
            ctype_attr = op.attributes.get("compare_type")
            if ctype_attr is not None and ctype_attr.value in ("TOTALORDER", "UNSIGNED"):
                raise NotGeneratable(f"compare_type {ctype_attr.value}")
            return loop + f"{ins[0]}[i] {_COMPARE[direction]} {ins[1]}[i];"
        if op.name == "stablehlo.select":
            p, a, b = ins
            pi = "0" if _size(op.operands[0].type) == 1 else "i"
            return loop + f"{p}[{pi}] ? {a}[i] : {b}[i];"
        if op.name == "stablehlo.convert":
            src = str(op.operands[0].type.element_type)
            if src in ("f32", "f64") and elem in ("i32", "i64", "i1"):
                raise NotGeneratable("float to integer conversion")
            if elem == "i1":
                return loop + f"{ins[0]}[i] != 0;"
            return loop + f"({ctype})({ins[0]}[i]);"
        raise NotGeneratable(f"op {op.name}")


def while_source(op: Operation, module, captured: list) -> str:
    """C++ for ``op`` (a stablehlo.while); operands: the loop operands, then ``captured``."""
    e = _Emitter(module)
    params = []
    for k, v in enumerate(list(op.operands) + list(captured)):
        name = f"in{k}"
        e.names[v] = name
        params.append(f"  const {_ctype(v.type)}* {name} = "
                      f"static_cast<const {_ctype(v.type)}*>(ins[{k}]);")
    cond_block, body_block = op.regions[0].blocks[0], op.regions[1].blocks[0]
    carried = []
    for k, (v, carg, barg) in enumerate(zip(op.operands, cond_block.arguments,
                                            body_block.arguments)):
        name = f"c{k}"
        ctype, n = _ctype(v.type), max(_size(v.type), 1)
        carried.append((name, ctype, n))
        e.names[carg] = name
        e.names[barg] = name
    cond_lines, body_lines = [], []
    (pred,) = e.ops(cond_block, cond_lines)
    returned = e.ops(body_block, body_lines)
    lines = [f'extern "C" void {_SYMBOL}{KERNEL_SIGNATURE} {{']
    lines += params
    for k, (name, ctype, n) in enumerate(carried):
        lines.append(_buffer(name, ctype, n) +
                     f" __builtin_memcpy({name}, in{k}, sizeof({ctype}) * {n});")
    lines += e.decls
    lines.append("  for (;;) {")
    lines += ["  " + line for line in cond_lines]
    lines.append(f"    if (!{e.value(pred)}[0]) break;")
    lines += ["  " + line for line in body_lines]
    # All new values are computed before any carried value is overwritten.
    for (name, ctype, n), v in zip(carried, returned):
        src = e.value(v)
        if src != name:
            lines.append(f"    __builtin_memmove({name}, {src}, sizeof({ctype}) * {n});")
    lines.append("  }")
    for k, (name, ctype, n) in enumerate(carried):
        lines.append(f"  __builtin_memcpy(outs[{k}], {name}, sizeof({ctype}) * {n});")
    for name in [name for name, _, _ in carried] + e.buffers:
        lines.append(f"  __builtin_free({name});")
    lines.append("}")
    return "\n".join(lines) + "\n"


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


def loop_source(op: Operation, module, symbol: str):
    """(C++ of ``op`` as the function ``symbol``, its captured values), or None when the
    generator refuses the loop (the executor runs it; the reason is logged)."""
    try:
        if any(len(r.blocks) != 1 for r in op.regions):
            raise NotGeneratable("multi-block region")
        _check_carried_aliases(op)
        captured = captured_in_order(op)
        source = while_source(op, module, captured)
    except NotGeneratable as exc:
        LOG.debug("%s stays in the executor: %s", op.where(), exc)
        return None
    return source.replace(_SYMBOL, symbol), captured
