"""How the core ATen opset is covered: each op is *lowered* (a rule in ``LOWERINGS``),
*decomposed* (the backend's decomposition table rewrites it into other core ops before
lowering) or a *fallback* (it runs in eager PyTorch). ``tools/torch_coverage.py`` prints it.
"""
from __future__ import annotations

import torch

from frameworks.torch.backend import decompositions
from frameworks.torch.lowering import LOWERINGS


def core_aten_ops() -> list:
    """Every ATen OpOverload tagged ``core``, sorted by name."""
    ops = []
    for schema in torch._C._jit_get_all_schemas():
        if not schema.name.startswith("aten::"):
            continue
        packet = getattr(torch.ops.aten, schema.name[len("aten::"):])
        overload = getattr(packet, schema.overload_name or "default")
        if torch.Tag.core in overload.tags:
            ops.append(overload)
    return sorted(set(ops), key=str)


def classify() -> dict:
    """``{op name: "lowered" | "decomposed" | "fallback"}`` for every core ATen op."""
    table = decompositions()
    result = {}
    for op in core_aten_ops():
        if op in LOWERINGS:
            result[str(op)] = "lowered"
        elif op in table:
            result[str(op)] = "decomposed"
        else:
            result[str(op)] = "fallback"
    return result
