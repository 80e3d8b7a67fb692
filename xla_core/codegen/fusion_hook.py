"""The part of a backend's fusion hook that its renderer answers.

A backend whose fusions become kernels written by these templates cannot put an op in a
fusion when its renderer cannot spell the op's element types, its elementwise computation or
its reduction's region. Those answers come from the renderer itself, so every such backend asks
the same questions here and adds only its own rules (GEMMs, constants, kinds) in its subclass.
"""
from __future__ import annotations

from stablehlo.ir.core import Operation
from stablehlo.ir.ops.base import ELEMENTWISE
from xla_core.codegen.reduction import why_not_reduce
from xla_core.codegen.scalar import NotGeneratable, ScalarRenderer
from xla_core.fusion.codegen_hook import CodegenHook


class RenderedKernelsHook(CodegenHook):
    """Refuses the ops ``renderer`` cannot write into a kernel of ``backend``'s."""

    def __init__(self, backend: str, renderer: ScalarRenderer):
        self.backend = backend
        self.renderer = renderer

    def why_not_rendered(self, op: Operation) -> str | None:
        """None when the renderer can write ``op`` (its types, its elementwise spelling, its
        reduction), else why not."""
        try:
            for v in (*op.operands, *op.results):
                self.renderer.elem(v.type)
        except NotGeneratable as exc:
            return self.lacks(exc)
        reason = None
        if op.opdef is not None and op.opdef.has(ELEMENTWISE):
            reason = self.renderer.why_not(op)
        elif op.name == "stablehlo.reduce":
            reason = why_not_reduce(self.renderer, op)
        return None if reason is None else self.lacks(reason)

    def lacks(self, what) -> str:
        return f"the {self.backend} code generator has no {what}"
