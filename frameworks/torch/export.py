"""``export_to_stablehlo``: a torch model as a StableHLO module, through ``torch.export``.

    exported = export_to_stablehlo(model, (x,))                   # weights as constants
    exported = export_to_stablehlo(model, (x,), weights="arguments")
    print(exported.text)                                          # StableHLO text
    outputs = exported.run(x)                                     # on our cpu backend

The program is ``torch.export``'s graph decomposed to core ATen (minus the ops we lower
whole, such as scaled_dot_product_attention: keeping it whole also avoids torch 2.13's
stride bug when HF GPT-2's SDPA is decomposed) and lowered by the same rules as
torch.compile. With ``weights="arguments"`` the function takes the parameters, buffers and
tensor constants first, in ``weight_names`` order, then the user inputs; otherwise they
are folded in as ``stablehlo.constant``s. Every op must lower: an op without a rule is an
error naming it (export has no eager side to fall back to).

Dynamic shapes: ``dynamic_shapes`` is passed to ``torch.export.export`` as is (e.g.
``({0: torch.export.Dim("batch")},)``); symbolic dims print as ``?`` in the text. The graph
is lowered once with each symbol at a stand-in prime size, then every place a symbolic size
landed is rewritten to read it from the arguments at run time: ``get_dimension_size`` in the
prologue, sums and products of sizes, and ``dynamic_broadcast_in_dim``, ``dynamic_reshape``,
``real_dynamic_slice``, ``dynamic_iota`` and size-valued scalars in the body. The text
verifies in upstream MLIR and XLA runs it after shape refinement (as JAX runs its
shape-polymorphic exports). Our cpu backend compiles static programs, so ``run`` lowers the
same graph once per concrete input shape (cached). Sizes must be input symbols or sums and
products of them and integers (a flattened ``4 * batch`` is fine; a pooling's floor division
is an ``ExportError``), and a symbolic size in any other op is an ``ExportError`` naming the
line.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import sympy
import torch

from frameworks.torch.lowering import LOWERINGS, LoweringFailed, lower_nodes
from frameworks.torch.lowering.dtypes import from_numpy, to_numpy
from frameworks.torch.lowering.graph import tensor_type
from stablehlo.ir.core import Module


class ExportError(Exception):
    """The model cannot be exported to StableHLO; the message names the op and node."""


@dataclass
class ExportedStableHLO:
    module: Module
    weight_names: list = field(default_factory=list)
    weights: list = field(default_factory=list)  # numpy arrays when weights="arguments"
    dynamic_text: str | None = None   # the program with ``?`` dims (dynamic_shapes given)
    specialize: object = None         # inputs -> static Module for their shapes (dynamic)
    _executables: dict = field(default_factory=dict)

    @property
    def text(self) -> str:
        return self.dynamic_text if self.dynamic_text is not None else str(self.module)

    def run(self, *inputs: torch.Tensor, backend: str = "cpu") -> list:
        """Compile on ``backend`` and run on ``inputs`` (weights are passed for you). With
        dynamic shapes, the program is specialized to the inputs' shapes first (once each)."""
        import pjrt
        key = (backend, tuple(tuple(t.shape) for t in inputs))
        executable = self._executables.get(key)
        if executable is None:
            module = self.module if self.specialize is None else self.specialize(inputs)
            executable = pjrt.make_client(backend).compile(module)
            self._executables[key] = executable
        results = executable(*self.weights, *[to_numpy(t) for t in inputs])
        return [from_numpy(r) for r in results]


def _decomposition_table():
    table = torch.export.default_decompositions()
    for op in list(table.keys()):
        if op in LOWERINGS:
            del table[op]
    return table


def export_to_stablehlo(model: torch.nn.Module, example_args: Sequence,
                        dynamic_shapes=None, *, weights: str = "constants",
                        name: str = "main") -> ExportedStableHLO:
    """Export ``model(*example_args)`` to StableHLO (see the module docstring)."""
    if weights not in ("constants", "arguments"):
        raise ValueError(f"weights must be 'constants' or 'arguments', not {weights!r}")
    ep = torch.export.export(model, tuple(example_args), dynamic_shapes=dynamic_shapes)
    ep = ep.run_decompositions(_decomposition_table())
    graph = ep.graph_module.graph
    values = _weight_values(ep)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    weight_nodes = [n for n in placeholders if n.name in values]
    user_nodes = [n for n in placeholders if n.name not in values]
    if weights == "constants":
        inputs, constants = user_nodes, {n: values[n.name] for n in weight_nodes}
    else:
        inputs, constants = weight_nodes + user_nodes, {}
    output = next(n for n in graph.nodes if n.op == "output")
    outputs = [o for o in output.args[0] if isinstance(o, torch.fx.Node)]
    nodes = [n for n in graph.nodes if n.op == "call_function"]

    # size computations (sym_size, SymInt arithmetic) are Python values, not tensors
    size_nodes = [n for n in nodes if isinstance(n.meta.get("val"), torch.SymInt)]
    tensor_nodes = [n for n in nodes if n not in size_nodes]

    def lower(concrete):
        known = {n: concrete(n.meta["val"]) for n in size_nodes}
        try:
            return lower_nodes(tensor_nodes, inputs,
                               [tensor_type(n.meta["val"], concrete) for n in inputs],
                               outputs, known, concrete, name=name, constants=constants)
        except LoweringFailed as exc:
            raise ExportError(f"export_to_stablehlo: {exc}") from exc

    symbols = _input_symbols(inputs)
    if not symbols:
        module = lower(lambda x: x)  # static shapes: sizes are plain ints
        if weights == "constants":
            return ExportedStableHLO(module)
        return ExportedStableHLO(module, [n.name for n in weight_nodes],
                                 [values[n.name] for n in weight_nodes])
    if len(symbols) > len(_SENTINELS):
        raise ExportError(f"export_to_stablehlo: at most {len(_SENTINELS)} symbolic dims")
    sentinels = dict(zip(symbols, _SENTINELS))
    sizes = _symbolic_sizes(nodes, set(symbols), sentinels)
    module = lower(_Sizes(sentinels))
    text = _dynamic_text(str(module), symbols, sizes)
    user_count = len(user_nodes)

    def specialize(user_inputs):
        sizes = {}
        for sym, (arg, dim) in symbols.items():
            index = arg - (len(inputs) - user_count)
            sizes[sym] = int(user_inputs[index].shape[dim])
        return lower(_Sizes(sizes))

    kept = weights == "arguments"
    return ExportedStableHLO(module, [n.name for n in weight_nodes] if kept else [],
                             [values[n.name] for n in weight_nodes] if kept else [],
                             dynamic_text=text, specialize=specialize)


# Stand-in sizes of symbolic dims while lowering the ``?`` program: primes no model uses, so
# every place a symbolic size lands in the text can be found (and checked) afterwards.
_SENTINELS = (9973, 9967, 9949, 9941, 9931, 9929, 9923, 9907)


class _Sizes:
    """SymInt -> int under the given symbol values (plain values pass through)."""

    def __init__(self, sizes: dict):
        self.sizes = sizes

    def __call__(self, x):
        if not isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return x
        value = sympy.sympify(x.node.expr).xreplace(self.sizes)
        kind = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}[type(x)]
        return kind(value)


def _input_symbols(inputs) -> dict:
    """Each size symbol of the inputs -> (argument index, dim) where it first appears."""
    symbols = {}
    for i, node in enumerate(inputs):
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            continue
        for dim, size in enumerate(val.shape):
            if isinstance(size, torch.SymInt):
                expr = sympy.sympify(size.node.expr)
                if expr.is_Symbol:
                    symbols.setdefault(expr, (i, dim))
    return symbols


def _symbolic_sizes(nodes, symbols: set, sentinels: dict) -> dict:
    """The value at the sentinel sizes (as printed) -> the sympy expression of every symbolic
    size in the graph: symbols, and sums and products of symbols and integers."""
    sizes = {}
    for node in nodes:
        vals = node.meta.get("val")
        for val in vals if isinstance(vals, (tuple, list)) else [vals]:
            dims = val.shape if isinstance(val, torch.Tensor) else (
                [val] if isinstance(val, torch.SymInt) else [])
            for size in dims:
                if not isinstance(size, torch.SymInt):
                    continue
                expr = sympy.sympify(size.node.expr)
                if not _supported_expr(expr, symbols):
                    raise ExportError(
                        f"export_to_stablehlo: node {node.name} ({node.target}) has the size "
                        f"{expr}: with dynamic_shapes, sizes must be symbols of the inputs or "
                        f"sums and products of them and integers")
                value = str(int(expr.xreplace(sentinels)))
                if sizes.setdefault(value, expr) != expr:
                    raise ExportError(f"export_to_stablehlo: sizes {expr} and {sizes[value]} "
                                      f"coincide at the stand-in sizes; cannot export")
    for sym, sentinel in sentinels.items():
        sizes[str(sentinel)] = sym
    return sizes


def _supported_expr(expr, symbols: set) -> bool:
    if expr.is_Integer:
        return True
    if expr.is_Symbol:
        return expr in symbols
    if isinstance(expr, (sympy.Add, sympy.Mul)):
        return all(_supported_expr(a, symbols) for a in expr.args)
    return False


_TYPE_DIM = r"(?<=[<x]){}(?=x)"
_BROADCAST = re.compile(r"^(\s*)(%[\w.]+) = stablehlo\.broadcast_in_dim (%[\w.#]+), "
                        r"dims = \[([\d, ]*)\] : \((tensor<[^>]*>)\) -> tensor<([^>]*)>$")


_RESHAPE = re.compile(r"^(\s*)(%[\w.]+) = stablehlo\.reshape (%[\w.#]+) : "
                      r"\((tensor<[^>]*>)\) -> tensor<([^>]*)>$")


_SLICE = re.compile(r"^(\s*)(%[\w.]+) = stablehlo\.slice (%[\w.#]+) \[([^\]]*)\] : "
                    r"\((tensor<[^>]*>)\) -> tensor<([^>]*)>$")


_SCALAR = re.compile(r"^(\s*)(%[\w.]+) = stablehlo\.constant dense<(\d+)> : "
                     r"tensor<(i64|i32|f32|f64)>$")
_IOTA = re.compile(r"^(\s*)(%[\w.]+) = stablehlo\.iota dim = (\d+) : tensor<([^>]*)>$")


def _dynamic_text(text: str, where: dict, sizes: dict) -> str:
    """The statically lowered ``text`` (symbolic dims at their sentinel sizes) with those dims
    as ``?``: broadcasts, reshapes and slices with symbolic sizes become
    ``dynamic_broadcast_in_dim``, ``dynamic_reshape``, ``real_dynamic_slice`` and
    ``dynamic_iota`` of sizes read from the arguments, and scalar constants equal to a
    symbolic size become that size (``get_dimension_size``), defined at the top of the function."""
    lines, out = text.splitlines(), []
    prologue_done = False
    emitted: dict = {}  # expression -> the name of its tensor<1xi64> value

    def emit(indent, expr) -> str:
        """Lines computing ``expr`` (a symbol size, sum, product) as tensor<1xi64>."""
        if expr in emitted:
            return emitted[expr]
        if expr.is_Symbol:
            return f"%openhlo_dim_{expr}"
        operands = [] if expr.is_Integer else [emit(indent, a) for a in expr.args]
        name = f"%openhlo_size_{len(emitted)}"
        if expr.is_Integer:
            out.append(f"{indent}{name} = stablehlo.constant dense<{int(expr)}> : "
                       f"tensor<1xi64>")
        else:
            op = "stablehlo.add" if isinstance(expr, sympy.Add) else "stablehlo.multiply"
            first, *rest = operands
            for k, other in enumerate(rest):
                step = name if k == len(rest) - 1 else f"{name}_{k}"
                out.append(f"{indent}{step} = {op} {first}, {other} : tensor<1xi64>")
                first = step
        emitted[expr] = name
        return name

    def vector(indent, name, items) -> str:
        """Lines building a tensor<Nxi64> of ``items`` (printed sizes); its name."""
        parts = []
        for k, d in enumerate(items):
            if d in sizes:
                parts.append(emit(indent, sizes[d]))
            else:
                part = f"{name}_{k}"
                out.append(f"{indent}{part} = stablehlo.constant dense<{d}> : tensor<1xi64>")
                parts.append(part)
        types = ", ".join(["tensor<1xi64>"] * len(parts))
        out.append(f'{indent}{name} = "stablehlo.concatenate"({", ".join(parts)}) '
                   f'<{{dimension = 0 : i64}}> : ({types}) -> tensor<{len(items)}xi64>')
        return name

    def shape_operand(indent, result, result_dims) -> str:
        """Lines building the i64 shape of ``tensor<result_dims>``; the operand's name."""
        return vector(indent, f"%openhlo_shape_{result[1:]}", result_dims.split("x")[:-1])

    def symbolic(dims: str) -> bool:
        return any(d in sizes for d in dims.split("x")[:-1])

    for line in lines:
        m = _BROADCAST.match(line)
        if m and symbolic(m.group(6)):
            indent, result, operand, dims, operand_type, result_dims = m.groups()
            shape_name = shape_operand(indent, result, result_dims)
            rank = len(result_dims.split("x")) - 1
            dims_attr = f"array<i64: {dims}>" if dims.strip() else "array<i64>"
            out.append(f'{indent}{result} = "stablehlo.dynamic_broadcast_in_dim"({operand}, '
                       f'{shape_name}) <{{broadcast_dimensions = {dims_attr}}}> : '
                       f'({operand_type}, tensor<{rank}xi64>) -> tensor<{result_dims}>')
            continue
        m = _SLICE.match(line)
        if m and any(b in sizes for b in re.split(r"[:, ]+", m.group(4))):
            indent, result, operand, bounds, operand_type, result_dims = m.groups()
            triples = [b.strip().split(":") for b in bounds.split(",")]
            starts = [t[0] for t in triples]
            limits = [t[1] for t in triples]
            strides = [t[2] if len(t) > 2 else "1" for t in triples]
            names = [vector(indent, f"%openhlo_{kind}_{result[1:]}", items)
                     for kind, items in (("start", starts), ("limit", limits),
                                         ("stride", strides))]
            vtype = f"tensor<{len(triples)}xi64>"
            out.append(f'{indent}{result} = "stablehlo.real_dynamic_slice"({operand}, '
                       f'{", ".join(names)}) : ({operand_type}, {vtype}, {vtype}, {vtype}) '
                       f'-> tensor<{result_dims}>')
            continue
        m = _SCALAR.match(line)
        if m and m.group(3) in sizes:
            indent, result, value, element = m.groups()
            size = emit(indent, sizes[value])
            if element == "i64":
                out.append(f'{indent}{result} = "stablehlo.reshape"({size}) : '
                           f'(tensor<1xi64>) -> tensor<i64>')
            else:
                out.append(f'{indent}{result}_i64 = "stablehlo.reshape"({size}) : '
                           f'(tensor<1xi64>) -> tensor<i64>')
                out.append(f'{indent}{result} = "stablehlo.convert"({result}_i64) : '
                           f'(tensor<i64>) -> tensor<{element}>')
            continue
        m = _IOTA.match(line)
        if m and symbolic(m.group(4)):
            indent, result, dim, result_dims = m.groups()
            shape_name = shape_operand(indent, result, result_dims)
            rank = len(result_dims.split("x")) - 1
            out.append(f'{indent}{result} = "stablehlo.dynamic_iota"({shape_name}) '
                       f'<{{iota_dimension = {dim} : i64}}> : (tensor<{rank}xi64>) -> '
                       f'tensor<{result_dims}>')
            continue
        m = _RESHAPE.match(line)
        if m and symbolic(m.group(5)):
            indent, result, operand, operand_type, result_dims = m.groups()
            shape_name = shape_operand(indent, result, result_dims)
            rank = len(result_dims.split("x")) - 1
            out.append(f'{indent}{result} = "stablehlo.dynamic_reshape"({operand}, '
                       f'{shape_name}) : ({operand_type}, tensor<{rank}xi64>) -> '
                       f'tensor<{result_dims}>')
            continue
        out.append(line)
        if not prologue_done and line.lstrip().startswith("func.func"):
            prologue_done = True
            indent = " " * (len(line) - len(line.lstrip()) + 2)
            arg_types = re.findall(r"(%arg\d+): (tensor<[^>]*>)", line)
            for sym, (arg, dim) in where.items():
                name, type_ = arg_types[arg]
                v = f"%openhlo_dim_{sym}"
                out.append(f'{indent}{v}_i32 = "stablehlo.get_dimension_size"({name}) '
                           f'<{{dimension = {dim} : i64}}> : ({type_}) -> tensor<i32>')
                out.append(f'{indent}{v}_i64 = "stablehlo.convert"({v}_i32) : '
                           f'(tensor<i32>) -> tensor<i64>')
                out.append(f'{indent}{v} = "stablehlo.reshape"({v}_i64) : '
                           f'(tensor<i64>) -> tensor<1xi64>')
            for expr in sizes.values():
                emit(indent, expr)
    text = "\n".join(out) + "\n"
    for value in sizes:
        text = re.sub(_TYPE_DIM.format(value), "?", text)
    for value in sizes:
        leftover = re.search(rf"^.*\b{value}\b.*$", text, re.MULTILINE)
        if leftover:
            raise ExportError(f"export_to_stablehlo: a symbolic size is used where only a "
                              f"static one can be (dynamic_shapes): {leftover.group(0).strip()}")
    return text


def _weight_values(ep) -> dict:
    """placeholder name -> numpy value, for parameters, buffers and tensor constants."""
    values = {}
    for spec in ep.graph_signature.input_specs:
        if spec.target is None:
            continue
        if spec.target in ep.state_dict:
            tensor = ep.state_dict[spec.target]
        elif spec.target in ep.constants:
            tensor = ep.constants[spec.target]
        else:
            continue
        if isinstance(tensor, torch.Tensor):
            values[spec.arg.name] = np.array(to_numpy(tensor))
    return values
