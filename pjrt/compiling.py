"""Where the runtime contract hands a program to the compiler.

``Client.compile`` does no compiler work itself: it counts, traces and dumps the compile, then
calls ``compile_program`` here, which resolves what the contract owns (the entry function, the
replica and partition counts) and runs xla_core's one compile driver (``xla_core.compile``:
whole-program checks, SPMD partitioning, the backend's pipeline and code generation, the cache
key) with the hooks the backend gives through ``Client._compiler``. This is the only module of
the contract (pjrt/ outside plugins/) that imports xla_core; tools/tests/test_import_rules.py
holds it to that. The driver's facts about a compiled program that the contract reports
(structural fingerprint, entry shardings, global layouts) come through here as well.
"""
from __future__ import annotations

import stablehlo
from stablehlo.verify import verify_module
from xla_core.compile import (Backend, CompileRequest, ShardingError, SpmdUnsupportedError,
                              assemble_global, compile_module, entry_shardings, global_shape,
                              load_compiled, module_fingerprint, split_global)

from pjrt.arguments import count_option, resolve_entry
from pjrt.errors import ArgumentError, UnimplementedError

__all__ = ["Backend", "compile_program", "assemble_global", "entry_shardings", "global_shape",
           "module_fingerprint", "split_global"]


def compile_program(program, options, backend: Backend):
    """The driver's result (``xla_core.compile.Compiled``) for ``program`` (text or a
    ``Module``, never re-printed) with ``backend``'s hooks: from the backend's cache when it
    has the text's, else compiled, with the partitioner's errors as the contract's."""
    if isinstance(program, str):
        compiled = load_compiled(program, options, backend)
        if compiled is not None:
            return compiled
        module = stablehlo.parse(program)
    else:
        verify_module(program)
        module = program
    request = CompileRequest(options, resolve_entry(module, options.entry),
                             count_option(module, options.num_replicas, "num_replicas"),
                             count_option(module, options.num_partitions, "num_partitions"))
    try:
        return compile_module(module, request, backend,
                              text=program if isinstance(program, str) else None)
    except SpmdUnsupportedError as exc:
        raise UnimplementedError(str(exc)) from exc
    except ShardingError as exc:
        raise ArgumentError(str(exc)) from exc
