"""The executable description: the buffers and steps a GPU runtime runs a program with.

``describe(module, func, out_dir)`` walks the optimized entry function in its schedule and
writes ``executable.json``'s content (format ``openhlo-cuda-executable/1``, README.md):

* buffers: one per parameter (``param``), one arena for every value the body defines
  (``temp``: the heap of xla_core's buffer assignment, so values whose lives do not overlap
  share bytes; a value lives at its slot's offset), one per constant (``const``, its bytes
  in ``const_<n>.bin`` next to it), and one per function result (``temp``), which the step
  that computes the result writes directly, or a copy step fills (a parameter or a
  constant returned as it is);
* steps in program order: a kernel ``launch`` per fusion or lone fusible op (args: device
  pointers to its operands then its results, a buffer id or ``{"id", "offset"}``), per
  gather, dynamic_slice or dynamic_update_slice, and per scatter after a ``copy`` of each
  input into its result (codegen/indexing.py: its args are the indices, updates, results), a
  ``gemm`` (or a few) per dot_general (gemm.py), a ``copy`` per reshape, copy or bitcast_convert
  (row-major: the same bytes), per convolution an im2col launch into the ``scratch`` buffer
  and a gemm, or a direct kernel's launch (codegen/convolution.py).

An op it cannot express raises NotClaimed with the op and its location.
"""
from __future__ import annotations

import os

import numpy as np

from stablehlo.ir.core import Func, Module, Operation, Value
from xla_core.buffers import assign_buffers
from xla_core.buffers.liveness import value_bytes
from xla_core.codegen import NotGeneratable

from pjrt.errors import UnimplementedError
from pjrt.plugins.cuda.codegen.convolution import ConvolutionPlan
from pjrt.plugins.cuda.codegen.indexing import INDEXING_OPS, indexing_kernel, scatter_operands
from pjrt.plugins.cuda.codegen.source import KernelSet, is_fusion, kernel_of, why_not_lone
from pjrt.plugins.cuda.gemm import gemm_steps

FORMAT = "openhlo-cuda-executable/1"
# Ops whose result has its operand's bytes (row-major everywhere; a bitcast_convert's bytes
# are its operand's, whatever its element types, when both have as many).
_SAME_BYTES = ("stablehlo.reshape", "stablehlo.copy", "stablehlo.bitcast_convert")


class NotClaimed(UnimplementedError):
    """A program op the cuda backend cannot run (the message names it and its place)."""


def not_claimed(op: Operation, why: str) -> NotClaimed:
    return NotClaimed(f"{op.where()}: the cuda backend cannot run this op: {why}")


class Description:
    """``executable.json``'s content, built op by op."""

    def __init__(self, module: Module, func: Func, out_dir: str | None):
        self.module = module
        self.out_dir = out_dir
        self.kernels = KernelSet()
        self.buffers: list[dict] = []
        self.steps: list[dict] = []
        self.where: dict[Value, object] = {}  # value -> buffer reference
        self.assignment = assign_buffers(func)
        for i, p in enumerate(func.body.arguments):
            self.where[p] = self._buffer("param", value_bytes(p, func.op), param=i)
        arena = self.assignment.heap_bytes
        self.arena = self._buffer("temp", arena) if arena else None
        self.returned = _returned(func)
        self.results: list[int] = []
        self.written_params: set[int] = set()  # donated parameters the steps write into
        self.scratch: int | None = None  # im2col matrices (codegen/convolution.py)

    def _buffer(self, kind: str, nbytes: int, **extra) -> int:
        self.buffers.append({"id": len(self.buffers), "bytes": int(nbytes), "kind": kind,
                             **extra})
        return len(self.buffers) - 1

    def _place(self, value: Value, op: Operation):
        """Where ``value`` that ``op`` computes lives: its own buffer when it is a function
        result, else its slot (the arena's, or a donated parameter's)."""
        if value in self.returned and value not in self.where:
            self.where[value] = self._buffer("temp", value_bytes(value, op))
        elif value not in self.where:
            slot = self.assignment.slots[value]
            base = slot.parameter if slot.parameter is not None else self.arena
            if slot.parameter is not None:
                self.written_params.add(self.buffers[base]["param"])
            self.where[value] = base if slot.offset == 0 else {"id": base,
                                                               "offset": slot.offset}
        return self.where[value]

    def add(self, op: Operation) -> None:
        if op.name == "func.return":
            self._returns(op)
        elif op.name == "stablehlo.constant":
            self._constant(op)
        elif op.name == "stablehlo.dot_general":
            try:
                steps = gemm_steps(op, self.where[op.operands[0]], self.where[op.operands[1]],
                                   self._place(op.results[0], op))
            except NotGeneratable as exc:
                raise not_claimed(op, f"no cuBLAS GEMM for it: {exc}") from None
            self.steps += steps
        elif op.name == "stablehlo.convolution":
            self._convolution(op)
        elif op.name in _SAME_BYTES:
            nbytes = value_bytes(op.results[0], op)
            if value_bytes(op.operands[0], op) != nbytes:
                raise not_claimed(op, "its operand and result have different byte sizes")
            self._copy(self.where[op.operands[0]], self._place(op.results[0], op), nbytes)
        elif op.name == "stablehlo.scatter":
            for source, result in zip(op.operands, op.results):
                self._copy(self.where[source], self._place(result, op),
                           value_bytes(result, op))
            self._launch(op, scatter_operands(op))
        elif op.name in INDEXING_OPS:
            self._launch(op)
        elif is_fusion(op) or why_not_lone(op) is None:
            self._launch(op)
        else:
            raise not_claimed(op, f"no kernel, library call or copy does it "
                                  f"({why_not_lone(op)})")

    def _launch(self, op: Operation, operands: list | None = None) -> None:
        """A launch of ``op``'s kernel on ``operands`` (default: all of them), then its
        results."""
        operands = list(op.operands) if operands is None else operands
        try:
            kernel = indexing_kernel(op) if op.name in INDEXING_OPS else \
                kernel_of(op, self.module)
        except NotGeneratable as exc:
            raise not_claimed(op, f"its kernel is not generated: {exc}") from None
        args = [self.where[v] for v in operands] + [self._place(r, op) for r in op.results]
        self.steps.append({"op": "launch", "kernel": self.kernels.add(kernel),
                           "grid": list(kernel.grid), "block": list(kernel.block),
                           "shared": 0, "args": args,
                           "bytes": [value_bytes(v, op) for v in (*operands, *op.results)]})

    def _convolution(self, op: Operation) -> None:
        try:
            plan = ConvolutionPlan(op)
        except NotGeneratable as exc:
            raise not_claimed(op, f"its kernel is not generated: {exc}") from None
        scratch = self._scratch(plan.scratch_bytes) if plan.scratch_bytes else None
        for step in plan.steps(self.where[op.operands[0]], self.where[op.operands[1]],
                               self._place(op.results[0], op), scratch):
            if step["op"] == "launch":
                step["kernel"] = self.kernels.add(step["kernel"])
            self.steps.append(step)

    def _scratch(self, nbytes: int) -> int:
        """The scratch buffer (a temp of its own, which every step that needs one shares:
        steps run one after another), at least ``nbytes`` long."""
        if self.scratch is None:
            self.scratch = self._buffer("temp", nbytes)
        self.buffers[self.scratch]["bytes"] = max(self.buffers[self.scratch]["bytes"], nbytes)
        return self.scratch

    def _copy(self, src, dst, nbytes: int) -> None:
        if src != dst:
            self.steps.append({"op": "copy", "src": src, "dst": dst, "bytes": nbytes})

    def _constant(self, op: Operation) -> None:
        value = op.results[0]
        array = np.broadcast_to(np.asarray(op.attributes["value"].array),
                                tuple(value.type.shape))
        name = f"const_{sum(b['kind'] == 'const' for b in self.buffers)}.bin"
        data = np.ascontiguousarray(array).tobytes()
        if len(data) != value_bytes(value, op):
            raise not_claimed(op, f"a constant of {value.type} has no plain byte layout")
        if self.out_dir is not None:
            with open(os.path.join(self.out_dir, name), "wb") as f:
                f.write(data)
        self.where[value] = self._buffer("const", len(data), const=name)

    def _returns(self, op: Operation) -> None:
        """Each result in a buffer of its own: a parameter, a constant or a value returned
        twice is copied into one."""
        mine: set = set()
        for v in op.operands:
            ref = self.where[v]
            own = ref if isinstance(ref, int) else None
            if own is None or own in mine or self.buffers[own]["kind"] != "temp" or \
                    own == self.arena:
                own = self._buffer("temp", value_bytes(v, op))
                self._copy(ref, own, value_bytes(v, op))
            mine.add(own)
            self.results.append(own)

    def json(self, target: str, cubin: str | None, params: list[dict],
             result_types: list[dict]) -> dict:
        return {"format": FORMAT, "target": target, "cubin": cubin, "params": params,
                "results": self.results, "result_types": result_types,
                "buffers": self.buffers, "steps": self.steps,
                "written_params": sorted(self.written_params)}


def _returned(func: Func) -> set:
    terminator = func.body.operations[-1]
    return set(terminator.operands) if terminator.name == "func.return" else set()
