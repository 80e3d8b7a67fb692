"""The cpu backend's ``KernelTarget``: how the shared templates' kernels run here.

A kernel is ``extern "C" void name(const OhmEnv*, const void* const* operands, void* const*
results)`` (abi.py) plus a static part function that the executor's thread pool runs on
ranges of its outer loop (``env->parallel_for``); GEMMs and large scratch come from the
environment too, so generated code needs no library of its own. The sizes are this machine
class's: AVX2/AVX-512 widths and pool tasks worth waking a thread for.
"""
from __future__ import annotations

from xla_core.codegen.cpp import CPP
from xla_core.codegen.target import SYMBOL, KernelTarget

from pjrt.plugins.cpu.codegen.abi import KERNEL_SIGNATURE

_STACK_BYTES = 32768   # row buffers up to this size live on the stack, larger ones in env->alloc


class CpuTarget(KernelTarget):
    renderer = CPP
    block = 4096          # innermost elements per task of a long loop
    task = 16384          # elements per pool task at least
    columns = 256         # columns per block of a column reduction
    tile_m, tile_n = 256, 512
    # Multiply-adds per pool task at least: waking a pool thread costs several microseconds,
    # more than small tiles take (attention's per-head [S,D] x [D,S] GEMMs of a small model),
    # so those run on fewer threads, or on the caller alone.
    task_macs = 1 << 19
    # Tiles of a GEMM too small for the fixed tiles to share it: a few per thread balance
    # the pool's shared blocks; rows of 16 at least keep the BLAS micro-kernel busy.
    max_tiles, min_tile_rows = 16, 16
    transposed_gemm_rows = 64  # 1.2-1.5x faster at 16-64 rows (OpenBLAS, AVX-512), less above

    def lanes(self, elem: str) -> int:
        return 16 if CPP.TYPES[elem] in ("float", "int32_t", "uint32_t") else 8

    def bind(self, in_types: list[str], out_types: list[str]) -> list[str]:
        lines = ["const OhmArgs* a = (const OhmArgs*)p;"]
        lines += [f"const {t}* in{k} = (const {t}*)a->ins[{k}];" for k, t in enumerate(in_types)]
        lines += [f"{t}* out{k} = ({t}*)a->outs[{k}];" for k, t in enumerate(out_types)]
        return lines

    def kernel(self, part: list[str], tasks: int, min_chunk: int) -> str:
        inner = "\n  ".join(part)
        # One range only (the pool would run it inline): called directly, which saves the
        # pool's entry on each call of a small kernel, e.g. from a loop kernel's iterations.
        run = (f"{SYMBOL}_part(&a, 0, {tasks});" if tasks <= min_chunk else
               f"env->parallel_for({tasks}, {min_chunk}, {SYMBOL}_part, &a);")
        return (f"static void {SYMBOL}_part(void* p, int64_t b, int64_t e) {{\n  {inner}\n}}\n"
                f'extern "C" void {SYMBOL}{KERNEL_SIGNATURE} {{\n'
                f"  OhmArgs a = {{env, ins, outs}};\n  {run}\n}}\n")

    def scratch(self, name: str, ctype: str, n: int) -> tuple[str, str | None]:
        if n * 8 <= _STACK_BYTES:  # 8: the widest element type
            return f"alignas(64) {ctype} {name}[{n}];", None
        return (f"{ctype}* {name} = ({ctype}*)a->env->alloc({n} * (int64_t)sizeof({ctype}));",
                f"a->env->release({name});")

    def gemm(self, elem: str, trans_a: int, trans_b: int, m: str, n: str, k: int, a: str,
             lda: int, b: str, ldb: int, c: str, ldc: int) -> str:
        gemm = "sgemm" if elem == "f32" else "dgemm"
        return (f"a->env->{gemm}({trans_a}, {trans_b}, {m}, {n}, {k}, {a}, {lda}, "
                f"{b}, {ldb}, {c}, {ldc});")

    def loop_kernel(self, symbol: str) -> str:
        return f'extern "C" void {symbol}{KERNEL_SIGNATURE} {{'


CPU_TARGET = CpuTarget()
