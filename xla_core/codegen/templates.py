"""The kernel template of each fusion kind and of a while loop, and the text of one
fusion's kernel.

``TEMPLATES`` maps a fusion kind's name (xla_core/fusion/kinds.py) to the function that
writes its kernel, and ``while`` to the template of a whole loop (while_loop.py, which
calls the others' kernels); ``fusion_kernel`` finds a fusion's decomposition and runs its
kind's template for a backend's ``KernelTarget``.
"""
from __future__ import annotations

from stablehlo.ir.core import Module, Operation
from stablehlo.registry import Registry

from xla_core.codegen.kernel import Kernel
from xla_core.codegen.scalar import NotGeneratable
from xla_core.codegen.target import KernelTarget
from xla_core.fusion.kinds import kind_of_fusion

TEMPLATES: Registry = Registry("kernel template")
TEMPLATES.register("loop", "xla_core.codegen.loop:loop_kernel")
TEMPLATES.register("reduction", "xla_core.codegen.reduction:reduction_kernel")
TEMPLATES.register("output", "xla_core.codegen.output:output_kernel")
TEMPLATES.register("while", "xla_core.codegen.while_loop:while_kernel")


def fusion_kernel(op: Operation, module: Module, target: KernelTarget) -> tuple[str, set, list]:
    """(kernel text with ``SYMBOL`` for its name, math library names it uses, file-scope
    definitions) of the fusion composite ``op``."""
    kind = kind_of_fusion(op)
    if kind is None or kind.name not in TEMPLATES:
        raise NotGeneratable(f"fusion kind {getattr(kind, 'name', None)!r}")
    func = module.lookup(op.attributes["decomposition"].name)
    if func is None or len(func.body.operations) < 1:
        raise NotGeneratable("no decomposition")
    for inner in func.body.operations:
        if inner.name == "stablehlo.reduce":
            continue
        if inner.regions or inner.name == "func.call":
            raise NotGeneratable(f"{inner.name} inside a fusion")
    kernel = Kernel(op, func, target)
    text = TEMPLATES.get(kind.name)(kernel)
    return text, kernel.math, kernel.globals
