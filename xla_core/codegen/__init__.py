"""The shared code generator: fusions and whole while loops as kernel source text.

| file | what |
|---|---|
| `scalar.py` | the scalar-op protocol: what each elementwise op computes, once (`ScalarRenderer`) |
| `cpp.py` | `CppRenderer`: its C++ spelling; `cpp_mathlib.py`: the C++ target's float math |
| `cuda.py` | `CudaRenderer`: its CUDA C spelling (device math, `__half`/`__nv_bfloat16`) |
| `index.py` | index expressions of row-major tensors |
| `body.py` | `Body`: fusion values as scalar expressions at index expressions |
| `target.py` | `KernelTarget`: what a backend decides (calling convention, threads, widths, GEMM) |
| `kernel.py`, `loop.py`, `reduction.py`, `output.py` | the fusion kernel templates |
| `while_loop.py` | the while template: a whole `while` as one kernel, calling its body's fusion and dot kernels |
| `templates.py` | `TEMPLATES` by fusion kind and `while`; `fusion_kernel` |

A backend brings a renderer for its language (one subclass of ``ScalarRenderer``) and a
``KernelTarget``; it compiles and loads the text itself (the cpu backend:
pjrt/plugins/cpu/codegen/; the cuda backend: pjrt/plugins/cuda/codegen/).
"""
from xla_core.codegen.scalar import NotGeneratable, ScalarRenderer
from xla_core.codegen.target import SYMBOL, KernelTarget
from xla_core.codegen.templates import TEMPLATES, fusion_kernel
from xla_core.codegen.while_loop import loop_source

__all__ = ["SYMBOL", "TEMPLATES", "KernelTarget", "NotGeneratable", "ScalarRenderer",
           "fusion_kernel", "loop_source"]
