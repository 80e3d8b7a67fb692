"""Symbolic sizes in a module lowered at stand-in sizes: ``make_dynamic(module, ...)``.

``export_to_stablehlo`` lowers a graph with ``dynamic_shapes`` once, with every input symbol
at a stand-in size (a prime no model uses), so that every lowering rule sees plain ints.
This rewrite then turns that Module (never its text) into the shape-polymorphic program:

* every dim equal to a stand-in size (a symbol, or a sum or product of symbols and
  integers) becomes dynamic (``None``, printed ``?``) in every value's type;
* the function starts by reading each symbol off its argument (``get_dimension_size``) and
  computing every derived size from those, as ``tensor<1xi64>`` values;
* ops whose static attributes or result types hold a symbolic size take their dynamic
  form, reading the sizes at run time:

    broadcast_in_dim            -> dynamic_broadcast_in_dim(x, shape)
    reshape                     -> dynamic_reshape(x, shape)
    iota                        -> dynamic_iota(shape)
    slice [start:limit:stride]  -> real_dynamic_slice(x, start, limit, stride)
    constant <size> : tensor<T> -> the size (reshape to tensor<i64>, convert to T)

A symbolic size left in any other attribute (a pad's edges, a dynamic_slice's sizes, ...)
has no dynamic form here: that is an ``ExportError`` naming the op.

``sizes`` maps each stand-in value to its sympy expression; ``where`` maps each symbol to
the ``(argument index, dim)`` it is read from.
"""
from __future__ import annotations

import numpy as np
import sympy

from stablehlo.ir.attributes import (DenseArrayAttr, DenseElementsAttr, IntegerAttr, TypeAttr,
                                     dense, i64_attr, nested_values)
from stablehlo.ir.core import Block, Func, Module, Operation, Value
from stablehlo.ir.types import I32, I64, FunctionType, TensorType
from stablehlo.verify import verify_module

_SIZE = TensorType((1,), I64)     # one size, as the dynamic ops' shape operands hold them
_SCALAR_I64 = TensorType((), I64)


class SymbolicSizeError(Exception):
    """A symbolic size sits where only a static one can be; the message names the op."""


def make_dynamic(module: Module, function: str, where: dict, sizes: dict) -> None:
    """Rewrite ``function`` of ``module`` in place (see the module docstring)."""
    _DynamicRewrite(module.lookup(function), sizes).run(where)
    verify_module(module)


class _DynamicRewrite:
    def __init__(self, func: Func, sizes: dict):
        self.func = func
        self.sizes = sizes
        self.computed: dict = {}  # sympy expression -> its tensor<1xi64> Value
        self.out: list = []       # the ops of the block being rewritten, in order

    def run(self, where: dict) -> None:
        body = self.func.body
        prologue: list = []
        self.out = prologue
        for symbol, (arg, dim) in where.items():
            size = self._add("stablehlo.get_dimension_size", [body.arguments[arg]],
                             TensorType((), I32), {"dimension": i64_attr(dim)})
            as_i64 = self._add("stablehlo.convert", [size], _SCALAR_I64)
            self.computed[symbol] = self._add("stablehlo.reshape", [as_i64], _SIZE)
        for expr in self.sizes.values():
            self._size(expr)
        self._rewrite_block(body, prologue)
        self._make_types_dynamic()
        self._check_no_static_use()

    # ---- building -------------------------------------------------------------------------

    def _add(self, name: str, operands: list, result_type, attributes=None) -> Value:
        op = Operation(name, operands, [result_type], attributes or {})
        self.out.append(op)
        return op.result

    def _constant(self, value: int) -> Value:
        return self._add("stablehlo.constant", [], _SIZE,
                         {"value": dense(np.array([value], np.int64))})

    def _size(self, expr) -> Value:
        """``expr`` (a symbol, an integer, or a sum or product of them) as tensor<1xi64>;
        computed once, in the prologue (``run`` computes every size there first)."""
        if expr in self.computed:
            return self.computed[expr]
        if expr.is_Integer:
            value = self._constant(int(expr))
        else:
            name = "stablehlo.add" if isinstance(expr, sympy.Add) else "stablehlo.multiply"
            first, *rest = [self._size(a) for a in expr.args]
            for other in rest:
                first = self._add(name, [first, other], _SIZE)
            value = first
        self.computed[expr] = value
        return value

    def _vector(self, items) -> Value:
        """A tensor<Nxi64> of ``items`` (static ints, stand-in sizes read at run time)."""
        parts = [self._size(self.sizes[d]) if d in self.sizes else self._constant(d)
                 for d in items]
        if len(parts) == 1:
            return parts[0]
        return self._add("stablehlo.concatenate", parts, TensorType((len(parts),), I64),
                         {"dimension": i64_attr(0)})

    def _symbolic(self, items) -> bool:
        return any(d in self.sizes for d in items)

    # ---- rewriting ------------------------------------------------------------------------

    def _rewrite_block(self, block: Block, out: list) -> None:
        for op in list(block.operations):
            for region in op.regions:
                for inner in region.blocks:
                    self._rewrite_block(inner, [])
            self.out = out
            rule = _RULES.get(op.name)
            if rule is not None:
                rule(self, op)
            out.append(op)
        block.operations = []
        for op in out:
            block.append(op)

    def _make_types_dynamic(self) -> None:
        for op in self.func.walk():
            for value in op.results:
                value.type = self._dynamic(value.type)
            for region in op.regions:
                for block in region.blocks:
                    for value in block.arguments:
                        value.type = self._dynamic(value.type)
        for value in self.func.body.arguments:
            value.type = self._dynamic(value.type)
        ftype = self.func.type
        self.func.op.attributes["function_type"] = TypeAttr(FunctionType(
            tuple(map(self._dynamic, ftype.inputs)), tuple(map(self._dynamic, ftype.results))))

    def _dynamic(self, type_):
        if not isinstance(type_, TensorType) or not self._symbolic(type_.shape):
            return type_
        return type_.with_shape(None if d in self.sizes else d for d in type_.shape)

    def _check_no_static_use(self) -> None:
        for op in self.func.walk():
            for key, attr in op.attributes.items():
                used = [v for v in _integers(attr) if v in self.sizes]
                if used:
                    raise SymbolicSizeError(
                        f"{op.where()} attribute '{key}' holds the symbolic size "
                        f"{self.sizes[used[0]]}, where only a static size can be")


def _to_dynamic_broadcast(rewrite: _DynamicRewrite, op: Operation) -> None:
    # broadcast_in_dim(x) : tensor<s x ...> -> dynamic_broadcast_in_dim(x, [s, ...])
    shape = op.result.type.shape
    if rewrite._symbolic(shape):
        op.name = "stablehlo.dynamic_broadcast_in_dim"
        op.operands = [op.operands[0], rewrite._vector(shape)]


def _to_dynamic_reshape(rewrite: _DynamicRewrite, op: Operation) -> None:
    # reshape(x) : tensor<s x ...> -> dynamic_reshape(x, [s, ...])
    shape = op.result.type.shape
    if rewrite._symbolic(shape):
        op.name = "stablehlo.dynamic_reshape"
        op.operands = [op.operands[0], rewrite._vector(shape)]


def _to_dynamic_iota(rewrite: _DynamicRewrite, op: Operation) -> None:
    # iota : tensor<s x ...> -> dynamic_iota([s, ...])
    shape = op.result.type.shape
    if rewrite._symbolic(shape):
        op.name = "stablehlo.dynamic_iota"
        op.operands = [rewrite._vector(shape)]


def _to_real_dynamic_slice(rewrite: _DynamicRewrite, op: Operation) -> None:
    # slice x [a:b:c] with a symbolic bound -> real_dynamic_slice(x, [a..], [b..], [c..])
    keys = ("start_indices", "limit_indices", "strides")
    bounds = [op.attributes[key].values for key in keys]
    if any(rewrite._symbolic(b) for b in bounds):
        op.name = "stablehlo.real_dynamic_slice"
        op.operands = [op.operands[0], *(rewrite._vector(b) for b in bounds)]
        for key in keys:
            del op.attributes[key]


def _to_size_value(rewrite: _DynamicRewrite, op: Operation) -> None:
    # constant <s> : tensor<T> -> convert(reshape(s)) (just reshape(s) for T = i64)
    value = op.attributes["value"]
    if value.type.shape != () or value.array.dtype.kind not in "iuf":  # ints and floats
        return
    number = value.array.item()
    if not float(number).is_integer() or int(number) not in rewrite.sizes:
        return
    size = rewrite._size(rewrite.sizes[int(number)])
    del op.attributes["value"]
    if value.type.element_type == I64:
        op.name, op.operands = "stablehlo.reshape", [size]
    else:
        as_i64 = rewrite._add("stablehlo.reshape", [size], _SCALAR_I64)
        op.name, op.operands = "stablehlo.convert", [as_i64]


_RULES = {
    "stablehlo.broadcast_in_dim": _to_dynamic_broadcast,
    "stablehlo.reshape": _to_dynamic_reshape,
    "stablehlo.iota": _to_dynamic_iota,
    "stablehlo.slice": _to_real_dynamic_slice,
    "stablehlo.constant": _to_size_value,
}


def _integers(attr):
    """Every integer an attribute holds (types aside: those are rewritten, not checked)."""
    for value in nested_values(attr):
        if isinstance(value, IntegerAttr):
            yield value.value
        elif isinstance(value, int):  # a struct's field
            yield value
        elif isinstance(value, (DenseArrayAttr, tuple)):  # tuple: a struct's field
            yield from (v for v in getattr(value, "values", value) if isinstance(v, int))
        elif isinstance(value, DenseElementsAttr) and np.issubdtype(value.array.dtype,
                                                                     np.integer):
            yield from np.unique(value.array).tolist()
