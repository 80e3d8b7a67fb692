"""Reductions and the normalizations built on them: sum/mean/prod/amax/amin/any/all,
var/var_mean, vector norms, argmax/argmin and max/min.dim, scans (cumsum, cumprod, cummax,
cummin, logcumsumexp), softmax/log_softmax, layer/group/batch norm.

Float reductions accumulate in the result dtype (float32 for float32 inputs), as torch's CPU
kernels do for float32; 16-bit floats accumulate in float32 and round once at the end.
"""
from __future__ import annotations

import numpy as np
import torch

from stablehlo.ir.regions import MONOIDS
from stablehlo.ir.types import I64

from frameworks.torch.lowering.context import normalize_dim, normalize_dims
from frameworks.torch.lowering.dtypes import element_type
from frameworks.torch.lowering.registry import Unsupported, lowers

aten = torch.ops.aten


def _accumulator(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def identity(dtype: torch.dtype, kind: str):
    """The identity of ``stablehlo.<kind>`` on ``dtype`` (the monoid facts of
    stablehlo.ir.regions): what a reduction or a scatter without self starts from."""
    value = MONOIDS[f"stablehlo.{kind}"].identity(element_type(dtype))
    if value is None:
        raise Unsupported(f"stablehlo.{kind} has no identity on {dtype}")
    return value


def reduce(ctx, x, dims, kind: str, dtype: torch.dtype, keep_shape=None):
    """``x`` reduced over ``dims`` with ``stablehlo.<kind>``, computed in ``dtype``'s
    accumulator; reshaped to ``keep_shape`` (keepdim) when given."""
    acc = _accumulator(dtype)
    x = ctx.cast(x, acc)
    if kind == "or" or kind == "and":
        init = ctx.scalar(kind == "and", torch.bool)
    else:
        init = ctx.scalar(identity(acc, kind), acc)
    result = ctx.b.reduce(x, init, dims, f"stablehlo.{kind}") if dims else x
    result = ctx.cast(result, dtype)
    return ctx.b.reshape(result, keep_shape) if keep_shape is not None else result


def _reduction(kind: str):
    def rule(ctx, x, dim=None, keepdim=False, *, dtype=None):
        dims = normalize_dims(dim, len(x.type.shape))
        return reduce(ctx, x, dims, kind, ctx.out_dtype(), ctx.out_shape())
    return rule


lowers(aten.sum.dim_IntList, aten.sum.default)(_reduction("add"))
lowers(aten.amax.default, aten.max.default)(_reduction("maximum"))
lowers(aten.amin.default, aten.min.default)(_reduction("minimum"))
lowers(aten.any.default, aten.any.dim, aten.any.dims)(_reduction("or"))
lowers(aten.all.default, aten.all.dim, aten.all.dims)(_reduction("and"))


@lowers(aten.prod.default, aten.prod.dim_int)
def _prod(ctx, x, dim=None, keepdim=False, *, dtype=None):
    dims = normalize_dims(dim, len(x.type.shape))
    return reduce(ctx, x, dims, "multiply", ctx.out_dtype(), ctx.out_shape())


def _count(ctx, x, dims) -> int:
    return int(np.prod([x.type.shape[d] for d in dims]))


@lowers(aten.mean.dim, aten.mean.default)
def _mean(ctx, x, dim=None, keepdim=False, *, dtype=None):
    dims = normalize_dims(dim, len(x.type.shape))
    out = ctx.out_dtype()
    acc = _accumulator(out)
    total = reduce(ctx, x, dims, "add", acc, ctx.out_shape())
    mean = ctx.b.divide(total, ctx.full(_count(ctx, x, dims), acc, ctx.out_shape()))
    return ctx.cast(mean, out)


def moments(ctx, x, dims, correction=0):
    """(mean with reduced dims kept as 1, variance likewise), in ``x``'s accumulator dtype."""
    acc = _accumulator(ctx.dtype(x))
    x = ctx.cast(x, acc)
    shape = x.type.shape
    kept = tuple(1 if d in dims else n for d, n in enumerate(shape))
    n = _count(ctx, x, dims)
    mean = ctx.b.divide(reduce(ctx, x, dims, "add", acc, kept), ctx.full(n, acc, kept))
    centered = ctx.b.subtract(x, ctx.broadcast(mean, shape))
    sq = reduce(ctx, ctx.b.multiply(centered, centered), dims, "add", acc, kept)
    var = ctx.b.divide(sq, ctx.full(max(n - correction, 0), acc, kept))
    return mean, var


@lowers(aten.var_mean.correction)
def _var_mean(ctx, x, dim=None, *, correction=None, keepdim=False):
    dims = normalize_dims(dim, len(x.type.shape))
    mean, var = moments(ctx, x, dims, 1 if correction is None else correction)
    return (ctx.cast(ctx.b.reshape(var, ctx.out_shape(0)), ctx.out_dtype(0)),
            ctx.cast(ctx.b.reshape(mean, ctx.out_shape(1)), ctx.out_dtype(1)))


@lowers(aten.linalg_vector_norm.default)
def _vector_norm(ctx, x, ord=2, dim=None, keepdim=False, *, dtype=None):
    out = ctx.out_dtype()
    dims = normalize_dims(dim, len(x.type.shape))
    return ctx.cast(p_norm(ctx, x, ord, dims, _accumulator(out), ctx.out_shape()), out)


def p_norm(ctx, x, ord, dims, acc, shape):
    """The ``ord``-norm of ``x`` over ``dims`` in dtype ``acc``, reshaped to ``shape``."""
    b = ctx.b
    a = b.abs(ctx.cast(x, acc))
    full = a.type.shape
    if ord == float("inf"):
        return reduce(ctx, a, dims, "maximum", acc, shape)
    if ord == float("-inf"):
        return reduce(ctx, a, dims, "minimum", acc, shape)
    if ord == 0:
        nonzero = ctx.cast(b.compare(a, ctx.full(0, acc, full), "NE"), acc)
        return reduce(ctx, nonzero, dims, "add", acc, shape)
    if ord == 1:
        return reduce(ctx, a, dims, "add", acc, shape)
    if ord == 2:
        return b.sqrt(reduce(ctx, b.multiply(a, a), dims, "add", acc, shape))
    total = reduce(ctx, b.power(a, ctx.full(ord, acc, full)), dims, "add", acc, shape)
    return b.power(total, ctx.full(1.0 / ord, acc, total.type.shape))


@lowers(aten.var.correction, aten.var.dim)
def _var(ctx, x, dim=None, *args, correction=None, keepdim=False):
    if ctx.node.target == aten.var.dim:  # var.dim(x, dim, unbiased=True, keepdim=False)
        unbiased = args[0] if args else True
        keepdim = args[1] if len(args) > 1 else keepdim
        correction = 1 if unbiased else 0
    dims = normalize_dims(dim, len(x.type.shape))
    _, var = moments(ctx, x, dims, 1 if correction is None else correction)
    return ctx.cast(ctx.b.reshape(var, ctx.out_shape()), ctx.out_dtype())


def _arg_reduce(ctx, x, dim, largest: bool):
    """(values, int64 indices) of the max (min) over ``dim``: the first one on ties, NaN
    counting as the largest (smallest), as torch does."""
    b = ctx.b
    shape = x.type.shape
    index = b.iota(shape, I64, dim)
    direction = "GT" if largest else "LT"

    def body(av, ai, bv, bi):
        a_nan, b_nan = b.compare(av, av, "NE"), b.compare(bv, bv, "NE")
        better = b.compare(av, bv, direction)
        tie = b.and_(b.compare(av, bv, "EQ"), b.compare(ai, bi, "LT"))
        both_nan = b.and_(a_nan, b_nan)
        pick_a = b.or_(b.and_(a_nan, b.not_(b_nan)),
                       b.and_(b.not_(b_nan), b.or_(better, tie)))
        pick_a = b.or_(pick_a, b.and_(both_nan, b.compare(ai, bi, "LT")))
        return [b.select(pick_a, av, bv), b.select(pick_a, ai, bi)]

    dtype = ctx.dtype(x)
    init = ctx.scalar(identity(dtype, "maximum" if largest else "minimum"), dtype)
    return b.reduce([x, index], [init, ctx.scalar(0, torch.int64)], [dim], body)


def _arg_rule(largest: bool):
    def rule(ctx, x, dim=None, keepdim=False):
        if dim is None:
            x = ctx.b.reshape(x, (int(np.prod(x.type.shape)),))
            dim = 0
        dim = normalize_dim(dim, len(x.type.shape))
        if x.type.shape == ():
            return ctx.full(0, torch.int64, ctx.out_shape())
        _, index = _arg_reduce(ctx, x, dim, largest)
        return ctx.b.reshape(index, ctx.out_shape())
    return rule


lowers(aten.argmax.default)(_arg_rule(True))
lowers(aten.argmin.default)(_arg_rule(False))


def _max_min_dim(largest: bool):
    def rule(ctx, x, dim, keepdim=False):
        dim = normalize_dim(dim, len(x.type.shape))
        if x.type.shape == ():
            return x, ctx.full(0, torch.int64, ())
        values, index = _arg_reduce(ctx, x, dim, largest)
        return ctx.b.reshape(values, ctx.out_shape(0)), ctx.b.reshape(index, ctx.out_shape(1))
    return rule


lowers(aten.max.dim)(_max_min_dim(True))
lowers(aten.min.dim)(_max_min_dim(False))


@lowers(aten.cumsum.default, aten.cumprod.default)
def _cumulative(ctx, x, dim, *, dtype=None):
    kind = "add" if ctx.node.target == aten.cumsum.default else "multiply"
    out = ctx.out_dtype()
    acc = _accumulator(out)
    x = ctx.cast(x, acc)
    shape = x.type.shape
    if shape == () or 0 in shape:  # nothing to scan (and no empty windows in StableHLO)
        return ctx.cast(x, out)
    dim = normalize_dim(dim, len(shape))
    n = shape[dim]
    window = [n if d == dim else 1 for d in range(len(shape))]
    padding = [(n - 1, 0) if d == dim else (0, 0) for d in range(len(shape))]
    # element i combines the window ending at i: the n - 1 before it, padding or earlier
    result = ctx.b.reduce_window(x, ctx.scalar(identity(acc, kind), acc), window,
                                 f"stablehlo.{kind}", padding=padding)
    return ctx.cast(result, out)


def _running(ctx, x, dim: int, body, inits):
    """Inclusive scans along ``dim``: element i reduces the window of the n values ending at
    i (the first ones padded with ``inits``)."""
    shape = x[0].type.shape
    n = shape[dim]
    window = [n if d == dim else 1 for d in range(len(shape))]
    padding = [(n - 1, 0) if d == dim else (0, 0) for d in range(len(shape))]
    return ctx.b.reduce_window(x, inits, window, body, padding=padding)


def _cumulative_extreme(largest: bool):
    def rule(ctx, x, dim):
        b = ctx.b
        dtype = ctx.dtype(x)
        if x.type.shape == () or 0 in x.type.shape:
            return x, ctx.full(0, torch.int64, x.type.shape)
        dim = normalize_dim(dim, len(x.type.shape))
        index = b.iota(x.type.shape, I64, dim)
        direction = "GT" if largest else "LT"

        def body(av, ai, bv, bi):
            # the extreme so far; on ties and NaN torch keeps the later index
            b_nan = b.compare(bv, bv, "NE")
            a_nan = b.compare(av, av, "NE")
            take_b = b.or_(b.or_(b_nan, b.compare(bv, av, direction)),
                           b.and_(b.compare(bv, av, "EQ"), b.compare(bi, ai, "GT")))
            take_b = b.and_(take_b, b.or_(b.not_(a_nan), b_nan))
            return [b.select(take_b, bv, av), b.select(take_b, bi, ai)]

        init = ctx.scalar(identity(dtype, "maximum" if largest else "minimum"), dtype)
        values, indices = _running(ctx, [x, index], dim, body,
                                   [init, ctx.scalar(-1, torch.int64)])
        return values, indices
    return rule


lowers(aten.cummax.default)(_cumulative_extreme(True))
lowers(aten.cummin.default)(_cumulative_extreme(False))


@lowers(aten.logcumsumexp.default)
def _logcumsumexp(ctx, x, dim):
    b = ctx.b
    out = ctx.out_dtype()
    x = ctx.cast(x, out)
    if x.type.shape == () or 0 in x.type.shape:
        return x
    dim = normalize_dim(dim, len(x.type.shape))

    def body(p, q):
        # log(e^p + e^q) = max + log1p(e^(min - max)); two -inf stay -inf
        hi, lo = b.maximum(p, q), b.minimum(p, q)
        both_neg_inf = b.compare(hi, ctx.full(-np.inf, out, ()), "EQ")
        merged = b.add(hi, b.log_plus_one(b.exponential(b.subtract(lo, hi))))
        return b.select(both_neg_inf, hi, merged)

    return _running(ctx, [x], dim, body, [ctx.scalar(-np.inf, out)])


# -- softmax and normalizations ------------------------------------------------------------

@lowers(aten._softmax.default, aten._log_softmax.default)
def _softmax(ctx, x, dim, half_to_float=False):
    b = ctx.b
    out = ctx.out_dtype()
    acc = _accumulator(out)
    x = ctx.cast(x, acc)
    shape = x.type.shape
    dims = normalize_dims(dim, len(shape))
    kept = tuple(1 if d in dims else n for d, n in enumerate(shape))
    # subtracting the row max keeps exp in range (a row of -inf gives NaN, as in torch)
    shifted = b.subtract(x, ctx.broadcast(reduce(ctx, x, dims, "maximum", acc, kept), shape))
    exp = b.exponential(shifted)
    total = ctx.broadcast(reduce(ctx, exp, dims, "add", acc, kept), shape)
    if ctx.node.target == aten._log_softmax.default:
        return ctx.cast(b.subtract(shifted, b.log(total)), out)
    return ctx.cast(b.divide(exp, total), out)


def _normalize(ctx, x, mean, var, eps):
    """(x - mean) * rsqrt(var + eps) with mean/var broadcast from their kept dims; returns
    the result and rstd (kept shape)."""
    shape = x.type.shape
    acc = ctx.dtype(mean)
    rstd = ctx.b.rsqrt(ctx.b.add(var, ctx.full(eps, acc, var.type.shape)))
    centered = ctx.b.subtract(ctx.cast(x, acc), ctx.broadcast(mean, shape))
    return ctx.b.multiply(centered, ctx.broadcast(rstd, shape)), rstd


def _affine(ctx, y, weight, bias, dims):
    """y * weight + bias, with weight/bias laid along ``dims`` of y."""
    shape = y.type.shape
    acc = ctx.dtype(y)
    if weight is not None:
        y = ctx.b.multiply(y, ctx.b.broadcast_in_dim(ctx.cast(weight, acc), shape, dims))
    if bias is not None:
        y = ctx.b.add(y, ctx.b.broadcast_in_dim(ctx.cast(bias, acc), shape, dims))
    return y


@lowers(aten.native_layer_norm.default)
def _layer_norm(ctx, x, normalized_shape, weight, bias, eps):
    shape = x.type.shape
    axis = len(shape) - len(normalized_shape)
    dims = list(range(axis, len(shape)))
    mean, var = moments(ctx, x, dims)
    y, rstd = _normalize(ctx, x, mean, var, eps)
    y = _affine(ctx, y, weight, bias, dims)
    return _results(ctx, y, ctx.b.reshape(mean, ctx.out_shape(1)),
                    ctx.b.reshape(rstd, ctx.out_shape(2)))


def _results(ctx, *values):
    """``values`` in the node's result dtypes (statistics are computed in float32 for
    16-bit inputs, but torch returns them in the input's dtype)."""
    return tuple(v if v is None else ctx.cast(v, ctx.out_dtype(i)) for i, v in enumerate(values))


@lowers(aten.native_group_norm.default)
def _group_norm(ctx, x, weight, bias, n, c, hxw, group, eps):
    shape = x.type.shape
    grouped = ctx.b.reshape(x, (n, group, (c // group) * hxw))
    mean, var = moments(ctx, grouped, [2])
    y, rstd = _normalize(ctx, grouped, mean, var, eps)
    y = _affine(ctx, ctx.b.reshape(y, shape), weight, bias, [1])
    return _results(ctx, y, ctx.b.reshape(mean, (n, group)), ctx.b.reshape(rstd, (n, group)))


def _batch_norm(ctx, x, weight, bias, mean, var, eps):
    """Normalize over every dim but 1 with per-channel (C,) mean and var."""
    shape = x.type.shape
    kept = tuple(n if d == 1 else 1 for d, n in enumerate(shape))
    acc = _accumulator(ctx.dtype(x))
    mean = ctx.b.reshape(ctx.cast(mean, acc), kept)
    var = ctx.b.reshape(ctx.cast(var, acc), kept)
    y, rstd = _normalize(ctx, x, mean, var, eps)
    return ctx.cast(_affine(ctx, y, weight, bias, [1]), ctx.out_dtype(0)), rstd


@lowers(aten._native_batch_norm_legit_no_training.default)
def _batch_norm_inference(ctx, x, weight, bias, running_mean, running_var, momentum, eps):
    y, _ = _batch_norm(ctx, x, weight, bias, running_mean, running_var, eps)
    return y, ctx.full(0, ctx.out_dtype(1), (0,)), ctx.full(0, ctx.out_dtype(2), (0,))


def _training_batch_norm(ctx, x, weight, bias, eps):
    """Normalize with the batch's own statistics: (y, mean, rstd, biased variance)."""
    dims = [d for d in range(len(x.type.shape)) if d != 1]
    c = x.type.shape[1]
    mean, var = moments(ctx, x, dims)
    y, rstd = _batch_norm(ctx, x, weight, bias, mean, var, eps)
    return y, ctx.b.reshape(mean, (c,)), ctx.b.reshape(rstd, (c,)), ctx.b.reshape(var, (c,))


@lowers(aten.native_batch_norm.default)
def _native_batch_norm(ctx, x, weight, bias, running_mean, running_var, training, momentum,
                       eps):
    if not training:
        return _batch_norm_inference(ctx, x, weight, bias, running_mean, running_var,
                                     momentum, eps)
    if running_mean is not None:
        raise Unsupported("native_batch_norm updates its running stats in place (functional "
                          "graphs use _native_batch_norm_legit_functional)")
    return _results(ctx, *_training_batch_norm(ctx, x, weight, bias, eps)[:3])


@lowers(aten._native_batch_norm_legit.default, aten._native_batch_norm_legit.no_stats)
def _batch_norm_legit(ctx, x, weight, bias, *args):
    if ctx.node.target == aten._native_batch_norm_legit.no_stats:
        (training, momentum, eps), running = args, (None, None)
    else:
        running_mean, running_var, training, momentum, eps = args
        running = (running_mean, running_var)
    if not training:
        return _batch_norm_inference(ctx, x, weight, bias, *running, momentum, eps)
    return _results(ctx, *_training_batch_norm(ctx, x, weight, bias, eps)[:3])


@lowers(aten._native_batch_norm_legit_functional.default)
def _batch_norm_functional(ctx, x, weight, bias, running_mean, running_var, training,
                           momentum, eps):
    """Also returns the updated running stats (functionalized in-place update)."""
    if not training:
        y, empty, _ = _batch_norm_inference(ctx, x, weight, bias, running_mean, running_var,
                                            momentum, eps)
        return y, empty, empty, running_mean, running_var
    y, mean, rstd, var = _training_batch_norm(ctx, x, weight, bias, eps)
    c = x.type.shape[1]
    n = int(np.prod(x.type.shape)) // c
    # running = (1 - momentum) * running + momentum * batch stat (the variance unbiased)
    unbiased = ctx.b.multiply(var, ctx.full(n / max(n - 1, 1), ctx.dtype(var), (c,)))
    new_stats = []
    for old, new in zip((running_mean, running_var), (mean, unbiased)):
        dtype = ctx.dtype(old)
        keep = ctx.b.multiply(old, ctx.full(1 - momentum, dtype, (c,)))
        new_stats.append(ctx.b.add(keep, ctx.b.multiply(ctx.cast(new, dtype),
                                                        ctx.full(momentum, dtype, (c,)))))
    return _results(ctx, y, mean, rstd, *new_stats)
