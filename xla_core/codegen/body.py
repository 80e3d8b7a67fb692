"""Fusion values as scalar C statements at index expressions.

``Body.at(value, indices)`` returns a C expression for the element of ``value`` at
``indices`` (one C integer expression per dimension), emitting the statements it needs into
the current scope. Data movement never materializes: broadcast_in_dim, transpose, reshape,
slice, reverse, iota, concatenate and pad map the indices they are asked for to their
operand's indices, so a whole fusion is one expression tree per output element. Each
(value, indices) pair is computed once per scope (common subexpressions of the fusion's DAG
are shared). Values a kernel computes ahead (reduction results, the dot of an output fusion)
are ``fixed``: they answer only at the indices they were computed for.
"""
from __future__ import annotations

import numpy as np

from stablehlo.ir.core import Value

from xla_core.codegen.attrs import attr
from xla_core.codegen.index import add, linear, mul, nonunit, reshape_groups, strides
from xla_core.codegen.scalar import NotGeneratable, ScalarRenderer

MAX_CONSTANT = 4096  # elements of a non-splat constant emitted as a static array


class Body:
    """Statements of one kernel: scopes of C lines with their own memo of computed values."""

    def __init__(self, renderer: ScalarRenderer, params: dict, math: set, globals_: list,
                 prefix: str):
        self.renderer = renderer
        self.prefix = prefix          # of file-scope names: unique per kernel
        self.params = params          # block argument -> C pointer name
        self.math = math              # mathlib functions used
        self.globals = globals_       # file-scope definitions (constant arrays)
        self.fixed: dict = {}         # Value -> (indices, C name)
        self.lines: list[str] = []
        self.memo: list[dict] = [{}]
        self.count = 0

    # -- scopes --------------------------------------------------------------------
    def open(self) -> list[str]:
        """Starts a nested scope; returns the lines of the enclosing one."""
        outer = self.lines
        self.lines = []
        self.memo.append({})
        return outer

    def close(self, outer: list[str]) -> list[str]:
        """Ends the scope begun by ``open``; returns its lines."""
        inner = self.lines
        self.lines = outer
        self.memo.pop()
        return inner

    def temp(self, ctype_: str, expr: str, prefix: str = "t") -> str:
        name = f"{prefix}{self.count}"
        self.count += 1
        self.lines.append(f"const {ctype_} {name} = {expr};")
        return name

    def index_var(self, expr: str) -> str:
        return self.temp("int64_t", expr, "x")

    def delinearize(self, flat: str, shape) -> tuple:
        """Per-dimension indices of row-major position ``flat`` in ``shape``."""
        if len(nonunit(shape)) == 1:
            return tuple(flat if n != 1 else "0" for n in shape)
        out = []
        for d, (s, n) in enumerate(zip(strides(shape), shape)):
            if n == 1:
                out.append("0")
                continue
            e = flat if s == 1 else f"{flat} / {s}"
            if s * n < int(np.prod(shape)):
                e = f"({e}) % {n}"
            if flat.isidentifier():  # loop variables: the same names in every scope
                out.append(f"{flat}_{d}")
                self.lines.append(f"const int64_t {flat}_{d} = {e};")
            else:
                out.append(self.index_var(e))
        return tuple(out)

    # -- values --------------------------------------------------------------------
    def at(self, v: Value, idx: tuple) -> str:
        idx = tuple(idx)
        key = (v, idx)
        for memo in reversed(self.memo):
            if key in memo:
                return memo[key]
        expr = self._compute(v, idx)
        if not expr.isidentifier():
            expr = self.temp(self.renderer.ctype(v.type), expr)
        self.memo[-1][key] = expr
        return expr

    def _compute(self, v: Value, idx: tuple) -> str:
        if v in self.fixed:
            want, name = self.fixed[v]
            if tuple(want) != idx:
                raise NotGeneratable("a reduction or dot result is read at other indices than "
                                     "the ones it is computed for")
            return name
        if v in self.params:
            return f"{self.params[v]}[{linear(idx, v.type.shape)}]"
        op = v.owner
        if not hasattr(op, "name"):
            raise NotGeneratable("a block argument that is not a parameter")
        name = op.name
        shape = list(v.type.shape)
        if name == "stablehlo.constant":
            return self._constant(op, v, idx)
        if name == "stablehlo.iota":
            return f"({self.renderer.ctype(v.type)})({idx[attr(op, 'iota_dimension')]})"
        if name == "stablehlo.broadcast_in_dim":
            src = op.operands[0]
            dims = attr(op, "broadcast_dimensions")
            return self.at(src, tuple("0" if n == 1 else idx[d]
                                      for d, n in zip(dims, src.type.shape)))
        if name == "stablehlo.transpose":
            perm = attr(op, "permutation")
            src_idx = [None] * len(perm)
            for j, p in enumerate(perm):
                src_idx[p] = idx[j]
            return self.at(op.operands[0], tuple(src_idx))
        if name == "stablehlo.reshape":
            src = op.operands[0]
            return self.at(src, self.reshape(idx, shape, list(src.type.shape)))
        if name == "stablehlo.slice":
            starts, steps = attr(op, "start_indices"), attr(op, "strides")
            return self.at(op.operands[0], tuple(
                add(mul(i, k), s) if n != 1 or s else "0"
                for i, s, k, n in zip(idx, starts, steps, shape)))
        if name == "stablehlo.reverse":
            dims = set(attr(op, "dimensions"))
            return self.at(op.operands[0], tuple(
                f"({n - 1} - {i})" if d in dims and n != 1 else i
                for d, (i, n) in enumerate(zip(idx, shape))))
        if name == "stablehlo.concatenate":
            return self._concatenate(op, idx)
        if name == "stablehlo.pad":
            return self._pad(op, v, idx)
        if name == "stablehlo.reduce" or name == "stablehlo.dot_general":
            raise NotGeneratable(f"{name} outside the place its fusion kind allows")
        args = []
        for operand in op.operands:
            args.append(self.at(operand, () if operand.type.rank == 0 else idx))
        return self.renderer.expression(op, args, self.math)

    def reshape(self, idx, shape, src_shape) -> tuple:
        """The operand's indices of a reshape, group by group (Note [reshape groups])."""
        out = ["0"] * len(src_shape)
        for dims, src_dims in reshape_groups(shape, src_shape):
            if len(dims) == 1 and len(src_dims) == 1:
                out[src_dims[0]] = idx[dims[0]]
                continue
            sub = [shape[d] for d in dims]
            flat = linear([idx[d] for d in dims], sub)
            if not flat.isidentifier():
                flat = self.index_var(flat)
            src_sub = [src_shape[d] for d in src_dims]
            for k, (d, st) in enumerate(zip(src_dims, strides(src_sub))):
                e = flat if st == 1 else f"{flat} / {st}"
                if k > 0:  # the group's first index is below its size already
                    e = f"({e}) % {src_shape[d]}"
                out[d] = e if len(src_dims) == 1 else self.index_var(e)
        return tuple(out)

    def _constant(self, op, v, idx) -> str:
        r = self.renderer
        elem = r.elem(v.type)
        flat = np.asarray(op.attributes["value"].array).reshape(-1)
        # A NaN splat (e.g. the fill of a masked mean) is a splat too, though NaN != NaN.
        if flat.size == 1 or (flat.size and np.array_equal(
                flat, np.full_like(flat, flat[0]), equal_nan=flat.dtype.kind in "fc")):
            return r.literal(flat[0], elem)
        if flat.size > MAX_CONSTANT:
            raise NotGeneratable(f"a constant of {flat.size} elements inside a fusion")
        # Named after the kernel: the kernels of a program share one translation unit.
        name = f"{self.prefix}_k{len(self.globals)}"
        items = ", ".join(r.literal(x, elem) for x in flat)
        self.globals.append(f"static const {r.TYPES[elem]} {name}[{flat.size}] = {{{items}}};")
        return f"{name}[{linear(idx, v.type.shape)}]"

    def _concatenate(self, op, idx) -> str:
        dim = attr(op, "dimension")
        parts, offset = [], 0
        for operand in op.operands:
            n = operand.type.shape[dim]
            local = add(idx[dim], -offset)
            clamped = f"({local} < 0 ? 0 : ({local} > {n - 1} ? {n - 1} : {local}))"
            sub = tuple(clamped if d == dim else i for d, i in enumerate(idx))
            parts.append((offset + n, self.at(operand, sub)))
            offset += n
        expr = parts[-1][1]
        for end, value in reversed(parts[:-1]):
            expr = f"({idx[dim]} < {end} ? {value} : {expr})"
        return expr

    def _pad(self, op, v, idx) -> str:
        src, value = op.operands
        low = attr(op, "edge_padding_low")
        interior = attr(op, "interior_padding")
        conds, sub = [], []
        for i, lo, inner, n in zip(idx, low, interior, src.type.shape):
            pos = self.index_var(add(i, -lo))
            step = inner + 1
            q = pos if step == 1 else f"({pos} / {step})"
            conds.append(f"{pos} >= 0 && {q} < {n}" + (f" && {pos} % {step} == 0" if step > 1 else ""))
            sub.append(f"({pos} < 0 ? 0 : ({q} > {n - 1} ? {n - 1} : {q}))")
        inside = self.at(src, tuple(sub))
        pad = self.at(value, ())
        cond = " && ".join(conds) or "true"
        return f"(({cond}) ? {inside} : {pad})"
