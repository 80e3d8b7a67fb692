"""How a backend compiles: through xla_core's one compile driver, with the backend's hooks.

The runtime contract (pjrt/api.py) only asks a backend to compile (``Client._compile_program``)
and run; it does no compiler work. A backend mixes in ``CompileDriverMixin`` (one line: ``class
MyClient(CompileDriverMixin, HostClient)``), which implements that hook here: it resolves
what the contract owns (the entry function, the replica and partition counts), runs
``xla_core.compile`` (the backend's persistent cache, whole-program checks, SPMD partitioning,
the backend's pipeline and code generation, the cache key) with the hooks the backend returns
from ``_compiler(options)``, gives the partitioner's errors as the contract's, and binds the
result with the backend's ``_compile``.

The result, a ``DriverResult``, is what the contract reads facts from (``pjrt.api.
CompileResult``): the structural fingerprint, the entry shardings, and what the PJRT
introspection calls report (``cost_analysis``, ``memory_stats``; pjrt/c_api/introspection.py).
"""
from __future__ import annotations

import dataclasses

import stablehlo
from stablehlo.ir.core import Module
from stablehlo.verify import verify_module
from xla_core.compile import (Backend, Compiled, CompileRequest, ShardingError,
                              SpmdUnsupportedError, compile_module, entry_shardings,
                              load_compiled, module_fingerprint)

from pjrt.api import (ArgumentError, CompileOptions, Executable, LoadedExecutable,
                      UnimplementedError)
from pjrt.arguments import count_option, entry_function, resolve_entry

__all__ = ["Backend", "CompileDriverMixin", "DriverResult", "compile_program"]

COST_HARDWARE = "cpu"
"""The hardware description of ``optimal_seconds``: every backend behind the PJRT plugin
computes in host memory."""


class CompileDriverMixin:
    """``Client._compile_program`` through xla_core's compile driver; mixed in before the
    client's base class. A backend fills in the driver's hooks by overriding ``_compiler``."""

    def _compile_program(self, program, options: CompileOptions) -> LoadedExecutable:
        compiled = compile_program(program, options, self._compiler(options))
        executable = Executable(compiled.module, options, compiled)
        return self._compile(executable, self._device_assignment(executable, options))

    def _compiler(self, options: CompileOptions) -> Backend:
        """The compile driver's hooks for this backend and ``options`` (identity, pipeline,
        code generator, cache). The default runs no pipeline and generates nothing:
        ``_compile`` gets the module."""
        return Backend(identity=f"{self.platform_name} {self.platform_version}")


def compile_program(program, options: CompileOptions, backend: Backend) -> "DriverResult":
    """The driver's result for ``program`` (text or a ``Module``, never re-printed) with
    ``backend``'s hooks: from the backend's cache when it has the text's, else compiled, with
    the partitioner's errors as the contract's."""
    if isinstance(program, str):
        compiled = load_compiled(program, options, backend)
        if compiled is not None:
            return DriverResult.of(compiled)
        module = stablehlo.parse(program)
    else:
        verify_module(program)
        module = program
    request = CompileRequest(options, resolve_entry(module, options.entry),
                             count_option(module, options.num_replicas, "num_replicas"),
                             count_option(module, options.num_partitions, "num_partitions"))
    try:
        return DriverResult.of(compile_module(module, request, backend,
                                              text=program if isinstance(program, str)
                                              else None))
    except SpmdUnsupportedError as exc:
        raise UnimplementedError(str(exc)) from exc
    except ShardingError as exc:
        raise ArgumentError(str(exc)) from exc


@dataclasses.dataclass
class DriverResult(Compiled):
    """xla_core's ``Compiled`` with the facts the runtime contract asks of a compiled program
    (``pjrt.api.CompileResult``); the introspection figures follow XLA's conventions, so
    tools reading JAX's dicts work unchanged."""

    @classmethod
    def of(cls, compiled: Compiled) -> "DriverResult":
        return cls(**{f.name: getattr(compiled, f.name) for f in dataclasses.fields(compiled)})

    def fingerprint(self) -> str:
        """sha256 (hex) of the bound module's structure (no printing)."""
        return module_fingerprint(self.module)

    def entry_shardings(self, entry: str) -> tuple:
        """``(parameter tiles, result tiles)`` of ``@entry`` of the bound module."""
        return entry_shardings(self.module, entry)

    def cost_analysis(self, module: Module, entry: str) -> dict:
        """``{"flops", "transcendentals", "bytes accessed", "optimal_seconds"}`` of one run of
        ``@entry`` of ``module`` (the program as the backend runs it), as XLA reports them:
        ``xla_core.cost.module_cost``, a fusion counting its boundary bytes only (it is one
        kernel), and that cost's roofline time on ``COST_HARDWARE``."""
        from xla_core.cost import hardware, module_cost, roofline_seconds
        cost = module_cost(module, entry)
        return {"flops": cost.flops, "transcendentals": cost.transcendentals,
                "bytes accessed": cost.bytes_accessed,
                "optimal_seconds": roofline_seconds(cost, hardware(COST_HARDWARE))}

    def memory_stats(self, module: Module, entry: str) -> dict:
        """XLA's ``CompiledMemoryStats`` fields but the code size, from the buffer assignment
        of ``@entry`` of ``module``: the parameters' and results' bytes, ``alias`` the
        results living in a donated argument's storage, and ``temp`` what the peak needs
        beyond the arguments and the results that are not aliased (so that XLA's identity
        ``argument + output - alias + temp`` is our peak)."""
        from xla_core.buffers import assign_buffers
        func = entry_function(module, entry)
        assignment = assign_buffers(func)
        results = func.body.terminator.operands
        alias = sum(assignment.slots[v].size for v in set(results)
                    if v in assignment.slots and assignment.slots[v].parameter is not None)
        temp = assignment.peak_bytes - assignment.argument_bytes - (assignment.output_bytes
                                                                    - alias)
        return {"argument_size_in_bytes": assignment.argument_bytes,
                "output_size_in_bytes": assignment.output_bytes,
                "alias_size_in_bytes": alias,
                "temp_size_in_bytes": max(temp, 0)}
