"""The cuda backend's ``KernelTarget``: how the shared templates' parts run on a GPU.

A part (xla_core/codegen/target.py) becomes ``extern "C" __global__ void name(in0..., out0...)``
whose parameters are device pointers, inputs then results, in the fusion's order (the order of
an executable's launch ``args``), and whose body runs the part on one task ``[b, b + 1)`` per
thread (or warp, or block) in a grid-stride loop: any grid computes every task once;
``launch`` gives the one the executable records.

The sizes make consecutive threads touch consecutive elements, so global memory accesses
coalesce: a loop's task is one element (``block`` 1), a column reduction's one column
(``columns`` 1), a row reduction's one row with a single accumulator (``lanes`` 1: registers,
not vector lanes, are what a GPU thread has). A row of at least WARP_ROWS_FROM elements is a
warp's task and one of at least BLOCK_ROWS_FROM a thread block's (``row_split``): thread i of
the row takes elements i, i + count, ...; warp shuffles combine a warp's accumulators, then,
for a block, each warp's result goes through shared memory and every thread combines them in
warp order (``row_combine``), so the row is read in coalesced 128-byte runs and every thread
ends with the same bits. A row buffer of a reduction (softmax's exp) lives in the thread's
local memory and holds only the thread's own elements (``row_buffer``: ``n / count`` of
them), up to ``_ROW_BUFFER_BYTES``; a longer one is not kept and later loops recompute its
values from the inputs. There is no ``gemm``: dots are library calls of the executable
(``stablehlo.dot_general`` stays out of fusions, hook.py).
"""
from __future__ import annotations

from xla_core.codegen.cuda import CUDA
from xla_core.codegen.scalar import NotGeneratable
from xla_core.codegen.target import SYMBOL, KernelTarget

THREADS = 256  # threads per block of every kernel (its __launch_bounds__)
WARP = 32  # OHC_WARP of the translation unit's prelude (codegen/source.py)
# Rows of at least this many elements are reduced by a warp each, shorter ones by a thread.
WARP_ROWS_FROM = 64
# Rows of at least this many elements are reduced by a thread block each: 8 elements per
# thread at least, so the two barriers of a block's combine cost less than its loads, and a
# few rows fill the device (a warp per row would run a 32000-wide softmax's 256 rows on 256
# warps, 2 per SM).
BLOCK_ROWS_FROM = 8 * THREADS
# Blocks of a grid at most: 132 SMs (H100 SXM) x 8 resident blocks of THREADS threads; a
# grid-stride loop covers the tasks beyond.
MAX_BLOCKS = 132 * 8
# Per thread, in local memory: the driver reserves it for every resident thread (~270k on an
# H100), so 1 KiB costs ~280 MB of device memory while such a kernel runs.
_ROW_BUFFER_BYTES = 1024
_BYTES = {"double": 8, "int64_t": 8, "uint64_t": 8, "float": 4, "int32_t": 4, "uint32_t": 4,
          "__half": 2, "__nv_bfloat16": 2, "int16_t": 2, "uint16_t": 2}  # others: 1
# Marks ``bind``'s lines: they are the kernel's parameters, which ``kernel`` moves into its
# signature (the templates put bindings at the top of a part).
_PARAMETER = "@PARAMETER@ "


class CudaKernelTarget(KernelTarget):
    """One kernel's target: ``launch`` gives the launch shape of the kernel it wrote last
    (a fresh target per kernel)."""
    renderer = CUDA
    block = 1
    task = 1
    columns = 1
    tile_m = tile_n = 0  # no output fusions: dots are library calls
    task_macs = 1
    max_tiles, min_tile_rows = 1, 1
    transposed_gemm_rows = 0
    tasks = 0  # of the kernel written last (launch)
    # threads per task of the kernel written last: 1, WARP or THREADS (a row's, row_split)
    row_threads = 1
    combines = 0  # row_combine's shared arrays so far (their names)

    def lanes(self, elem: str) -> int:
        return 1

    def bind(self, in_types: list[str], out_types: list[str]) -> list[str]:
        return ([f"{_PARAMETER}const {t}* in{k}" for k, t in enumerate(in_types)] +
                [f"{_PARAMETER}{t}* out{k}" for k, t in enumerate(out_types)])

    def kernel(self, part: list[str], tasks: int, min_chunk: int) -> str:
        # No __restrict__: the buffer assignment may give a result its operand's storage
        # (xla_core/buffers in-place pairs), so a kernel's input and output can alias.
        params = [line[len(_PARAMETER):] for line in part if line.startswith(_PARAMETER)]
        body = "\n    ".join(line for line in part if not line.startswith(_PARAMETER))
        self.tasks = tasks
        # a task per block (row_split gave rows to blocks), per warp (its lanes: ohc_lane) or
        # per thread
        if self.row_threads == THREADS:
            first, stride, lane = "(int64_t)blockIdx.x", "(int64_t)gridDim.x", ""
        else:
            per = " / OHC_WARP" if self.row_threads == WARP else ""
            first = f"((int64_t)blockIdx.x * blockDim.x + threadIdx.x){per}"
            stride = f"(int64_t)gridDim.x * blockDim.x{per}"
            lane = ("  const int64_t ohc_lane = threadIdx.x % OHC_WARP;\n"
                    if self.row_threads == WARP else "")
        return (f'extern "C" __global__ void __launch_bounds__({THREADS}) '
                f"{SYMBOL}({', '.join(params)}) {{\n{lane}"
                f"  const int64_t stride = {stride};\n"
                f"  for (int64_t b = {first}; b < {tasks}; b += stride) {{\n"
                f"    const int64_t e = b + 1;\n    {body}\n  }}\n}}\n")

    def row_split(self, n: int) -> tuple[str, str] | None:
        if n >= BLOCK_ROWS_FROM:
            self.row_threads = THREADS
            return "(int64_t)threadIdx.x", "OHC_BLOCK"
        if n >= WARP_ROWS_FROM:
            self.row_threads = WARP
            return "ohc_lane", "OHC_WARP"
        return None

    def row_combine(self, acc: str, combine, ctype: str) -> list[str]:
        # butterfly: after log2(32) steps every lane holds its warp's combination
        lines = [f"for (int off = OHC_WARP / 2; off > 0; off /= 2) "
                 f"{acc} = {combine(acc, f'ohc_shfl_xor({acc}, off)')};"]
        if self.row_threads != THREADS:
            return lines
        # A block: each warp's result in shared memory, then every thread combines them in
        # warp order (the same bits everywhere); the second barrier keeps the next row's
        # writes from overtaking a slow warp's reads.
        part = f"ohc_part{self.combines}"
        self.combines += 1
        return lines + [
            f"__shared__ {ctype} {part}[OHC_BLOCK / OHC_WARP];",
            f"if (threadIdx.x % OHC_WARP == 0) {part}[threadIdx.x / OHC_WARP] = {acc};",
            "__syncthreads();",
            f"{acc} = {part}[0];",
            f"for (int w = 1; w < OHC_BLOCK / OHC_WARP; ++w) "
            f"{acc} = {combine(acc, f'{part}[w]')};",
            "__syncthreads();"]

    def row_buffer(self, name: str, ctype: str, n: int) -> tuple[str, str | None, str] | None:
        # Thread t of a row's count holds its elements j = t, t + count, ... at j / count.
        count = {1: "1", WARP: "OHC_WARP", THREADS: "OHC_BLOCK"}[self.row_threads]
        if -(-n // self.row_threads) * _BYTES.get(ctype, 1) > _ROW_BUFFER_BYTES:
            return None
        if count == "1":
            return f"{ctype} {name}[{n}];", None, f"{name}[j]"
        return (f"{ctype} {name}[({n} + {count} - 1) / {count}];", None,
                f"{name}[j / {count}]")

    def scratch(self, name: str, ctype: str, n: int) -> tuple[str, str | None]:
        raise NotGeneratable("scratch memory in a kernel (only row reductions keep rows, "
                             "row_buffer)")

    def gemm(self, elem, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc) -> str:
        raise NotGeneratable("a GEMM inside a kernel (dots are library calls here)")

    def loop_kernel(self, symbol: str) -> str:
        raise NotGeneratable("a while loop as one kernel")

    def launch(self) -> tuple[list[int], list[int]]:
        """(grid, block) of the kernel written last: a thread, warp or block per task
        (``row_threads``), up to MAX_BLOCKS blocks."""
        threads = self.tasks * self.row_threads
        return [max(1, min(MAX_BLOCKS, -(-threads // THREADS))), 1, 1], [THREADS, 1, 1]


CUDA_TARGET = CudaKernelTarget()  # for what does not depend on a kernel (the hook)
