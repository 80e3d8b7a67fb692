"""Scheduling and buffer assignment.

* ``assign_buffers(func, schedule=None) -> BufferAssignment``: live ranges,
  in-place sharing and a heap packing of a function body; ``.peak_bytes``,
  ``.intermediate_bytes``, ``.argument_bytes``, ``.output_bytes``, per-value
  ``.slots`` and ``.report()``.
* ``inplace_pairs(op)``: ``(result_index, operand_index)`` pairs an op may
  write in place.
* the ``memory-schedule`` pass (``MemorySchedulePass``), registered in
  ``xla_core.passes``.
"""
from xla_core.buffers.assignment import BufferAssignment, Slot, assign_buffers
from xla_core.buffers.inplace import inplace_pairs
from xla_core.buffers.liveness import BlockGraph, BuffersError, NestedPeaks
from xla_core.buffers.scheduler import MemorySchedulePass, best_schedule

__all__ = ["BlockGraph", "BufferAssignment", "BuffersError", "MemorySchedulePass", "NestedPeaks",
           "Slot", "assign_buffers", "best_schedule", "inplace_pairs"]
