"""The cpu backend's compiler pipeline: which xla_core passes run before lowering.

Optimization levels (``CompileOptions(env_option_overrides={"opt_level": N})``, else
``make_client("cpu", opt_level=N)``, else the ``OPENHLO_CPU_OPT_LEVEL`` environment
variable, else 1):

* 0: the program is lowered as given (op by op on native kernels);
* 1: xla_core's ``cpu`` pipeline (inline, canonicalize, algebraic simplification, constant
  folding, CSE, transpose folding, DCE, priority fusion, the memory scheduler), then the
  fusions become generated C++ kernels (codegen/).

The passes work on a copy: ``Executable.module`` stays the program the user gave. Passes
are not re-verified one by one here (the input was verified and each pass's own tests
verify its output); ``OPENHLO_VERIFY_PASSES=1`` turns that on for debugging. A pass that
fails is a compiler bug: the program then compiles unoptimized, with a warning naming it.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field, replace

from stablehlo.ir.core import Module
from xla_core.ir_utils import clone_operation
from xla_core.fusion import FusionPass
from xla_core.passes import PassContext, make_pipeline

from pjrt.plugins.cpu.codegen.hook import CPU_CODEGEN

LOG = logging.getLogger("openhlo.cpu")

DEFAULT_OPT_LEVEL = 1
PIPELINE_OF_LEVEL = {0: None, 1: "cpu"}


def opt_level(options=None, client_level=None) -> int:
    """The level asked for: the compile options', else the client's, else the environment's,
    else the default."""
    given = options.env_option_overrides.get("opt_level") if options is not None else None
    source = "env_option_overrides['opt_level']"
    if given is None and client_level is not None:
        given, source = client_level, "opt_level"
    if given is None and os.environ.get("OPENHLO_CPU_OPT_LEVEL"):
        given, source = os.environ["OPENHLO_CPU_OPT_LEVEL"], "OPENHLO_CPU_OPT_LEVEL"
    if given is None:
        return DEFAULT_OPT_LEVEL
    try:
        level = int(given)
    except (TypeError, ValueError):
        level = -1
    if level not in PIPELINE_OF_LEVEL or isinstance(given, bool):
        from pjrt.api import ArgumentError
        raise ArgumentError(f"{source} must be one of {sorted(PIPELINE_OF_LEVEL)}, "
                            f"got {given!r}")
    return level


@dataclass
class Optimized:
    module: Module                      # what gets lowered
    pass_seconds: list = field(default_factory=list)  # (pass name, seconds)
    failure: str | None = None          # why the pipeline was abandoned, if it was


def optimize(module: Module, level: int) -> Optimized:
    pipeline_name = PIPELINE_OF_LEVEL[level]
    if pipeline_name is None:
        return Optimized(module)
    copy = Module(clone_operation(module.op, {}))
    ctx = PassContext(verify=os.environ.get("OPENHLO_VERIFY_PASSES") == "1")
    pipeline = make_pipeline(pipeline_name)
    # Fusion forms only what the cpu code generator can emit (codegen/hook.py).
    pipeline.passes = [replace(p, codegen=CPU_CODEGEN) if isinstance(p, FusionPass) else p
                       for p in pipeline.passes]
    start = time.perf_counter()
    try:
        pipeline.run(copy, ctx)
    except Exception as exc:  # noqa: BLE001 - any pass bug: run the program unoptimized
        failed = pipeline.passes[min(len(ctx.records), len(pipeline.passes) - 1)].name
        LOG.warning("the %s pipeline failed in pass %s; compiling unoptimized: %s: %s",
                    pipeline_name, failed, type(exc).__name__, exc)
        return Optimized(module, failure=f"{failed}: {exc}")
    LOG.debug("%s pipeline: %.1f ms", pipeline_name, 1e3 * (time.perf_counter() - start))
    return Optimized(copy, [(r.name, r.seconds) for r in ctx.records])
