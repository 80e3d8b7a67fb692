"""The cpu backend's fusion hook: which ops and kinds its generated kernels can hold.

Fusion asks it (xla_core/fusion/codegen_hook.py), so every fusion the cpu pipeline forms has a
kernel: an op the C++ renderer cannot compute (an f16 or complex value, a shift, an
integer division, a float -> integer conversion, a dot that is no strided GEMM, ...) stays out
of fusions and runs on its native kernel. The answers come from the generator itself (the
renderer's ``why_not``, the output template's ``gemm_layout``), not from a second list.
"""
from __future__ import annotations

import numpy as np

from stablehlo.ir.core import Operation
from xla_core.codegen import TEMPLATES, NotGeneratable
from xla_core.codegen.body import MAX_CONSTANT
from xla_core.codegen.output import gemm_layout
from xla_core.codegen.fusion_hook import RenderedKernelsHook
from xla_core.fusion.kinds import FusionKind

from pjrt.plugins.cpu.codegen.target import CPU_TARGET


class CpuCodegen(RenderedKernelsHook):
    def __init__(self):
        super().__init__("cpu", CPU_TARGET.renderer)

    def why_not_op(self, op: Operation) -> str | None:
        reason = self.why_not_rendered(op)
        if reason is not None:
            return reason
        if op.name == "stablehlo.dot_general":
            try:
                gemm_layout(self.renderer, op)
            except NotGeneratable as exc:
                return self.lacks(f"GEMM for it: {exc}")
        if op.name == "stablehlo.constant" and not _splat(op) and \
                op.results[0].type.num_elements > MAX_CONSTANT:
            return f"a constant of more than {MAX_CONSTANT} elements stays out of fusions"
        return None

    def why_not_kind(self, kind: FusionKind, summary) -> str | None:
        if kind.name not in TEMPLATES:
            return f"the cpu code generator has no template for {kind.name} fusions"
        return None


def _splat(op: Operation) -> bool:
    flat = np.asarray(op.attributes["value"].array).reshape(-1)
    return flat.size <= 1 or np.array_equal(flat, np.full_like(flat, flat[0]),
                                            equal_nan=flat.dtype.kind in "fc")


CPU_CODEGEN = CpuCodegen()
