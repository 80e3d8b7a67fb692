"""The kernels of one program as one CUDA C translation unit.

``kernel_of(op, module)`` writes the kernel of a top-level op the executable launches: a
fusion composite (its kind's template, xla_core/codegen/templates.py) or a lone fusible op
that fusion left alone (a transpose, one exp: on a GPU every such op is a kernel), rendered
by the same templates as a fusion of that one op; a reduce over inner dims (which fusion and
the reduction template refuse) as a row reduction of its operand transposed.
``KernelSet.translation_unit`` puts the kernels after the renderer's helpers; identical
kernels share one symbol.
"""
from __future__ import annotations

from dataclasses import dataclass

from stablehlo.ir.core import Func, Module, Operation, make_func
from stablehlo.ir.attributes import i64_array
from stablehlo.ir.types import FunctionType, TensorType
from xla_core.codegen import SYMBOL, TEMPLATES, NotGeneratable, fusion_kernel
from xla_core.codegen.attrs import attr
from xla_core.codegen.cuda import CUDA
from xla_core.codegen.kernel import Kernel
from xla_core.fusion.kinds import LOOP, REDUCTION, kind_of_fusion
from xla_core.fusion.legality import why_not_fusible
from xla_core.ir_utils import clone_operation

from pjrt.plugins.cuda.codegen.hook import CUDA_CODEGEN, KINDS
from pjrt.plugins.cuda.codegen.target import THREADS, WARP, CudaKernelTarget

# OHC_WARP, OHC_BLOCK: the lanes of a warp-per-row reduction and the threads of a
# block-per-row one (target.py; a host emulation of the kernels sets 1 and 1); ohc_shfl_xor:
# a warp shuffle of any element type (the narrow integers and bool through int).
PRELUDE = "#include <cstdint>\n" + CUDA.HELPERS + f"""#ifndef OHC_WARP
#define OHC_WARP {WARP}
#endif
#ifndef OHC_BLOCK
#define OHC_BLOCK {THREADS}
#endif
template <class T> __device__ __forceinline__ T ohc_shfl_xor(T v, int off) {{
  return __shfl_xor_sync(0xffffffffu, v, off);
}}
""" + "".join(f"__device__ __forceinline__ {t} ohc_shfl_xor({t} v, int off) "
              f"{{ return ({t})__shfl_xor_sync(0xffffffffu, (int)v, off); }}\n"
              for t in ("bool", "int8_t", "uint8_t", "int16_t", "uint16_t"))


@dataclass(frozen=True)
class KernelText:
    kind: str            # "elementwise" or "reduction" (hook.KINDS), "indexing" (indexing.py)
    text: str            # definitions and kernel, ``SYMBOL`` for its name
    grid: tuple
    block: tuple


def is_fusion(op: Operation) -> bool:
    return kind_of_fusion(op) is not None


def why_not_lone(op: Operation) -> str | None:
    """None when ``op`` outside any fusion is a kernel of its own, else why not."""
    if _inner_dims_reduce(op):  # its kernel reads the operand transposed (kernel_of)
        return CUDA_CODEGEN.why_not_op(op)
    return why_not_fusible(op) or CUDA_CODEGEN.why_not_op(op)


def _inner_dims_reduce(op: Operation) -> bool:
    """A single-operand reduce whose dims are neither a prefix nor a suffix of its operand's
    (fusion refuses those; the reduction template takes suffixes)."""
    if op.name != "stablehlo.reduce" or len(op.operands) != 2:
        return False
    dims = sorted(attr(op, "dimensions"))
    rank = len(op.operands[0].type.shape)
    return dims not in (list(range(len(dims))), list(range(rank - len(dims), rank)))


def kernel_of(op: Operation, module: Module) -> KernelText:
    """The kernel of a fusion composite or of a lone op (``why_not_lone`` is None);
    NotGeneratable when the templates cannot write it."""
    target = CudaKernelTarget()
    if is_fusion(op):
        kind = kind_of_fusion(op).name
        if kind not in KINDS:
            raise NotGeneratable(f"no template for {kind} fusions")
        text, _, defs = fusion_kernel(op, module, target)
    else:
        kind = REDUCTION.name if op.name == "stablehlo.reduce" else LOOP.name
        func = make_func(f"lone_{op.name[10:]}",
                         FunctionType(tuple(v.type for v in op.operands),
                                      tuple(r.type for r in op.results)), visibility="private")
        body = func.regions[0].blocks[0]
        mapping = dict(zip(op.operands, body.arguments))
        if _inner_dims_reduce(op):
            _transposed_operand(op, body, mapping)
        clone = clone_operation(op, mapping)
        if _inner_dims_reduce(op):
            rank = len(op.operands[0].type.shape)
            count = len(attr(op, "dimensions"))
            clone.attributes["dimensions"] = i64_array(range(rank - count, rank))
        body.append(clone)
        body.append(Operation("func.return", list(clone.results), ()))
        kernel = Kernel(op, Func(func), target)
        text, defs = TEMPLATES.get(kind)(kernel), kernel.globals
    # file-scope constant arrays are read by device code: they live in device memory
    defs = [d.replace("static const ", "static __device__ const ", 1) for d in defs]
    grid, block = target.launch()
    return KernelText(KINDS[kind], "\n".join(defs) + "\n" + text, tuple(grid), tuple(block))


def _transposed_operand(reduce: Operation, body, mapping: dict) -> None:
    """Append to ``body`` the transpose of the reduce's operand that moves its reduced dims
    last, in order; ``mapping`` then maps the operand to it. The template reads it through
    an index expression: nothing is written."""
    operand = reduce.operands[0]
    shape = list(operand.type.shape)
    dims = sorted(attr(reduce, "dimensions"))
    order = [d for d in range(len(shape)) if d not in dims] + dims
    result = TensorType(tuple(shape[d] for d in order), operand.type.element_type)
    transpose = Operation("stablehlo.transpose", [mapping[operand]], [result],
                          {"permutation": i64_array(order)})
    body.append(transpose)
    mapping[operand] = transpose.results[0]


class KernelSet:
    """The kernels of one translation unit, named ``k0``, ``k1``, ... in order of first use;
    the same text twice is one kernel."""

    def __init__(self):
        self.symbols: dict[str, str] = {}   # text -> symbol
        self.kinds: dict[str, str] = {}     # symbol -> kind

    def add(self, kernel: KernelText) -> str:
        if kernel.text not in self.symbols:
            symbol = f"k{len(self.symbols)}"
            self.symbols[kernel.text] = symbol
            self.kinds[symbol] = kernel.kind
        return self.symbols[kernel.text]

    def translation_unit(self) -> str:
        return PRELUDE + "".join(text.replace(SYMBOL, symbol)
                                 for text, symbol in self.symbols.items())
