"""The partitioner's control-flow ops (while, case, if): their regions are partitioned in
place, on pieces, by the same per-op rules as the function's body.

Propagation gave a while's carried values one sharding each (result, condition and body
arguments, body result): the operands are resharded to it once, before the loop, and the
body's results to it at the end of each iteration (nothing to do when the body kept the
layout, the usual case). A case/if's branches each yield their results in the result's layout.
Values from outside a region that it uses are resharded inside it, where needed.
"""
from __future__ import annotations

from stablehlo.ir.core import Operation, Region


class ControlFlow:
    """Mixed into ``_Partitioner`` (``partitioner.py``), whose state and helpers it uses."""

    def _control_flow(self, op: Operation, outs) -> None:
        if op.name == "stablehlo.while":
            operands = [self._reshard(v, d) for v, d in zip(op.operands, outs)]
            cond, body = op.regions
            regions = [self._region(cond, outs, [()]), self._region(body, outs, outs)]
        else:  # the branch index (or predicate) is a scalar, whole on every device
            operands = [self._reshard(op.operands[0], ())]
            regions = [self._region(r, [], outs) for r in op.regions]
        self._emit(op, operands, outs, regions)

    def _region(self, region: Region, arg_dims, result_dims) -> Region:
        """``region`` partitioned: its block takes pieces laid out as ``arg_dims`` and
        yields pieces laid out as ``result_dims``. What is built inside stays inside: the
        reshard cache and the partition index are restored afterwards."""
        block = region.block
        saved = self.cache, self.partition_index
        self.cache = dict(self.cache)

        def body(*pieces):
            for arg, piece, dims in zip(block.arguments, pieces, arg_dims):
                self.home[arg] = (piece, tuple(dims))
            for inner in block.operations[:-1]:
                self._op(inner)
            return [self._reshard(v, d) for v, d in zip(block.terminator.operands, result_dims)]

        types = [self._local_type(a.type, d) for a, d in zip(block.arguments, arg_dims)]
        try:
            return self.b.region(types, body)
        finally:
            self.cache, self.partition_index = saved


__all__ = ["ControlFlow"]
