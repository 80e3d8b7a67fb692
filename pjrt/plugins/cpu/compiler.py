"""The cpu backend's compile step: a verified module -> a native executable.

``CompiledProgram`` owns the native Executable that lowering.py built, the list of ops
that fall back to the interpreter, and the conversions between host arrays and what the
native side stores. A program that cannot be lowered at all (tuples, dynamic shapes,
multi-block regions) still runs: as one interpreter call wrapped in a native executable
when its signature is storable, else on the interpreter directly (synchronous numpy path
only); ``whole_program_fallback`` gives the reason.
"""
from __future__ import annotations

import logging

import numpy as np

from stablehlo.ir.core import Func, Module
from stablehlo.instrument import trace

from pjrt.plugins.cpu.lowering import (
    Fallback, HostState, Lowering, NotLowerable, as_stored, from_stored, native_type, stored_raw)
from pjrt.plugins.cpu.native_module import native

LOG = logging.getLogger("openhlo.cpu")


class CompiledProgram:
    def __init__(self, module: Module, func: Func, probe_dir=None, num_replicas: int = 1,
                 num_partitions: int = 1, fusions=None, compile_now: bool = True):
        # The replica/partition grid fixes the process groups of native collectives.
        self.module = module
        self.func = func
        self.probe_dir = probe_dir
        self.parameter_types = list(func.type.inputs)
        self.result_types = list(func.type.results)
        self.fallbacks: list[Fallback] = []
        self.compiled: list[str] = []  # ops run as generated kernels (codegen/)
        self.fusions_generated: list[str] = []  # openhlo.fusion composites run as kernels
        self.fusions_inlined: list = []  # (place, reason) of fusions run op by op
        self.whole_program_fallback: str | None = None
        self.num_instructions = 0
        self.native = None  # native Executable, or None: interpreter only
        self.fusion_library = None  # codegen FusionLibrary of ``func`` (kept by the cache)
        self.cache_hit = False  # loaded from the persistent compilation cache
        # Generated code was left out to be compiled in the background (tiering.py).
        self.deferred = False
        self.pass_seconds: list = []  # (pass, seconds) of the pipeline that made ``module``
        try:
            lowering = Lowering(module, probe_dir, num_replicas, num_partitions, fusions,
                                compile_now)
            # Kernel generation and lowering to the executor's program (kernel compiles
            # inside are spans of their own).
            with trace.span("codegen", "compile", function=func.name):
                lowered = lowering.lower(func)
            self.deferred = lowering.deferred
            self.fusion_library = lowering.fusions
            self.native = lowered.executable
            self.fallbacks = lowered.fallbacks
            self.num_instructions = lowered.num_instructions
            self.compiled = lowered.compiled
            self.fusions_generated = lowered.fusions_generated
            self.fusions_inlined = lowered.fusions_inlined
        except NotLowerable as exc:
            self.whole_program_fallback = str(exc)
            LOG.info("@%s runs on the interpreter as a whole: %s", func.name, exc)
            self.native = self._interpreter_executable()
        # Results whose stored dtype differs (raw-byte types) are viewed back on the way out.
        self._result_views = [stored_raw(t) for t in self.result_types]
        self._param_views = [stored_raw(t) for t in self.parameter_types]

    def _interpreter_executable(self):
        """One CALLBACK instruction evaluating the whole function, if its signature is
        storable natively; else None."""
        try:
            params = [native_type(t) for t in self.parameter_types]
            results = [native_type(t) for t in self.result_types]
        except NotLowerable:
            return None
        func, types = self.func, self.parameter_types

        def run_whole(host_state, ids, arrays):
            args = [from_stored(a, t) for a, t in zip(arrays, types)]
            outs = _evaluate(host_state, func, args)
            return [as_stored(o, t) for o, t in zip(outs, self.result_types)]

        n = len(params)
        program = native().Program(list(range(n)))
        program.add_callback(f"@{func.name}", run_whole, list(range(n)),
                             list(range(n, n + len(results))), results)
        program.results = list(range(n, n + len(results)))
        return native().Executable(func.name, n + len(results), program, params, results)

    # -- running ------------------------------------------------------------------------
    def host_state(self, process=None):
        """The state interpreter fallbacks of one execution share (probes, the process of
        a multi-device run); None when nothing in the program falls back."""
        if process is None and not self.fallbacks and self.whole_program_fallback is None:
            return None
        return HostState(self.module, self.probe_dir, process)

    def run(self, args: list, process=None) -> list:
        """Runs on the calling thread: host arrays (already checked) in, numpy arrays out."""
        state = self.host_state(process) or HostState(self.module, self.probe_dir, process)
        replica, partition = (process.replica_id, process.partition_id) if process else (0, 0)
        if self.native is None:
            return _evaluate(state or HostState(self.module, self.probe_dir), self.func, args)
        stored = [as_stored(a, t) if view else a
                  for a, t, view in zip(args, self.parameter_types, self._param_views)]
        outs = self.native.run(stored, state, replica, partition)
        return self.view_results(outs)

    def view_results(self, outs: list) -> list:
        if not any(self._result_views):
            return outs
        return [from_stored(o, t) if view else o
                for o, t, view in zip(outs, self.result_types, self._result_views)]


def _evaluate(state: HostState, func: Func, args: list) -> list:
    ctx = state.context()
    with np.errstate(all="ignore"):
        return ctx.call_func(func, args)
