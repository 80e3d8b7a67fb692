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
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

from stablehlo.ir.core import Module

from frameworks.torch.lowering import LOWERINGS, LoweringFailed, lower_nodes
from frameworks.torch.lowering.dtypes import from_numpy, to_numpy
from frameworks.torch.lowering.graph import tensor_type


class ExportError(Exception):
    """The model cannot be exported to StableHLO; the message names the op and node."""


@dataclass
class ExportedStableHLO:
    module: Module
    weight_names: list = field(default_factory=list)
    weights: list = field(default_factory=list)  # numpy arrays when weights="arguments"

    @property
    def text(self) -> str:
        return str(self.module)

    def run(self, *inputs: torch.Tensor, backend: str = "cpu") -> list:
        """Compile on ``backend`` and run on ``inputs`` (weights are passed for you)."""
        import pjrt
        executable = pjrt.make_client(backend).compile(self.module)
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
    if dynamic_shapes is not None:
        raise NotImplementedError("export_to_stablehlo: dynamic_shapes (symbolic dims) are not "
                                  "supported yet; export with static example shapes")
    ep = torch.export.export(model, tuple(example_args))
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
    same = lambda x: x  # noqa: E731 - static shapes: sizes are plain ints
    try:
        module = lower_nodes(nodes, inputs, [tensor_type(n.meta["val"], same) for n in inputs],
                             outputs, {}, same, name=name, constants=constants)
    except LoweringFailed as exc:
        raise ExportError(f"export_to_stablehlo: {exc}") from exc
    if weights == "constants":
        return ExportedStableHLO(module)
    return ExportedStableHLO(module, [n.name for n in weight_nodes],
                             [values[n.name] for n in weight_nodes])


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
