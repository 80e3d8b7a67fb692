"""The shared code generator: fusions and loops of elementwise math as kernel source text.

| file | what |
|---|---|
| `scalar.py` | the scalar-op protocol: what each elementwise op computes, once (`ScalarRenderer`) |
| `cpp.py` | `CppRenderer`: its C++ spelling; `cpp_mathlib.py`: the C++ target's float math |
| `index.py` | index expressions of row-major tensors |
| `body.py` | `Body`: fusion values as scalar expressions at index expressions |
| `target.py` | `KernelTarget`: what a backend decides (calling convention, threads, widths, GEMM) |
| `kernel.py`, `loop.py`, `reduction.py`, `output.py` | the fusion kernel templates |
| `while_loop.py` | the loop-of-elementwise template (a whole `while` as one kernel) |
| `templates.py` | `TEMPLATES` by fusion kind; `fusion_kernel` |

A backend brings a renderer for its language (one subclass of ``ScalarRenderer``) and a
``KernelTarget``; it compiles and loads the text itself (the cpu backend:
pjrt/plugins/cpu/codegen/).
"""
from xla_core.codegen.scalar import NotGeneratable, ScalarRenderer
from xla_core.codegen.target import SYMBOL, KernelTarget
from xla_core.codegen.templates import TEMPLATES, fusion_kernel
from xla_core.codegen.while_loop import loop_source

__all__ = ["SYMBOL", "TEMPLATES", "KernelTarget", "NotGeneratable", "ScalarRenderer",
           "fusion_kernel", "loop_source"]
