"""The collectives of a partitioned program, counted as XLA's summaries count them: one entry
per collective op, with its per-device result bytes (all results of a combined op)."""
from __future__ import annotations

import math

import numpy as np

from stablehlo.ir.core import Module
from stablehlo.ir.types import numpy_dtype

KINDS = {"stablehlo.all_reduce": "all-reduce", "stablehlo.all_gather": "all-gather",
         "stablehlo.all_to_all": "all-to-all", "stablehlo.reduce_scatter": "reduce-scatter",
         "stablehlo.collective_permute": "collective-permute"}


def collectives(module: Module) -> list:
    """``[(kind, per-device result shape, bytes per device)]`` in program order; a combined
    (variadic) collective has a tuple of shapes."""
    out = []
    for op in module.walk():
        if op.name in KINDS:
            types = [r.type for r in op.results]
            nbytes = sum(math.prod(t.shape) * np.dtype(numpy_dtype(t.element_type)).itemsize
                         for t in types)
            shape = tuple(types[0].shape) if len(types) == 1 else tuple(tuple(t.shape)
                                                                          for t in types)
            out.append((KINDS[op.name], shape, nbytes))
    return out


__all__ = ["KINDS", "collectives"]
