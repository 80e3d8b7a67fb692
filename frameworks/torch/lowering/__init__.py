"""ATen -> StableHLO lowering: the registry, and one module of rules per op family.

Importing this package registers every rule (each family module registers its own).
"""
from frameworks.torch.lowering import (  # noqa: F401  (each registers its rules)
    attention, constraint, elementwise, indexing, linalg, pooling, quantized, reductions, shape,
    sorting)
from frameworks.torch.lowering.graph import (LoweringFailed, can_lower, eager_by_design,
                                            lower_nodes, op_name)
from frameworks.torch.lowering.registry import LOWERINGS, Unsupported, lowers

__all__ = ["LOWERINGS", "lowers", "Unsupported", "LoweringFailed", "lower_nodes", "can_lower",
           "eager_by_design", "op_name"]
