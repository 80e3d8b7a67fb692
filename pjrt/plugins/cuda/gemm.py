"""A ``dot_general`` as one (strided batched) row-major GEMM step of the executable.

The operand layouts are the output template's (xla_core/codegen/output.py,
``operand_layout``: free and contracting dims each one strided run, one of them unit
stride); on top, the batch dims of each operand must be one strided run too (one stride per
operand: a strided-batched GEMM), and the three element types one of the GEMM types
cuBLAS takes here (f32, f16, bf16). The result's dims are batch, lhs free, rhs free, so C is
``[batch, m, n]`` contiguous.
"""
from __future__ import annotations

from stablehlo.ir.core import Operation
from xla_core.codegen import NotGeneratable
from xla_core.codegen.attrs import attr
from xla_core.codegen.cuda import CUDA
from xla_core.codegen.index import strides
from xla_core.codegen.kernel import size
from xla_core.codegen.output import operand_layout

GEMM_TYPES = ("f32", "f16", "bf16")


def gemm_step(dot: Operation, a, b, c) -> dict:
    """The step computing ``dot`` from buffers ``a``, ``b`` into ``c`` (buffer references
    as the executable writes them); NotGeneratable when it is no such GEMM."""
    lhs, rhs = dot.operands
    elem = CUDA.elem(dot.results[0].type)
    if elem not in GEMM_TYPES or CUDA.elem(lhs.type) != elem or CUDA.elem(rhs.type) != elem:
        raise NotGeneratable(f"a GEMM of {lhs.type} x {rhs.type} -> {dot.results[0].type}")
    dn = attr(dot, "dot_dimension_numbers")
    lb = list(dn.get("lhs_batching_dimensions", []))
    rb = list(dn.get("rhs_batching_dimensions", []))
    lcd = list(dn["lhs_contracting_dimensions"])
    rcd = list(dn["rhs_contracting_dimensions"])
    lshape, rshape = list(lhs.type.shape), list(rhs.type.shape)
    trans_a, lda, _, m = operand_layout(lshape, lb, lcd, True)
    trans_b, ldb, _, n = operand_layout(rshape, rb, rcd, False)
    return {"op": "gemm", "dtype": elem, "m": m, "n": n, "k": size([lshape[d] for d in lcd]),
            "batch": size([lshape[d] for d in lb]), "trans_a": trans_a, "trans_b": trans_b,
            "a": a, "b": b, "c": c, "lda": lda, "ldb": ldb, "ldc": n,
            "stride_a": _batch_stride(lshape, lb), "stride_b": _batch_stride(rshape, rb),
            "stride_c": m * n}


def _batch_stride(shape: list, dims: list) -> int:
    """Elements between consecutive batch elements of an operand whose batch ``dims``
    (in order) are one strided run."""
    st = strides(shape)
    kept = [d for d in dims if shape[d] != 1]
    for outer, inner in zip(kept, kept[1:]):
        if st[outer] != st[inner] * shape[inner]:
            raise NotGeneratable(f"batch dimensions {dims} of {shape} are not one strided run")
    return st[kept[-1]] if kept else 0
