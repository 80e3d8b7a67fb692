"""``LoweringContext``: what a lowering rule sees of its FX node, plus the shared helpers
every rule uses for dtypes, scalars and broadcasting (so no rule repeats them).

Type promotion is torch's own: the result dtype of a node is read from its FakeTensor
(``node.meta['val']``) and rules convert their operands to it; only ops whose result dtype
is not the computation dtype (comparisons) ask ``promoted_dtype``.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch

from stablehlo.builder import Builder
from stablehlo.ir.core import Value

from frameworks.torch.lowering.dtypes import element_type, torch_dtype


class LoweringContext:
    """One FX node being lowered: its builder, its FakeTensor metadata, helpers."""

    def __init__(self, b: Builder, node: torch.fx.Node, concrete: Callable,
                 facts: dict | None = None):
        self.b = b
        self.node = node
        self.concrete = concrete  # SymInt/SymFloat/SymBool -> Python value
        # what rules tell later rules of the same program about a node's result, by FX
        # node (e.g. "the dequantization of these integers": lowering/quantized.py)
        self.facts = {} if facts is None else facts

    # -- the node's result ------------------------------------------------------------

    def _val(self, index: int | None):
        val = self.node.meta["val"]
        return val if index is None else val[index]

    def out_dtype(self, index: int | None = None) -> torch.dtype:
        return self._val(index).dtype

    def out_shape(self, index: int | None = None) -> tuple:
        return tuple(int(self.concrete(d)) for d in self._val(index).shape)

    # -- operands ---------------------------------------------------------------------

    @staticmethod
    def dtype(x) -> torch.dtype:
        """The torch dtype of a Value, or the default dtype torch gives a Python scalar."""
        if isinstance(x, Value):
            return torch_dtype(x.type)
        if isinstance(x, bool):
            return torch.bool
        return torch.int64 if isinstance(x, int) else torch.get_default_dtype()

    def promoted_dtype(self, lhs, rhs) -> torch.dtype:
        """torch's result dtype for a binary elementwise op on ``lhs`` and ``rhs``
        (Values count as tensors of their rank, Python numbers as scalars)."""
        def meta(x):
            if isinstance(x, Value):
                return torch.empty(x.type.shape, dtype=self.dtype(x), device="meta")
            return x
        if not isinstance(lhs, Value) and not isinstance(rhs, Value):
            return torch.result_type(torch.tensor(lhs), rhs)
        return torch.result_type(meta(lhs), meta(rhs))

    def scalar(self, value, dtype: torch.dtype) -> Value:
        """A 0-d constant of ``dtype``."""
        np_dtype = torch.empty((), dtype=dtype).numpy().dtype if dtype != torch.bfloat16 \
            else None
        array = np.asarray(value, dtype=np_dtype) if np_dtype is not None else np.asarray(value)
        return self.b.constant(array, element_type(dtype))

    def cast(self, x, dtype: torch.dtype) -> Value:
        """``x`` (a Value or a Python scalar) as ``dtype``; to bool means ``!= 0`` as in torch."""
        if not isinstance(x, Value):
            return self.scalar(x, dtype)
        if self.dtype(x) == dtype:
            return x
        if dtype == torch.bool:
            zero = self.broadcast(self.scalar(0, self.dtype(x)), x.type.shape)
            return self.b.compare(x, zero, "NE")
        return self.b.convert(x, element_type(dtype))

    def broadcast(self, x: Value, shape: Sequence[int]) -> Value:
        """numpy-style broadcasting of ``x`` to ``shape`` (trailing dims aligned)."""
        shape = tuple(shape)
        if x.type.shape == shape:
            return x
        rank = len(x.type.shape)
        return self.b.broadcast_in_dim(x, shape, range(len(shape) - rank, len(shape)))

    def operand(self, x, dtype: torch.dtype, shape: Sequence[int]) -> Value:
        """``x`` cast to ``dtype`` and broadcast to ``shape``: an elementwise op's operand."""
        return self.broadcast(self.cast(x, dtype), shape)

    def full(self, value, dtype: torch.dtype, shape: Sequence[int]) -> Value:
        return self.broadcast(self.scalar(value, dtype), shape)


def normalize_dim(dim: int, rank: int) -> int:
    """A possibly negative torch dim as an index; rank 0 tensors accept dim 0 and -1."""
    return dim % max(rank, 1)


def normalize_dims(dims, rank: int) -> list:
    """``None`` or ``[]`` means every dim, as in torch's reductions."""
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({normalize_dim(d, rank) for d in dims}) if rank else []
