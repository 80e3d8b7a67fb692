"""``stablehlo.convolution`` on the cuda backend: an im2col kernel and a cuBLAS GEMM, or a
direct kernel (kind ``convolution`` in ptxas.json).

``ConvolutionPlan(op)`` reads the op's dimension numbers, strides, padding, dilations,
window reversal and group counts (semantics: the reference interpreter's,
stablehlo/interpreter/convolution.py) and ``steps(lhs, rhs, out, scratch)`` gives the
executable's steps; a launch step's ``kernel`` is the ``KernelText`` (the executable names
it).

An input position of output position ``p`` and kernel tap ``k`` (``K - 1 - k`` when the
window is reversed) is ``q = p * stride + tap * rhs_dilation - padding_low`` in the padded,
lhs-dilated input: a real element ``q / lhs_dilation`` when ``q`` is a multiple of the
dilation inside the input, else zero.

* Ungrouped, with lhs, rhs and result of one GEMM type (f32, f16, bf16): im2col. A kernel
  writes the scratch matrix ``col[rows, CT]``: a row per output element but its feature
  (rows in the result's memory order), a column per kernel element but its output feature
  (columns in the kernel's memory order, so the kernel is a ``[O, CT]`` or ``[CT, O]``
  matrix as it lies; a kernel whose output feature dim is neither its first nor its last is
  first copied into ``[O, CT]`` order after the matrix in the scratch). Then one GEMM: with
  the result's feature dim last, ``out[rows, O] = col @ W``; else a strided batch over the
  result dims before the feature dim, each ``out_b[O, inner] = W[O, CT] @ col_b^T`` (NCHW:
  one GEMM per image, written in place). A pointwise convolution (1-wide windows, stride 1,
  no padding, the input laid out as the result) reads the input as ``col``: no im2col.
* Grouped (``feature_group_count`` or ``batch_group_count`` above 1), mixed element types, f64:
  a direct kernel, a thread per result element summing its window in f32 (f64 for f64).
  Output feature ``o`` is group ``(o / Og) % G`` of batch group ``o / (G * Og)``.
Integer convolutions are not generated.
"""
from __future__ import annotations

import numpy as np

from stablehlo.ir.attributes import ConvDimensionNumbersAttr
from stablehlo.ir.core import Operation
from xla_core.buffers.liveness import value_bytes
from xla_core.codegen import NotGeneratable
from xla_core.codegen.attrs import attr
from xla_core.codegen.body import Body
from xla_core.codegen.index import linear

from pjrt.plugins.cuda.codegen.source import KernelText
from pjrt.plugins.cuda.codegen.target import CUDA_TARGET, CudaKernelTarget
from pjrt.plugins.cuda.gemm import GEMM_TYPES, gemm_step, offset

KIND = "convolution"
_FLOATS = ("f32", "f16", "bf16", "f64")
# An im2col matrix above this many bytes is not written: the direct kernel runs instead.
MAX_SCRATCH_BYTES = 1 << 31


class ConvolutionPlan:
    """How one convolution runs: ``scratch_bytes`` of scratch (0: none) and its steps."""

    def __init__(self, op: Operation):
        self.op = op
        lhs, rhs = op.operands
        result = op.results[0]
        r = CUDA_TARGET.renderer
        self.elems = [r.elem(v.type) for v in (lhs, rhs, result)]
        if any(e not in _FLOATS for e in self.elems):
            raise NotGeneratable(f"a convolution of {lhs.type} x {rhs.type} -> {result.type} "
                                 f"(floating-point element types only)")
        dn = op.attributes.get("dimension_numbers")
        if not isinstance(dn, ConvDimensionNumbersAttr):
            raise NotGeneratable(f"dimension_numbers {dn} (expected #stablehlo.conv<...>)")
        self.x, self.k, self.y = (list(v.type.shape) for v in (lhs, rhs, result))
        spatial = len(self.x) - 2
        self.ib, self.if_ = dn.input_batch_dimension, dn.input_feature_dimension
        self.isp = list(dn.input_spatial_dimensions)
        self.ki, self.ko = dn.kernel_input_feature_dimension, dn.kernel_output_feature_dimension
        self.ksp = list(dn.kernel_spatial_dimensions)
        self.ob, self.of = dn.output_batch_dimension, dn.output_feature_dimension
        self.osp = list(dn.output_spatial_dimensions)
        self.strides = list(attr(op, "window_strides", [1] * spatial))
        self.lhs_dilation = list(attr(op, "lhs_dilation", [1] * spatial))
        self.rhs_dilation = list(attr(op, "rhs_dilation", [1] * spatial))
        self.reversal = [bool(v) for v in attr(op, "window_reversal", [False] * spatial)]
        padding = attr(op, "padding")
        self.pad_low = [0] * spatial if padding is None else \
            [int(v) for v in np.asarray(padding, dtype=np.int64).reshape(spatial, 2)[:, 0]]
        self.groups = int(attr(op, "feature_group_count", 1))
        self.batch_groups = int(attr(op, "batch_group_count", 1))
        if 0 in self.x or 0 in self.k or 0 in self.y:
            raise NotGeneratable("a convolution with an empty operand or result")
        self.ct = int(np.prod(self.k)) // self.k[self.ko]   # a column per (ci, taps)
        self.out_features = self.y[self.of]
        self.outer = int(np.prod(self.y[:self.of]))         # result dims before the feature
        self.inner = int(np.prod(self.y[self.of + 1:]))     # and after it
        self.rows = self.outer * self.inner
        itemsize = value_bytes(lhs, op) // int(np.prod(self.x))
        self.pointwise = self._pointwise()
        self.col_bytes = 0 if self.pointwise else self.rows * self.ct * itemsize
        self.repack = self.ko not in (0, len(self.k) - 1)
        self.repack_bytes = int(np.prod(self.k)) * itemsize if self.repack else 0
        self.gemm = (self.groups == 1 and self.batch_groups == 1 and
                     self.elems[0] in GEMM_TYPES and len(set(self.elems)) == 1 and
                     self.col_bytes + self.repack_bytes <= MAX_SCRATCH_BYTES)
        self.scratch_bytes = self.col_bytes + self.repack_bytes if self.gemm else 0

    def _pointwise(self) -> bool:
        """Whether the im2col matrix is the input itself: 1-wide windows at stride 1 with
        no padding or dilation, the input's dims in the result's roles and order."""
        roles_in, roles_out = [None] * len(self.x), [None] * len(self.y)
        for roles, b, f, sp in ((roles_in, self.ib, self.if_, self.isp),
                                (roles_out, self.ob, self.of, self.osp)):
            roles[b], roles[f] = "b", "f"
            for i, d in enumerate(sp):
                roles[d] = i
        return (roles_in == roles_out and self.x[self.if_] == self.ct and
                all(self.k[d] == 1 for d in self.ksp) and
                all(self.x[d] == self.y[e] for d, e in zip(self.isp, self.osp)) and
                set(self.strides) <= {1} and set(self.lhs_dilation) <= {1} and
                set(self.pad_low) <= {0})

    def steps(self, lhs, rhs, out, scratch) -> list[dict]:
        """The steps from buffer references ``lhs``, ``rhs`` into ``out``, with ``scratch``
        (``scratch_bytes`` long; None when that is 0)."""
        if not self.gemm:
            return [_launch(self._direct(), [lhs, rhs, out],
                            [self._bytes(v) for v in (*self.op.operands, self.op.results[0])])]
        steps, col = [], lhs
        if not self.pointwise:
            col = scratch
            steps.append(_launch(self._im2col(), [lhs, scratch],
                                 [self._bytes(self.op.operands[0]), self.col_bytes]))
        weights, o_first = rhs, self.ko == 0
        if self.repack:
            weights, o_first = offset(scratch, self.col_bytes), True
            steps.append(_launch(self._repack(), [rhs, weights],
                                 [self._bytes(self.op.operands[1]), self.repack_bytes]))
        elem, o = self.elems[2], self.out_features
        w_ld = self.ct if o_first else o
        if self.inner == 1:  # out[rows, O] = col[rows, CT] @ W
            steps.append(gemm_step(elem, m=self.rows, n=o, k=self.ct, a=col, lda=self.ct,
                                   trans_a=0, b=weights, ldb=w_ld, trans_b=int(o_first),
                                   c=out, ldc=o))
        else:  # per outer index: out_b[O, inner] = W[O, CT] @ col_b^T
            # (a pointwise input holds col_b^T itself: [C, inner] per outer index)
            steps.append(gemm_step(elem, m=o, n=self.inner, k=self.ct, a=weights, lda=w_ld,
                                   trans_a=int(not o_first), b=col,
                                   ldb=self.inner if self.pointwise else self.ct,
                                   trans_b=int(not self.pointwise), c=out, ldc=self.inner,
                                   batch=self.outer, stride_a=0,
                                   stride_b=self.inner * self.ct, stride_c=o * self.inner))
        return steps

    def _bytes(self, v) -> int:
        return value_bytes(v, self.op)

    def _input_at(self, batch: str, feature: str, out: list[str], taps: list[str],
                  lines: list[str]) -> tuple[str, str]:
        """(condition, flat input index) of the input element under output position ``out``
        and kernel taps ``taps`` (per spatial dim), declaring locals into ``lines``."""
        at = [None] * len(self.x)
        at[self.ib], at[self.if_] = batch, feature
        inside = []
        for i, d in enumerate(self.isp):
            size = self.k[self.ksp[i]]
            tap = f"({size - 1} - {taps[i]})" if self.reversal[i] else taps[i]
            lines.append(f"const int64_t q{i} = (int64_t){out[i]} * {self.strides[i]} + "
                         f"(int64_t){tap} * {self.rhs_dilation[i]} - ({self.pad_low[i]});")
            dil = self.lhs_dilation[i]
            if dil == 1:
                inside.append(f"q{i} >= 0 && q{i} < {self.x[d]}")
                at[d] = f"q{i}"
            else:
                inside.append(f"q{i} >= 0 && q{i} % {dil} == 0 && q{i} / {dil} < {self.x[d]}")
                at[d] = f"(q{i} / {dil})"
        return " && ".join(inside) or "true", linear(at, self.x)

    def _im2col(self) -> KernelText:
        """``col[r, j]``: r over the result's dims but its feature, j over the kernel's but
        its output feature (both row-major), the input element or zero."""
        body = Body(CUDA_TARGET.renderer, {}, set(), [], "")
        row_dims = [d for d in range(len(self.y)) if d != self.of]
        col_dims = [d for d in range(len(self.k)) if d != self.ko]
        # 32-bit quotients when the positions fit: a 64-bit division by a constant is
        # several times the instructions, and this kernel is mostly index arithmetic
        index = "uint32_t" if self.rows * self.ct < 2 ** 31 and np.prod(self.x) < 2 ** 31 \
            else "int64_t"
        body.lines += [f"const {index} r = ({index})b / {self.ct};",
                       f"const {index} j = ({index})b % {self.ct};"]
        rows = dict(zip(row_dims, body.delinearize("r", [self.y[d] for d in row_dims])))
        cols = dict(zip(col_dims, body.delinearize("j", [self.k[d] for d in col_dims])))
        lines = body.lines
        cond, at = self._input_at(rows[self.ob], cols[self.ki],
                                  [rows[d] for d in self.osp], [cols[d] for d in self.ksp],
                                  lines)
        ctype = CUDA_TARGET.renderer.TYPES[self.elems[0]]
        zero = CUDA_TARGET.renderer.literal(0.0, self.elems[0])
        lines.append(f"out0[b] = ({cond}) ? in0[{at}] : {zero};")
        return _kernel([ctype], [ctype], lines, self.rows * self.ct)

    def _repack(self) -> KernelText:
        """The kernel with its output feature dim first (``[O, CT]``)."""
        order = [self.ko] + [d for d in range(len(self.k)) if d != self.ko]
        body = Body(CUDA_TARGET.renderer, {}, set(), [], "")
        names = body.delinearize("b", [self.k[d] for d in order])
        at = [None] * len(self.k)
        for name, d in zip(names, order):
            at[d] = name
        ctype = CUDA_TARGET.renderer.TYPES[self.elems[1]]
        return _kernel([ctype], [ctype], body.lines + [f"out0[b] = in0[{linear(at, self.k)}];"],
                       int(np.prod(self.k)))

    def _direct(self) -> KernelText:
        body = Body(CUDA_TARGET.renderer, {}, set(), [], "")
        out = body.delinearize("b", self.y)
        lines = body.lines
        groups, batch_groups = self.groups, self.batch_groups
        og = self.out_features // (groups * batch_groups)
        cg = self.k[self.ki]
        o = out[self.of]
        lines.append(f"const int64_t g = ({o} / {og}) % {groups};")
        lines.append(f"const int64_t n = {o} / {groups * og} * {self.y[self.ob]} + "
                     f"{out[self.ob]};")
        acc = "double" if "f64" in self.elems else "float"
        lines.append(f"{acc} acc = 0;")
        loops = [f"for (int64_t ci = 0; ci < {cg}; ++ci)"] + [
            f"for (int64_t t{i} = 0; t{i} < {self.k[d]}; ++t{i})"
            for i, d in enumerate(self.ksp)]
        inner: list[str] = []
        cond, x_at = self._input_at("n", f"(g * {cg} + ci)", [out[d] for d in self.osp],
                                    [f"t{i}" for i in range(len(self.ksp))], inner)
        w_at = [None] * len(self.k)
        w_at[self.ki], w_at[self.ko] = "ci", o
        for i, d in enumerate(self.ksp):
            w_at[d] = f"t{i}"
        x = _widen(f"in0[{x_at}]", self.elems[0], acc)
        w = _widen(f"in1[{linear(w_at, self.k)}]", self.elems[1], acc)
        inner.append(f"if ({cond}) acc += {x} * {w};")
        lines += [" ".join(loops) + " {", *("  " + line for line in inner), "}"]
        res = self.elems[2]
        r = CUDA_TARGET.renderer
        value = r.narrow("(float)acc", res) if res in r.NARROW else f"({r.TYPES[res]})acc"
        lines.append(f"out0[b] = {value};")
        types = CUDA_TARGET.renderer.TYPES
        return _kernel([types[self.elems[0]], types[self.elems[1]]], [types[res]], lines,
                       int(np.prod(self.y)))


def _widen(expr: str, elem: str, acc: str) -> str:
    r = CUDA_TARGET.renderer
    return f"({acc}){r.widen(expr, elem)}" if elem in r.NARROW else f"({acc}){expr}"


def _kernel(ins: list[str], outs: list[str], lines: list[str], tasks: int) -> KernelText:
    target = CudaKernelTarget()
    text = target.kernel(target.bind(ins, outs) + lines, tasks, 1)
    grid, block = target.launch()
    return KernelText(KIND, text, tuple(grid), tuple(block))


def _launch(kernel: KernelText, args: list, nbytes: list[int]) -> dict:
    return {"op": "launch", "kernel": kernel, "grid": list(kernel.grid),
            "block": list(kernel.block), "shared": 0, "args": args, "bytes": nbytes}
