"""Lower a run of ATen FX nodes into one StableHLO function.

The caller (the torch.compile backend, or export) decides which nodes to lower and what
the function's parameters and results are; this module only walks the nodes in order,
calls each node's rule from ``LOWERINGS`` and checks what it built against the node's
FakeTensor. A node that cannot be lowered raises ``LoweringFailed`` naming the node, its
op and the reason, so the caller can run it eagerly instead (or report it, for export).
"""
from __future__ import annotations

import operator
from typing import Callable, Sequence

import torch
from torch.fx.node import map_aggregate

from stablehlo.builder import Builder
from stablehlo.ir.core import Module, Value
from stablehlo.ir.types import I64, TensorType

from frameworks.torch.lowering.context import LoweringContext
from frameworks.torch.lowering.data_dependent import mask_padding
from frameworks.torch.lowering.dtypes import element_type
from frameworks.torch.lowering.registry import LOWERINGS, Unsupported


class LoweringFailed(Exception):
    def __init__(self, node: torch.fx.Node, reason: str):
        super().__init__(f"cannot lower node '{node.name}' ({op_name(node)}): {reason}")
        self.node = node
        self.reason = reason


def op_name(node: torch.fx.Node) -> str:
    target = node.target
    return str(target) if isinstance(target, torch._ops.OpOverload) else getattr(
        target, "__name__", str(target))


def tensor_type(val, concrete: Callable) -> TensorType:
    """The StableHLO type of a FakeTensor, symbolic sizes replaced by their values."""
    return TensorType(tuple(int(concrete(d)) for d in val.shape), element_type(val.dtype))


_aten = torch.ops.aten
# Ops left to eager PyTorch on purpose (frameworks/torch/README.md), by packet, with why;
# seeded random ops are recognised by their tag (eager_by_design). Any other op without a
# rule is a missing lowering.
_EAGER_BY_DESIGN = {
    _aten._local_scalar_dense: "it makes a Python scalar for the eager side",
    _aten._fft_r2c: "its result is complex",
    _aten._fft_c2r: "it takes a complex tensor",
    _aten.resize_: "it resizes its argument in place",
    _aten.polygamma: ("the backends' chlo.polygamma disagrees with torch for negative "
                      "arguments"),
}


def eager_by_design(op: torch._ops.OpOverload) -> str | None:
    """Why ``op`` runs in eager PyTorch on purpose, or None if it would be lowered if it
    had a rule."""
    if torch.Tag.nondeterministic_seeded in op.tags:
        return "by design: a random op (its values must come from eager's generator)"
    reason = _EAGER_BY_DESIGN.get(op.overloadpacket)
    return None if reason is None else f"by design: {reason}"


def can_lower(node: torch.fx.Node) -> str | None:
    """None if ``node`` has a rule, else why not (a cheap check made before lowering)."""
    if node.target is operator.getitem:
        return None
    if not isinstance(node.target, torch._ops.OpOverload):
        return f"{op_name(node)} is not an ATen op"
    if node.target not in LOWERINGS:
        return eager_by_design(node.target) or "no lowering registered"
    for used in [node, *node.all_input_nodes]:
        vals = used.meta.get("val")
        for val in vals if isinstance(vals, (tuple, list)) else [vals]:
            if isinstance(val, torch.Tensor):
                try:
                    element_type(val.dtype)
                except Unsupported as exc:
                    return str(exc)
    return None


def lower_nodes(nodes: Sequence[torch.fx.Node], inputs: Sequence[torch.fx.Node],
                input_types: Sequence[TensorType], outputs: Sequence[torch.fx.Node],
                known: dict, concrete: Callable, *, name: str = "main",
                constants: dict | None = None, runtime_sizes: dict | None = None,
                size_inputs: Sequence = (), input_orders: Sequence | None = None,
                output_orders: Sequence | None = None) -> Module:
    """A module whose function ``name`` takes ``inputs`` (tensor nodes computed elsewhere,
    of ``input_types``) and returns ``outputs``. ``known`` maps nodes with Python values
    (symbolic sizes) to those values; ``constants`` maps tensor nodes to numpy arrays that
    become ``stablehlo.constant``s. Given an empty dict ``runtime_sizes``, data-dependent
    sizes are allowed: the rules fill it (symbol -> count) and the function returns the
    counts after ``outputs``, in its order (data_dependent.py). ``size_inputs`` are size
    symbols whose real values the function takes as ``tensor<i64>`` after ``inputs``
    (padded sizes, for masking: they go in ``runtime_sizes`` too, and are not returned).
    ``input_orders``/``output_orders`` (None, or an order of dims or None per input/output):
    that input arrives, that output is returned, with its dims in that order, as
    ``input_types`` already give them (Note [Permuted layouts], permuted_layouts.py)."""
    b = Builder()
    b.record_locations = False  # the builder's caller would be this file, not the model
    arg_types = [*input_types, *[TensorType((), I64)] * len(size_inputs)]
    env = dict(known)
    facts: dict = {}  # shared by the rules of this program (LoweringContext.facts)
    with b.function(name, arg_types) as (_, args):
        for node, arg, order in zip(inputs, args, input_orders or [None] * len(inputs)):
            env[node] = arg if order is None else _permuted(b, arg, _inverse(order))
        if size_inputs:
            runtime_sizes.update(zip(size_inputs, args[len(inputs):]))
        for node, array in (constants or {}).items():
            env[node] = b.constant(array, element_type(node.meta["val"].dtype))
        for node in nodes:
            env[node] = _lower_node(b, node, env, concrete, facts, runtime_sizes)
        results = [env[n] for n in outputs]
        for node, value in zip(outputs, results):
            if not isinstance(value, Value):
                raise LoweringFailed(node, "its result is not a single tensor")
        results = [v if order is None else _permuted(b, v, order)
                   for v, order in zip(results, output_orders or [None] * len(results))]
        counts = [v for s, v in (runtime_sizes or {}).items() if s not in size_inputs]
        b.return_(*results, *counts)
    return b.module


def _inverse(order: tuple) -> tuple:
    return tuple(sorted(range(len(order)), key=order.__getitem__))


def _permuted(b: Builder, x: Value, order: tuple) -> Value:
    """``x`` with its dims in ``order`` (no op for the identity: a layout that differs from
    row-major only in the strides of dims of one element)."""
    return x if order == tuple(range(len(order))) else b.transpose(x, order)


def _lower_node(b: Builder, node: torch.fx.Node, env: dict, concrete: Callable, facts: dict,
                runtime_sizes: dict | None):
    args = map_aggregate(node.args, lambda a: env[a] if isinstance(a, torch.fx.Node) else a)
    kwargs = map_aggregate(node.kwargs,
                           lambda a: env[a] if isinstance(a, torch.fx.Node) else a)
    if node.target is operator.getitem:
        return args[0][args[1]]
    reason = can_lower(node)
    if reason is not None:
        raise LoweringFailed(node, reason)
    ctx = LoweringContext(b, node, concrete, facts, runtime_sizes)
    try:
        args, finish = mask_padding(ctx, args)
        result = LOWERINGS.get(node.target)(ctx, *args, **kwargs)
        if finish is not None:
            result = finish(result)
    except Unsupported as exc:
        raise LoweringFailed(node, str(exc)) from exc
    except LoweringFailed:
        raise
    except Exception as exc:  # a rule's bug must not take the model down; it is reported
        raise LoweringFailed(node, f"{type(exc).__name__}: {exc}") from exc
    _check_result(node, result, concrete)
    return result


def _check_result(node: torch.fx.Node, result, concrete: Callable) -> None:
    """What a rule built must have the node's shape and dtype: a mismatch is a rule bug
    that would otherwise give silently wrong results further down."""
    val = node.meta.get("val")
    pairs = zip(val, result) if isinstance(val, (tuple, list)) else [(val, result)]
    for i, (v, r) in enumerate(pairs):
        if not isinstance(v, torch.Tensor):
            continue
        expected = tensor_type(v, concrete)
        if not isinstance(r, Value) or r.type != expected:
            got = r.type if isinstance(r, Value) else type(r).__name__
            raise LoweringFailed(node, f"rule built {got} for result {i}, torch says {expected}")
