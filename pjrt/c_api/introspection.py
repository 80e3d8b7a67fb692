"""What a compiled executable can say about itself: its optimized program, its cost, its memory.

These back the PJRT introspection calls (``PJRT_Executable_OptimizedProgram``,
``GetCostAnalysis``, ``GetCompiledMemoryStats``; see pjrt/c_api/loader.py) and so JAX's
``compiled.as_text()``, ``cost_analysis()`` and ``memory_analysis()``. Every figure is read off
the program as the backend runs it (``LoadedExecutable.optimized_module``: after the backend's
pipeline, fusions included) by the backend's compiled result (``pjrt.api.CompileResult``:
``cost_analysis``, ``memory_stats``; for xla_core's driver, its cost model and buffer
assignment, with XLA's conventions: pjrt/plugins/compile_driver.py); nothing is measured.
``generated_code_size_in_bytes`` is ``LoadedExecutable.generated_code_size``.
"""
from __future__ import annotations

from pjrt.api import LoadedExecutable


def optimized_text(loaded: LoadedExecutable) -> str:
    """The optimized program as StableHLO text (what ``openhlo opt`` would print)."""
    from stablehlo.text import print_module
    return print_module(loaded.optimized_module)


def cost_analysis(loaded: LoadedExecutable) -> dict[str, float]:
    """``{"flops", "transcendentals", "bytes accessed", "optimal_seconds"}`` of one run."""
    return loaded.executable.compiled.cost_analysis(loaded.optimized_module, loaded.entry)


def compiled_memory_stats(loaded: LoadedExecutable) -> dict[str, int]:
    """XLA's ``CompiledMemoryStats`` fields (device memory)."""
    return {"generated_code_size_in_bytes": loaded.generated_code_size,
            **loaded.executable.compiled.memory_stats(loaded.optimized_module, loaded.entry)}

