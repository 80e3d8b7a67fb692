"""Fusion: group ops into ``openhlo.fusion`` composites that each become one kernel.

    from xla_core.fusion import fuse_module
    explain = fuse_module(module, hardware="generic-cpu")
    print("\\n".join(explain.lines), explain.counters)

Or as a pass: ``openhlo opt f.mlir --passes=fusion --explain-fusion``.
See README.md in this directory for the algorithm and the representation.
"""
from xla_core.fusion.explain import LOGGER, Explain
from xla_core.fusion.fuse import FusionPass, fuse_module
from xla_core.fusion.legality import FUSION_NAME

__all__ = ["FUSION_NAME", "LOGGER", "Explain", "FusionPass", "fuse_module"]
