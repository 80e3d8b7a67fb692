"""What a compiled executable can say about itself: its optimized program, its cost, its memory.

These back the PJRT introspection calls (``PJRT_Executable_OptimizedProgram``,
``GetCostAnalysis``, ``GetCompiledMemoryStats``; see pjrt/c_api/loader.py) and so JAX's
``compiled.as_text()``, ``cost_analysis()`` and ``memory_analysis()``. Every figure is read off
the program as the backend runs it (``LoadedExecutable.optimized_module``: after the backend's
pipeline, fusions included) by ``xla_core``'s cost model and buffer assignment; nothing is
measured.

Conventions (chosen to match what XLA reports, so tools reading JAX's dicts work unchanged):

* ``flops``, ``transcendentals``, ``bytes accessed``: ``xla_core.cost.module_cost`` of the entry
  function; a fusion counts its boundary bytes only (it is one kernel). ``optimal_seconds`` is
  that cost's roofline time on the ``cpu`` hardware description (every backend behind the PJRT
  plugin computes in host memory).
* ``argument_size_in_bytes``/``output_size_in_bytes``: the entry's parameters and results.
  ``alias_size_in_bytes``: results living in a donated argument's storage.
  ``temp_size_in_bytes``: what the buffer assignment's peak needs beyond the arguments and the
  results that are not aliased, so that XLA's identity ``argument + output - alias + temp`` is
  our peak. ``generated_code_size_in_bytes``: ``LoadedExecutable.generated_code_size``.
"""
from __future__ import annotations

from pjrt.api import LoadedExecutable
from pjrt.arguments import entry_function

COST_HARDWARE = "cpu"


def optimized_text(loaded: LoadedExecutable) -> str:
    """The optimized program as StableHLO text (what ``openhlo opt`` would print)."""
    from stablehlo.text import print_module
    return print_module(loaded.optimized_module)


def cost_analysis(loaded: LoadedExecutable) -> dict[str, float]:
    """``{"flops", "transcendentals", "bytes accessed", "optimal_seconds"}`` of one run."""
    from xla_core.cost import hardware, module_cost, roofline_seconds
    cost = module_cost(loaded.optimized_module, loaded.entry)
    return {"flops": cost.flops, "transcendentals": cost.transcendentals,
            "bytes accessed": cost.bytes_accessed,
            "optimal_seconds": roofline_seconds(cost, hardware(COST_HARDWARE))}


def compiled_memory_stats(loaded: LoadedExecutable) -> dict[str, int]:
    """XLA's ``CompiledMemoryStats`` fields (device memory) from the buffer assignment."""
    from xla_core.buffers import assign_buffers
    func = entry_function(loaded.optimized_module, loaded.entry)
    assignment = assign_buffers(func)
    results = func.body.terminator.operands
    alias = sum(assignment.slots[v].size for v in set(results)
                if v in assignment.slots and assignment.slots[v].parameter is not None)
    temp = assignment.peak_bytes - assignment.argument_bytes - (assignment.output_bytes - alias)
    return {"generated_code_size_in_bytes": loaded.generated_code_size,
            "argument_size_in_bytes": assignment.argument_bytes,
            "output_size_in_bytes": assignment.output_bytes,
            "alias_size_in_bytes": alias,
            "temp_size_in_bytes": max(temp, 0)}

