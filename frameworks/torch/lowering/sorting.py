"""sort, topk and kthvalue: ``stablehlo.sort`` of the values with their int64 positions.

torch orders NaN after every number (before, when descending) and keeps equal elements in
their original order on CPU, so the comparator puts NaN last and the sort is stable.
"""
from __future__ import annotations

import torch

from stablehlo.ir.types import I64

from frameworks.torch.lowering.context import normalize_dim
from frameworks.torch.lowering.registry import lowers
from frameworks.torch.lowering.shape import slice_dim

aten = torch.ops.aten


def _sort(ctx, x, dim: int, descending: bool):
    b = ctx.b
    index = b.iota(x.type.shape, I64, dim)
    floating = ctx.dtype(x).is_floating_point

    def before(a, c, *_):
        # a goes before c: a is a number and c NaN, or a < c (a > c when descending)
        ordered = b.compare(a, c, "GT" if descending else "LT")
        if not floating:
            return ordered
        a_nan, c_nan = b.compare(a, a, "NE"), b.compare(c, c, "NE")
        if descending:
            return b.or_(b.and_(a_nan, b.not_(c_nan)), ordered)
        return b.or_(b.and_(b.not_(a_nan), c_nan), ordered)

    return b.sort([x, index], before, dimension=dim, is_stable=True)


@lowers(aten.sort.default, aten.sort.stable)
def _sort_rule(ctx, x, *args, **kwargs):
    if ctx.node.target == aten.sort.stable:  # sort.stable(x, *, stable, dim=-1, descending)
        dim, descending = kwargs.get("dim", -1), kwargs.get("descending", False)
    else:
        dim = args[0] if args else kwargs.get("dim", -1)
        descending = args[1] if len(args) > 1 else kwargs.get("descending", False)
    if x.type.shape == ():
        return x, ctx.full(0, torch.int64, ())
    values, index = _sort(ctx, x, normalize_dim(dim, len(x.type.shape)), descending)
    return values, index


@lowers(aten.topk.default)
def _topk(ctx, x, k, dim=-1, largest=True, sorted=True):
    if x.type.shape == ():
        return x, ctx.full(0, torch.int64, ())
    dim = normalize_dim(dim, len(x.type.shape))
    values, index = _sort(ctx, x, dim, largest)
    return slice_dim(ctx, values, dim, 0, k), slice_dim(ctx, index, dim, 0, k)


@lowers(aten.kthvalue.default)
def _kthvalue(ctx, x, k, dim=-1, keepdim=False):
    if x.type.shape == ():
        return x, ctx.full(0, torch.int64, ())
    dim = normalize_dim(dim, len(x.type.shape))
    values, index = _sort(ctx, x, dim, False)
    return (ctx.b.reshape(slice_dim(ctx, values, dim, k - 1, k), ctx.out_shape(0)),
            ctx.b.reshape(slice_dim(ctx, index, dim, k - 1, k), ctx.out_shape(1)))
