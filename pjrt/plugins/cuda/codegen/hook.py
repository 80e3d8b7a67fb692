"""The cuda backend's fusion hook: which ops and kinds its generated kernels can hold.

Loop and reduction fusions become kernels (target.py); a ``dot_general`` never joins a fusion,
so it stays a library call (a ``gemm`` step of the executable) with the fusions around it
generated; output fusions (a dot with its epilogue) are not formed. The per-op answers come
from the CUDA renderer itself (``why_not``) and the reduction template's ``why_not_reduce``.
"""
from __future__ import annotations

from stablehlo.ir.core import Operation
from xla_core.codegen.body import MAX_CONSTANT
from xla_core.codegen.fusion_hook import RenderedKernelsHook
from xla_core.fusion.kinds import FusionKind
from xla_core.fusion.outline import is_small_constant

from pjrt.plugins.cuda.codegen.target import CUDA_TARGET

KINDS = {"loop": "elementwise", "reduction": "reduction"}  # fusion kind -> kernel kind


class CudaCodegen(RenderedKernelsHook):
    def __init__(self):
        super().__init__("cuda", CUDA_TARGET.renderer)

    def why_not_op(self, op: Operation) -> str | None:
        reason = self.why_not_rendered(op)
        if reason is not None:
            return reason
        if op.name == "stablehlo.dot_general":
            return "dots are cuBLAS calls on the cuda backend"
        if op.name == "stablehlo.constant" and not is_small_constant(op) and \
                op.results[0].type.num_elements > MAX_CONSTANT:
            return f"a constant of more than {MAX_CONSTANT} elements stays out of fusions"
        return None

    def why_not_kind(self, kind: FusionKind, summary) -> str | None:
        if kind.name not in KINDS:
            return f"the cuda code generator has no template for {kind.name} fusions"
        return None


CUDA_CODEGEN = CudaCodegen()
