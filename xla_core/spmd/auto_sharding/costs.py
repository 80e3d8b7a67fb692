"""What a strategy costs on one device of the mesh, from the per-hardware cost model.

- compute: the roofline time (``xla_core.cost.roofline_seconds``) of the op's share: the
  flops of its unfused cost (``op_cost``) divided by the pieces the strategy cuts its work
  into, the bytes of the pieces of its operands and results it reads and writes;
- a collective over mesh axes: the link of those axes
  (``HardwareDescription.collective_link``; the slowest one when a group spans several) and
  the bytes a ring algorithm moves per device (``scheduling.estimator.ring_factor``, the
  scheduler's own table);
- resharding a value from one layout to another: the plan the partitioner would build
  (``reshard.plan``): its all-gathers and all-to-alls as collectives over their axes, a local
  slice as a copy of the piece at memory bandwidth.

The hardware description is one device's: on the cpu backend's virtual devices, which share
the host's cores, pass ``description.shared_by(n)`` to rank plans as they will run there.
"""
from __future__ import annotations

import math

from stablehlo.ir.core import Operation
from stablehlo.ir.sharding import Mesh
from stablehlo.ir.types import TensorType

from xla_core.cost import Cost, HardwareDescription, op_cost, roofline_seconds, type_bytes
from xla_core.scheduling.estimator import ring_factor
from xla_core.spmd import reshard
from xla_core.spmd.auto_sharding.layouts import pieces


class CostModel:
    """Seconds per device of compute, collectives and reshards on ``hardware`` over
    ``mesh``."""

    def __init__(self, hardware: HardwareDescription, mesh: Mesh):
        self.hardware = hardware
        self.mesh = mesh
        self._op_costs: dict = {}
        self._reshards: dict = {}
        self._local: dict = {}

    def compute(self, op: Operation, parts: int, ins, outs) -> float:
        """Seconds one device computes its share of ``op``: ``1/parts`` of the flops, and the
        bytes of its operands' pieces laid out ``ins`` and its results' pieces laid out
        ``outs`` (a dot with a split batch still reads the whole weight)."""
        cost = self._op_costs.get(op)
        if cost is None:
            cost = self._op_costs[op] = op_cost(op)
        if cost.flops == 0 and cost.bytes_accessed == 0:
            return 0.0  # aliased or folded: no kernel (as the scheduler's estimator has it)
        read = self._fraction(op.operands, ins)
        written = self._fraction(op.results, outs)
        share = Cost(cost.flops / parts, cost.bytes_read * read, cost.bytes_written * written,
                     cost.transcendentals / parts)
        return roofline_seconds(share, self.hardware)

    def _fraction(self, values, layouts) -> float:
        """The part of ``values``' bytes one device holds with them laid out ``layouts``."""
        total = local = 0.0
        for v, dims in zip(values, layouts):
            if dims is not None and isinstance(v.type, TensorType):
                total += self.local_bytes(v.type, ())
                local += self.local_bytes(v.type, dims)
        return local / total if total else 1.0

    def collective(self, name: str, nbytes: float, axes) -> float:
        """Seconds of collective ``name`` (``stablehlo.all_reduce``, ...) among the devices
        along ``axes``, ``nbytes`` being its operand bytes per device (all_gather: result)."""
        n = math.prod(self.mesh.axis_size(a) for a in axes)
        if n == 1:
            return 0.0
        links = [self.hardware.collective_link(a) for a in axes]
        latency = max(link[0] for link in links)
        bandwidth = min(link[1] for link in links)
        return latency + ring_factor(name, n) * nbytes / bandwidth

    def local_bytes(self, t: TensorType, dims) -> float:
        """Bytes of one device's piece of a value of type ``t`` laid out ``dims``."""
        key = (t, tuple(dims))
        found = self._local.get(key)
        if found is None:
            found = self._local[key] = type_bytes(t) / pieces(dims, self.mesh)
        return found

    def reshard(self, t: TensorType, have, target) -> float:
        """Seconds to turn a device's piece laid out ``have`` into one laid out ``target``."""
        if tuple(have) == tuple(target):
            return 0.0
        key = (t, tuple(have), tuple(target))
        seconds = self._reshards.get(key)
        if seconds is None:
            seconds = self._reshards[key] = self._reshard(t, have, target)
        return seconds

    def _reshard(self, t: TensorType, have, target) -> float:
        size = self.mesh.axis_size
        itemsize = type_bytes(t) / max(1, math.prod(t.shape))
        local = tuple(e // math.prod(size(a) for a in axes) for e, axes in zip(t.shape, have))
        steps, _ = reshard.plan(have, target, local, itemsize, size)
        seconds = 0.0
        for step, nbytes in zip(steps, reshard.step_bytes(steps, local, itemsize, size)):
            if step[0] == "all_gather":
                seconds += self.collective("stablehlo.all_gather", nbytes, step[2])
            elif step[0] == "all_to_all":
                seconds += self.collective("stablehlo.all_to_all", nbytes, (step[3],))
        if any(step[0] == "slice" for step in steps):  # the cut piece is copied out locally
            out = self.local_bytes(t, target)
            seconds += roofline_seconds(Cost(bytes_read=out, bytes_written=out), self.hardware)
        return seconds


__all__ = ["CostModel"]
