"""A fusion kernel being written: its parameters, results, body, and the shared helpers of the
templates (loop.py, reduction.py, output.py).

Each template turns the fusion's decomposition into a *part* (target.py) over index
expressions (index.py) whose values come from ``Body`` (body.py); the backend's
``KernelTarget`` makes it a kernel. The innermost loop of a part runs over a contiguous
dimension so the compiler vectorizes it.
"""
from __future__ import annotations

import numpy as np

from stablehlo.ir.core import Operation

from xla_core.codegen.body import Body
from xla_core.codegen.index import linear
from xla_core.codegen.target import SYMBOL, KernelTarget


def size(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


class Kernel:
    """The text of one fusion kernel (``SYMBOL`` stands for its name)."""

    def __init__(self, fusion: Operation, func, target: KernelTarget):
        self.fusion = fusion
        self.func = func
        self.target = target
        self.renderer = target.renderer
        self.math: set = set()
        self.globals: list[str] = []
        block = func.body
        self.params = list(block.arguments)
        self.ops = [op for op in block.operations if op.name != "func.return"]
        self.results = list(block.operations[-1].operands)
        names = {a: f"in{k}" for k, a in enumerate(self.params)}
        self.body = Body(self.renderer, names, self.math, self.globals, SYMBOL)
        self.result_types = [r.type for r in fusion.results]

    def source(self, part: list[str], tasks: int, min_chunk: int) -> str:
        """The kernel running ``part`` over ``[0, tasks)`` (KernelTarget.kernel)."""
        ctype = self.renderer.ctype
        bound = self.target.bind([ctype(v.type) for v in self.params],
                                 [ctype(r.type) for r in self.results])
        return self.target.kernel(bound + part, tasks, max(1, min_chunk))

    def store(self, k: int, v, idx, shape) -> str:
        """out_k at the row-major position of ``idx`` in ``shape`` (a reshape of the result
        keeps that position) = v there."""
        return f"out{k}[{linear(idx, shape)}] = {self.body.at(v, self._idx_for(v, idx, shape))};"

    def _idx_for(self, v, idx, shape):
        vshape = list(v.type.shape)
        if vshape == list(shape):
            return idx
        return self.body.reshape(idx, list(shape), vshape)


def loop_vars(body: Body, shape, var: str) -> tuple:
    return body.delinearize(var, shape) if shape else ()
