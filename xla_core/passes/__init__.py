"""Pass registry entries: every pass shipped with xla_core, by CLI name.

Entries are lazy ``"module:Class"`` strings so that importing the registry
does not import every pass.
"""
from xla_core.passes.base import (PASSES, PIPELINES, Pass, PassContext, PassError, PassRecord,
                                  Pipeline, make_pass, make_pipeline, parse_pass_list)

PASSES.register("inline", "xla_core.passes.inline:InlinePass")
PASSES.register("dce", "xla_core.passes.dce:DcePass")
PASSES.register("cse", "xla_core.passes.cse:CsePass")
PASSES.register("constant-fold", "xla_core.passes.constant_fold:ConstantFoldPass")
PASSES.register("algebraic-simplifier",
                "xla_core.passes.algebraic_simplifier:AlgebraicSimplifierPass")
PASSES.register("memory-schedule", "xla_core.buffers.scheduler:MemorySchedulePass")


def _default_pipeline() -> Pipeline:
    """The target-independent cleanup every backend starts from."""
    return Pipeline("default", parse_pass_list(
        "inline,algebraic-simplifier,constant-fold,cse,dce"))


PIPELINES.register("default", _default_pipeline)

__all__ = ["PASSES", "PIPELINES", "Pass", "PassContext", "PassError", "PassRecord", "Pipeline",
           "make_pass", "make_pipeline", "parse_pass_list"]
