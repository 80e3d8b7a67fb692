"""The cpu backend's compiler pipeline: which xla_core passes run before code generation.

Optimization levels (``CompileOptions(env_option_overrides={"opt_level": N})``, else
``make_client("cpu", opt_level=N)``, else the ``OPENHLO_CPU_OPT_LEVEL`` environment
variable, else 1):

* 0: the program is lowered as given (op by op on native kernels);
* 1: the ``cpu`` pipeline (``cpu_pipeline``: xla_core's target-independent ``cpu-opt``
  cleanup, then priority fusion and the memory scheduler), then the fusions become
  generated C++ kernels (codegen/).

The pipeline is registered as ``cpu`` in xla_core's pipeline registry (by pjrt/registry.py,
lazily, next to the backend itself), so ``openhlo opt --pipeline=cpu`` runs it too. xla_core's
compile driver runs it, on a copy of the program (see ``xla_core/compile/driver.py``).
"""
from __future__ import annotations

import os
from dataclasses import replace

from xla_core.fusion import FusionPass
from xla_core.passes import Pipeline, make_pipeline, parse_pass_list

from pjrt.plugins.cpu.codegen.hook import CPU_CODEGEN

DEFAULT_OPT_LEVEL = 1
PIPELINE_OF_LEVEL = {0: None, 1: "cpu"}


def cpu_pipeline() -> Pipeline:
    """The cpu backend's whole pipeline: cpu-opt, then fusion (constant folding first, so
    constant-only subprograms are folded rather than fused), dce of what fusion left, and
    the memory scheduler last, on the fused program the executor will run. Fusion forms
    only what the cpu code generator can emit (codegen/hook.py)."""
    passes = make_pipeline("cpu-opt").passes + parse_pass_list("fusion,dce,memory-schedule")
    return Pipeline("cpu", [replace(p, codegen=CPU_CODEGEN) if isinstance(p, FusionPass)
                            else p for p in passes])


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
