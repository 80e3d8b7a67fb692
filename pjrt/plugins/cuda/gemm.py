"""A ``dot_general`` as strided-batched row-major GEMM steps of the executable.

The operand layouts are the output template's (xla_core/codegen/output.py,
``operand_layout``: free and contracting dims each one strided run, one of them unit
stride), and the three element types one of the GEMM types cuBLAS takes here (f32, f16,
bf16). The batch dims that form one strided run in each operand (the longest such suffix)
are the GEMM's batch, one stride per operand; each index of the batch dims before them is a
step of its own (attention's [B, S, H, D] with batch dims (B, H): B steps of H GEMMs). The
result's dims are batch, lhs free, rhs free, so C is ``[batch, m, n]`` contiguous.
"""
from __future__ import annotations

import numpy as np

from stablehlo.ir.core import Operation
from xla_core.codegen import NotGeneratable
from xla_core.codegen.attrs import attr
from xla_core.codegen.cuda import CUDA
from xla_core.codegen.index import strides
from xla_core.codegen.kernel import size
from xla_core.codegen.output import operand_layout

GEMM_TYPES = ("f32", "f16", "bf16")


def gemm_steps(dot: Operation, a, b, c) -> list[dict]:
    """The steps computing ``dot`` from buffers ``a``, ``b`` into ``c`` (buffer references
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
    # The longest suffix of the batch dims that is one strided run in both operands is the
    # GEMM's batch; the dims before it are a step each.
    cut = next(i for i in range(len(lb) + 1)
               if _batch_stride(lshape, lb[i:]) is not None and
               _batch_stride(rshape, rb[i:]) is not None)
    batch = size([lshape[d] for d in lb[cut:]])
    step = gemm_step(elem, m=m, n=n, k=size([lshape[d] for d in lcd]), a=a, lda=lda,
                     trans_a=trans_a, b=b, ldb=ldb, trans_b=trans_b, c=c, ldc=n, batch=batch,
                     stride_a=_batch_stride(lshape, lb[cut:]),
                     stride_b=_batch_stride(rshape, rb[cut:]), stride_c=m * n)
    itemsize = 4 if elem == "f32" else 2
    lst, rst = strides(lshape), strides(rshape)
    steps = []
    for flat, index in enumerate(np.ndindex(*[lshape[d] for d in lb[:cut]])):
        a_at = sum(i * lst[d] for i, d in zip(index, lb))
        b_at = sum(i * rst[d] for i, d in zip(index, rb))
        steps.append({**step, "a": offset(a, a_at * itemsize), "b": offset(b, b_at * itemsize),
                      "c": offset(c, flat * batch * m * n * itemsize)})
    return steps


def gemm_step(dtype: str, *, m: int, n: int, k: int, a, lda: int, trans_a: int, b, ldb: int,
              trans_b: int, c, ldc: int, batch: int = 1, stride_a: int = 0,
              stride_b: int = 0, stride_c: int = 0) -> dict:
    """One ``gemm`` step: ``c[m, n] = op(a)[m, k] op(b)[k, n]`` per batch element, row-major,
    leading dimensions and batch strides in elements (README.md)."""
    return {"op": "gemm", "dtype": dtype, "m": int(m), "n": int(n), "k": int(k),
            "batch": int(batch), "trans_a": int(trans_a), "trans_b": int(trans_b), "a": a,
            "b": b, "c": c, "lda": int(lda), "ldb": int(ldb), "ldc": int(ldc),
            "stride_a": int(stride_a), "stride_b": int(stride_b), "stride_c": int(stride_c)}


def offset(ref, nbytes: int):
    """The buffer reference ``nbytes`` after ``ref`` (an id or ``{"id", "offset"}``)."""
    if nbytes == 0:
        return ref
    if isinstance(ref, int):
        return {"id": ref, "offset": nbytes}
    return {"id": ref["id"], "offset": ref["offset"] + nbytes}


def _batch_stride(shape: list, dims: list) -> int | None:
    """Elements between consecutive batch elements of an operand whose batch ``dims``
    (in order) are one strided run (0: one batch element), or None when they are not."""
    st = strides(shape)
    kept = [d for d in dims if shape[d] != 1]
    for outer, inner in zip(kept, kept[1:]):
        if st[outer] != st[inner] * shape[inner]:
            return None
    return st[kept[-1]] if kept else 0
