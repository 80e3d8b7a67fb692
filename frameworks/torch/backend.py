"""The ``openhlo`` torch.compile backend.

    torch.compile(model, backend="openhlo")      # found through the torch_dynamo_backends
                                                 # entry point; no import needed

Dynamo hands us a torch-level graph; AOTAutograd turns it into ATen graphs (one for
inference, or a forward and a backward for training) decomposed to the core ATen opset,
and each of those becomes a ``GraphRunner`` that lowers it to StableHLO and runs it on a
PJRT client (``OPENHLO_TORCH_BACKEND``, default ``cpu``). Ops without a lowering run in
eager PyTorch; see runner.py.
"""
from __future__ import annotations

import functools
import itertools
import os

import torch
from torch._decomp import core_aten_decompositions
from torch._dynamo.backends.common import aot_autograd

from pjrt import counters

from frameworks.torch.lowering import LOWERINGS
from frameworks.torch.runner import GraphRunner, describe_changes, logger

_graph_ids = itertools.count()


@functools.cache
def client():
    """The PJRT client every compiled graph of this process runs on."""
    import pjrt
    return pjrt.make_client(os.environ.get("OPENHLO_TORCH_BACKEND", "cpu"))


@functools.cache
def _core_table() -> dict:
    return dict(core_aten_decompositions())  # materializing it takes ~0.15 s: once


def decompositions() -> dict:
    """Core ATen decompositions, minus those of ops we lower whole (one StableHLO op or a
    short sequence is better than torch's generic expansion). Rules registered later count
    too: the filter runs on every call."""
    return {op: fn for op, fn in _core_table().items() if op not in LOWERINGS}


def _compiler(kind: str):
    def compile_graph(gm: torch.fx.GraphModule, example_inputs):
        # example_inputs are FakeTensors: compiling waits for the first real call.
        return GraphRunner(gm, client(), name=f"{kind}_{next(_graph_ids)}")
    return compile_graph


# Dynamo graph inputs (placeholder names) -> the input signature last compiled for them
_last_signatures: dict = {}


def _log_dynamo_recompile(gm: torch.fx.GraphModule, example_inputs) -> None:
    """Dynamo hands over a new graph when a guard fails (a new dtype, a dim turning dynamic,
    a changed Python value); say what changed for graphs with the same inputs as before."""
    key = tuple(n.target for n in gm.graph.nodes if n.op == "placeholder")
    signature = tuple((tuple(d if isinstance(d, int) else str(d) for d in a.shape), a.dtype)
                      if isinstance(a, torch.Tensor) else str(a) for a in example_inputs)
    previous = _last_signatures.get(key)
    _last_signatures[key] = signature
    if previous is not None and previous != signature:
        logger.info("openhlo: Dynamo recompiled a graph of inputs %s: %s", ", ".join(key),
                    describe_changes(previous, signature))


def _count_dynamo_recompile() -> None:
    """Dynamo numbers the graphs it traces from one frame (``frame_compile_id``): any but the
    first is the same code traced again because a guard failed."""
    from torch._guards import CompileContext
    compile_id = CompileContext.current_compile_id()
    if compile_id is not None and compile_id.frame_compile_id:
        counters.count_recompilation("torch: Dynamo traced the same code again")


def openhlo_backend(gm: torch.fx.GraphModule, example_inputs):
    """The Dynamo backend: ``torch.compile(model, backend=openhlo_backend)``."""
    _log_dynamo_recompile(gm, example_inputs)
    _count_dynamo_recompile()
    # A fresh AOTAutograd wrapper per graph: it rewrites its own options when called.
    aot = aot_autograd(fw_compiler=_compiler("forward"), bw_compiler=_compiler("backward"),
                        inference_compiler=_compiler("inference"),
                        decompositions=decompositions(),
                        keep_inference_input_mutations=False)
    return aot(gm, example_inputs)
