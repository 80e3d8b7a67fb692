"""Elementwise ATen ops: unary math (special functions through CHLO), binary arithmetic,
comparisons, logic, where/clamp and the activations that stay whole in core ATen (relu,
gelu, elu, leaky_relu, hardtanh).

Every rule converts its operands to the node's result dtype (torch's promotion, read from
the FakeTensor) and broadcasts them to the result shape before building the op.
"""
from __future__ import annotations

import math

import torch

from frameworks.torch.lowering.dtypes import element_type
from frameworks.torch.lowering.registry import Unsupported, lowers

aten = torch.ops.aten


def _is_float(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point


def _operands(ctx, *args, dtype=None):
    dtype = dtype or ctx.out_dtype()
    shape = ctx.out_shape()
    return [ctx.operand(a, dtype, shape) for a in args]


# -- unary ---------------------------------------------------------------------------------

# ATen op -> the StableHLO (or CHLO) op computing it on the result dtype.
_UNARY = {
    aten.abs.default: "stablehlo.abs", aten.neg.default: "stablehlo.negate",
    aten.exp.default: "stablehlo.exponential",
    aten.expm1.default: "stablehlo.exponential_minus_one",
    aten.log.default: "stablehlo.log", aten.log1p.default: "stablehlo.log_plus_one",
    aten.sqrt.default: "stablehlo.sqrt", aten.rsqrt.default: "stablehlo.rsqrt",
    aten.sin.default: "stablehlo.sine", aten.cos.default: "stablehlo.cosine",
    aten.tan.default: "stablehlo.tan", aten.tanh.default: "stablehlo.tanh",
    aten.sigmoid.default: "stablehlo.logistic", aten.sign.default: "stablehlo.sign",
    aten.erf.default: "chlo.erf", aten.asin.default: "chlo.asin", aten.acos.default: "chlo.acos",
    aten.atan.default: "chlo.atan", aten.asinh.default: "chlo.asinh",
    aten.acosh.default: "chlo.acosh", aten.atanh.default: "chlo.atanh",
    aten.sinh.default: "chlo.sinh", aten.cosh.default: "chlo.cosh",
    aten.lgamma.default: "chlo.lgamma", aten.digamma.default: "chlo.digamma",
    aten.erfinv.default: "chlo.erf_inv", aten.erfc.default: "chlo.erfc",
}
# Rounding is the identity on integers (StableHLO defines it for floats only).
_ROUNDING = {
    aten.ceil.default: "stablehlo.ceil", aten.floor.default: "stablehlo.floor",
    aten.round.default: "stablehlo.round_nearest_even",  # torch rounds half to even
}


@lowers(*_UNARY)
def _unary(ctx, x):
    (x,) = _operands(ctx, x)
    return ctx.b._build(_UNARY[ctx.node.target], [x])


@lowers(*_ROUNDING)
def _rounding(ctx, x):
    (x,) = _operands(ctx, x)
    if not _is_float(ctx.out_dtype()):
        return x
    return ctx.b._build(_ROUNDING[ctx.node.target], [x])


@lowers(aten.trunc.default)
def _trunc(ctx, x):
    (x,) = _operands(ctx, x)
    if not _is_float(ctx.out_dtype()):
        return x
    # trunc(x) = sign(x) * floor(|x|): rounds toward zero, keeps -0.0 and NaN
    return ctx.b.multiply(ctx.b.sign(x), ctx.b.floor(ctx.b.abs(x)))


@lowers(aten.reciprocal.default)
def _reciprocal(ctx, x):
    (x,) = _operands(ctx, x)
    return ctx.b.divide(ctx.full(1, ctx.out_dtype(), ctx.out_shape()), x)


@lowers(aten.log2.default, aten.log10.default)
def _log_base(ctx, x):
    (x,) = _operands(ctx, x)
    base = 2.0 if ctx.node.target == aten.log2.default else 10.0
    scale = ctx.full(1.0 / math.log(base), ctx.out_dtype(), ctx.out_shape())
    return ctx.b.multiply(ctx.b.log(x), scale)


@lowers(aten.exp2.default)
def _exp2(ctx, x):
    x, two = _operands(ctx, x, 2)
    return ctx.b.power(two, x)


def _sign_bit(ctx, x):
    """Whether ``x``'s sign bit is set (true for -0.0 and negative NaNs, unlike x < 0)."""
    shape = x.type.shape
    if not _is_float(ctx.dtype(x)):
        return ctx.b.compare(x, ctx.full(0, ctx.dtype(x), shape), "LT")
    bits = {torch.float64: torch.int64, torch.float32: torch.int32}.get(ctx.dtype(x),
                                                                         torch.int16)
    as_int = ctx.b.bitcast_convert(x, x.type.with_element_type(element_type(bits)))
    return ctx.b.compare(as_int, ctx.full(0, bits, shape), "LT")


@lowers(aten.signbit.default)
def _signbit(ctx, x):
    return _sign_bit(ctx, ctx.broadcast(ctx.cast(x, ctx.dtype(x)), ctx.out_shape()))


@lowers(aten.round.decimals)
def _round_decimals(ctx, x, *, decimals=0):
    (x,) = _operands(ctx, x)
    scale = ctx.full(10.0 ** decimals, ctx.out_dtype(), ctx.out_shape())
    return ctx.b.divide(ctx.b.round_nearest_even(ctx.b.multiply(x, scale)), scale)


@lowers(aten.bitwise_not.default, aten.logical_not.default)
def _not(ctx, x):
    dtype = ctx.out_dtype()
    (x,) = _operands(ctx, x, dtype=dtype)
    return ctx.b.not_(x)


@lowers(aten.isnan.default)
def _isnan(ctx, x):
    if not _is_float(ctx.dtype(x)):
        return ctx.full(False, torch.bool, ctx.out_shape())
    return ctx.b.compare(x, x, "NE")


@lowers(aten.isinf.default)
def _isinf(ctx, x):
    if not _is_float(ctx.dtype(x)):
        return ctx.full(False, torch.bool, ctx.out_shape())
    return ctx.b._build("chlo.is_inf", [x])


@lowers(aten.relu.default)
def _relu(ctx, x):
    (x,) = _operands(ctx, x)
    return ctx.b.maximum(x, ctx.full(0, ctx.out_dtype(), ctx.out_shape()))


# -- binary --------------------------------------------------------------------------------

_BINARY = {
    aten.mul.Tensor: "stablehlo.multiply", aten.mul.Scalar: "stablehlo.multiply",
    aten.maximum.default: "stablehlo.maximum", aten.minimum.default: "stablehlo.minimum",
    aten.atan2.default: "stablehlo.atan2", aten.atan2.out: "stablehlo.atan2",
    aten.pow.Tensor_Tensor: "stablehlo.power", aten.pow.Scalar: "stablehlo.power",
    aten.fmod.Tensor: "stablehlo.remainder", aten.fmod.Scalar: "stablehlo.remainder",
    aten.bitwise_and.Tensor: "stablehlo.and", aten.bitwise_and.Scalar: "stablehlo.and",
    aten.bitwise_or.Tensor: "stablehlo.or", aten.bitwise_or.Scalar: "stablehlo.or",
    aten.bitwise_xor.Tensor: "stablehlo.xor", aten.bitwise_xor.Scalar: "stablehlo.xor",
    aten.nextafter.default: "chlo.next_after",
}


@lowers(*_BINARY)
def _binary(ctx, a, b, *, out=None):  # an out= overload's result is the functional one
    a, b = _operands(ctx, a, b)
    return ctx.b._build(_BINARY[ctx.node.target], [a, b])


# Exponents eager PyTorch computes without pow() on float32/float64 and bfloat16 (ATen's CPU
# pow kernel; bfloat16 rounds after each multiply, as these multiplies do), as it does: the
# same roundings, and a multiply vectorizes where a pow() call does not (GPT-2's tanh GELU
# cubes its input, in bfloat16 under autocast).
_MULTIPLIED_EXPONENTS = frozenset({2.0, 3.0, -2.0})


@lowers(aten.pow.Tensor_Scalar)
def _pow_scalar(ctx, x, exponent):
    if ctx.out_dtype() not in (torch.float32, torch.float64, torch.bfloat16) \
            or isinstance(exponent, bool) \
            or exponent not in _MULTIPLIED_EXPONENTS:
        x, exponent = _operands(ctx, x, exponent)
        return ctx.b.power(x, exponent)
    (x,) = _operands(ctx, x)
    result = x
    for _ in range(abs(int(exponent)) - 1):
        result = ctx.b.multiply(result, x)
    if exponent < 0:
        return ctx.b.divide(ctx.full(1, ctx.out_dtype(), ctx.out_shape()), result)
    return result


@lowers(aten.copysign.Tensor, aten.copysign.Scalar)
def _copysign(ctx, a, b):
    a, b = _operands(ctx, a, b)
    magnitude = ctx.b.abs(a)
    return ctx.b.select(_sign_bit(ctx, b), ctx.b.negate(magnitude), magnitude)


@lowers(aten.fmax.default, aten.fmin.default)
def _fmax_fmin(ctx, a, b):
    # like maximum/minimum, but a NaN loses to a number
    a, b = _operands(ctx, a, b)
    pick = ctx.b.maximum if ctx.node.target == aten.fmax.default else ctx.b.minimum
    result = pick(a, b)
    if not _is_float(ctx.out_dtype()):
        return result
    result = ctx.b.select(ctx.b.compare(a, a, "NE"), b, result)
    return ctx.b.select(ctx.b.compare(b, b, "NE"), a, result)


@lowers(aten.add.Tensor, aten.add.Scalar, aten.sub.Tensor, aten.sub.Scalar)
def _add_sub(ctx, a, b, alpha=1):
    a, b = _operands(ctx, a, b)
    if alpha != 1:
        b = ctx.b.multiply(b, ctx.full(alpha, ctx.out_dtype(), ctx.out_shape()))
    if ctx.node.target in (aten.add.Tensor, aten.add.Scalar):
        return ctx.b.add(a, b)
    return ctx.b.subtract(a, b)


@lowers(aten.div.Tensor, aten.div.Scalar, aten.div.Tensor_mode, aten.div.Scalar_mode)
def _div(ctx, a, b, rounding_mode=None):
    a, b = _operands(ctx, a, b)
    q = ctx.b.divide(a, b)
    if rounding_mode is None or not _is_float(ctx.out_dtype()):
        if rounding_mode == "floor":  # integer divide truncates; floor needs one less
            return _floor_fixup(ctx, a, b, q)
        return q
    if rounding_mode == "trunc":
        return ctx.b.multiply(ctx.b.sign(q), ctx.b.floor(ctx.b.abs(q)))
    return ctx.b.floor(q)


def _floor_fixup(ctx, a, b, q):
    """Integer floor division from truncating division: q - 1 where the remainder is non-zero
    and its sign differs from the divisor's."""
    dtype, shape = ctx.out_dtype(), ctx.out_shape()
    zero = ctx.full(0, dtype, shape)
    r = ctx.b.remainder(a, b)
    inexact = ctx.b.compare(r, zero, "NE")
    signs_differ = ctx.b.compare(ctx.b.compare(r, zero, "LT"), ctx.b.compare(b, zero, "LT"), "NE")
    fix = ctx.b.and_(inexact, signs_differ)
    return ctx.b.select(fix, ctx.b.subtract(q, ctx.full(1, dtype, shape)), q)


@lowers(aten.remainder.Tensor, aten.remainder.Scalar)
def _remainder(ctx, a, b):
    # Python's modulo: the result takes the divisor's sign, r = fmod(a, b) (+ b if signs differ)
    a, b = _operands(ctx, a, b)
    zero = ctx.full(0, ctx.out_dtype(), ctx.out_shape())
    r = ctx.b.remainder(a, b)
    signs_differ = ctx.b.compare(ctx.b.compare(r, zero, "LT"), ctx.b.compare(b, zero, "LT"), "NE")
    fix = ctx.b.and_(ctx.b.compare(r, zero, "NE"), signs_differ)
    return ctx.b.select(fix, ctx.b.add(r, b), r)


# -- comparisons and logic -----------------------------------------------------------------

_COMPARE = {
    aten.eq.Tensor: "EQ", aten.eq.Scalar: "EQ", aten.ne.Tensor: "NE", aten.ne.Scalar: "NE",
    aten.lt.Tensor: "LT", aten.lt.Scalar: "LT", aten.le.Tensor: "LE", aten.le.Scalar: "LE",
    aten.gt.Tensor: "GT", aten.gt.Scalar: "GT", aten.ge.Tensor: "GE", aten.ge.Scalar: "GE",
}


@lowers(*_COMPARE)
def _compare(ctx, a, b):
    a, b = _operands(ctx, a, b, dtype=ctx.promoted_dtype(a, b))
    return ctx.b.compare(a, b, _COMPARE[ctx.node.target])


_LOGICAL = {aten.logical_and.default: "stablehlo.and", aten.logical_or.default: "stablehlo.or",
            aten.logical_xor.default: "stablehlo.xor"}


@lowers(*_LOGICAL)
def _logical(ctx, a, b):
    a, b = _operands(ctx, a, b, dtype=torch.bool)
    return ctx.b._build(_LOGICAL[ctx.node.target], [a, b])


@lowers(aten.where.self)
def _where(ctx, cond, a, b):
    (cond,) = _operands(ctx, cond, dtype=torch.bool)
    a, b = _operands(ctx, a, b)
    return ctx.b.select(cond, a, b)


@lowers(aten.clamp.default, aten.clamp.Tensor)
def _clamp(ctx, x, min=None, max=None):
    (x,) = _operands(ctx, x)
    if min is not None:
        x = ctx.b.maximum(x, *_operands(ctx, min))
    if max is not None:
        x = ctx.b.minimum(x, *_operands(ctx, max))
    return x


@lowers(aten.hardtanh.default)
def _hardtanh(ctx, x, min_val=-1.0, max_val=1.0):
    x, lo, hi = _operands(ctx, x, min_val, max_val)
    return ctx.b.minimum(ctx.b.maximum(x, lo), hi)


# -- activations ---------------------------------------------------------------------------

@lowers(aten.leaky_relu.default)
def _leaky_relu(ctx, x, negative_slope=0.01):
    x, zero, slope = _operands(ctx, x, 0, negative_slope)
    return ctx.b.select(ctx.b.compare(x, zero, "GT"), x, ctx.b.multiply(x, slope))


@lowers(aten.elu.default)
def _elu(ctx, x, alpha=1.0, scale=1.0, input_scale=1.0):
    x, zero, a, s, i = _operands(ctx, x, 0, alpha, scale, input_scale)
    negative = ctx.b.multiply(a, ctx.b.exponential_minus_one(ctx.b.multiply(x, i)))
    return ctx.b.multiply(s, ctx.b.select(ctx.b.compare(x, zero, "GT"), x, negative))


@lowers(aten.gelu.default)
def _gelu(ctx, x, approximate="none"):
    b = ctx.b
    x, half, one = _operands(ctx, x, 0.5, 1.0)
    if approximate == "tanh":
        # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        k, c = _operands(ctx, math.sqrt(2.0 / math.pi), 0.044715)
        inner = b.multiply(k, b.add(x, b.multiply(c, b.multiply(x, b.multiply(x, x)))))
        return b.multiply(b.multiply(half, x), b.add(one, b.tanh(inner)))
    if approximate != "none":
        raise Unsupported(f"gelu approximate={approximate!r}")
    # 0.5 x (1 + erf(x / sqrt(2)))
    (r,) = _operands(ctx, 1.0 / math.sqrt(2.0))
    return b.multiply(b.multiply(half, x), b.add(one, b._build("chlo.erf", [b.multiply(x, r)])))
