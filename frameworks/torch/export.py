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
``({0: torch.export.Dim("batch")},)``); symbolic dims are dynamic (``?``) in the module. The
graph is lowered once with each symbol at a stand-in prime size, then the Module is
rewritten (frameworks/torch/dynamic_dims.py) to read every size from the arguments at run
time: ``get_dimension_size`` in the prologue, sums and products of sizes, and
``dynamic_broadcast_in_dim``, ``dynamic_reshape``, ``real_dynamic_slice``, ``dynamic_iota``
and size-valued scalars in the body. The text verifies in upstream MLIR and XLA runs it after
shape refinement (as JAX runs its shape-polymorphic exports). Our cpu backend compiles static
programs, so ``run`` lowers the same graph once per concrete input shape (cached). Sizes must
be input symbols or sums and products of them and integers (a flattened ``4 * batch`` is
fine; a pooling's floor division is an ``ExportError``), and a symbolic size in any other
attribute is an ``ExportError`` naming the op.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import sympy
import torch

from frameworks.torch.dynamic_dims import SymbolicSizeError, make_dynamic
from frameworks.torch.lowering import LOWERINGS, LoweringFailed, lower_nodes
from frameworks.torch.lowering.dtypes import from_numpy, to_numpy
from frameworks.torch.lowering.graph import tensor_type
from stablehlo.ir.core import Module


class ExportError(Exception):
    """The model cannot be exported to StableHLO; the message names the op and node."""


@dataclass
class ExportedStableHLO:
    module: Module                    # symbolic dims are ``?`` (dynamic_shapes given)
    weight_names: list = field(default_factory=list)
    weights: list = field(default_factory=list)  # numpy arrays when weights="arguments"
    specialize: object = None         # inputs -> static Module for their shapes (dynamic)
    _executables: dict = field(default_factory=dict)

    @property
    def text(self) -> str:
        return str(self.module)

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
    _composites_inlined(module, name)
    try:
        make_dynamic(module, name, symbols, sizes)
    except SymbolicSizeError as exc:
        raise ExportError(f"export_to_stablehlo: {exc} (dynamic_shapes)") from None
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
                             specialize=specialize)


def _composites_inlined(module, name: str) -> None:
    """Each composite of ``name`` (the attention a lowering rule built) replaced by its
    decomposition's ops: ``make_dynamic`` rewrites one function's sizes, and a decomposition
    function left at the stand-in sizes would disagree with its ``?`` operands."""
    from pjrt.plugins.compiler_services import run_passes
    from stablehlo.ir.attributes import SymbolRefAttr
    found = False
    for op in module.lookup(name).walk():
        if op.name == "stablehlo.composite":
            callee = op.attr("decomposition").name
            op.name = "func.call"
            op.attributes = {"callee": SymbolRefAttr(callee)}
            found = True
    if found:
        run_passes(module, "inline")


# Stand-in sizes of symbolic dims while lowering the ``?`` program: primes no model uses, so
# every place a symbolic size lands in the module can be found (and checked) afterwards.
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
    """The value at the sentinel sizes -> the sympy expression of every symbolic
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
                value = int(expr.xreplace(sentinels))
                if sizes.setdefault(value, expr) != expr:
                    raise ExportError(f"export_to_stablehlo: sizes {expr} and {sizes[value]} "
                                      f"coincide at the stand-in sizes; cannot export")
    for sym, sentinel in sentinels.items():
        sizes[sentinel] = sym
    return sizes


def _supported_expr(expr, symbols: set) -> bool:
    if expr.is_Integer:
        return True
    if expr.is_Symbol:
        return expr in symbols
    if isinstance(expr, (sympy.Add, sympy.Mul)):
        return all(_supported_expr(a, symbols) for a in expr.args)
    return False


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
