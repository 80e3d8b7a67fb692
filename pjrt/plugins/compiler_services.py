"""The compiler's services that the framework adapters use directly: pass pipelines run on a
module, auto-sharding plans, and the quantizer.

Frameworks talk to the runtime, never to xla_core (ARCHITECTURE.md); backends reach the
compiler through pjrt/plugins. Some framework entry points need the compiler itself rather
than a compiled executable: `frameworks.jax.auto_sharding` returns the shardings a plan
chose before anything is compiled, PyTorch's `use_spmd(auto=True)` annotates each graph
with its plan, and `quantize_` quantizes weights with the quantizer's own rules. They get
those services here, by name, so the one-way rule stays checkable and the compiler's
internals can move without touching the frameworks.
"""
from __future__ import annotations

from stablehlo.ir.core import Module
from xla_core.ir_utils import clone_operation
from xla_core.passes import PassContext, Pipeline, parse_pass_list
from xla_core.quantization import (QuantizationError, QuantizationReport, quantize,
                                   quantize_activation, quantize_weights)
from xla_core.spmd.auto_sharding import (DEFAULT_TIME_LIMIT_S, AutoShardingError, Plan,
                                         apply_plan, auto_shard, parse_bytes)


def run_passes(module: Module, passes: str) -> Module:
    """``module`` rewritten in place by the pass list ``passes`` (``"inline"``,
    ``"quant-lower"``, ...), verified after each pass; returns it."""
    Pipeline(passes, parse_pass_list(passes)).run(module, PassContext())
    return module


def copy_module(module: Module) -> Module:
    """A deep copy of ``module`` (passes change modules in place)."""
    return Module(clone_operation(module.op, {}))


__all__ = ["AutoShardingError", "DEFAULT_TIME_LIMIT_S", "Plan", "QuantizationError",
           "QuantizationReport", "apply_plan", "auto_shard", "copy_module", "parse_bytes",
           "quantize", "quantize_activation", "quantize_weights", "run_passes"]
