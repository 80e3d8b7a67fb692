"""The OpenHLO compiler: passes and pipelines over StableHLO modules.

    from xla_core import parse_pass_list, Pipeline, PassContext
    Pipeline("mine", parse_pass_list("inline,dce")).run(module, PassContext(timing=True))
"""
from xla_core.passes import (PASSES, PIPELINES, Pass, PassContext, PassError, Pipeline,
                             make_pass, make_pipeline, parse_pass_list)

__all__ = ["PASSES", "PIPELINES", "Pass", "PassContext", "PassError", "Pipeline", "make_pass",
           "make_pipeline", "parse_pass_list"]
