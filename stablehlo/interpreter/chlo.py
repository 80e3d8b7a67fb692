"""Interpreter kernels of the CHLO ops: the elementwise math functions,
chlo.mulhi, chlo.top_k and chlo.scan.

CHLO ops have no StableHLO spec; their meaning is the mathematical function,
or XLA's decomposition of it into StableHLO where the two differ: values at
poles and domain errors (see special_functions.py), and cosh, sinh, zeta and
polygamma, whose decompositions round in ways the conformance data records
(Note [cosh and sinh as XLA decomposes them], Note [zeta as XLA evaluates
it]). Everything else is evaluated in float64 / complex128 and rounded once
to the element type. The binary CHLO ops broadcast numpy-style.
"""
from __future__ import annotations

import numpy as np

from stablehlo.errors import InterpreterError
from stablehlo.interpreter import numerics as nx
from stablehlo.interpreter import special_functions as sf
from stablehlo.interpreter.elementwise import multiply, result_dtype, total_order_keys
from stablehlo.interpreter.elementwise_math import register_unary
from stablehlo.interpreter.kernels import kernel
from stablehlo.ir.attributes import attr_to_python
from stablehlo.ir.types import numpy_dtype

# op name -> (function on float64, function on complex128 or None)
_UNARY_MATH = {
    "chlo.acos": (np.arccos, np.arccos),
    "chlo.acosh": (np.arccosh, np.arccosh),
    "chlo.asin": (np.arcsin, np.arcsin),
    "chlo.asinh": (np.arcsinh, np.arcsinh),
    "chlo.atan": (np.arctan, np.arctan),
    "chlo.atanh": (np.arctanh, np.arctanh),
    "chlo.tan": (np.tan, np.tan),
    "chlo.bessel_i1e": (sf.bessel_i1e, None),
    "chlo.digamma": (sf.digamma, None),
    "chlo.erf": (sf.erf, None),
    "chlo.erfc": (sf.erfc, None),
    "chlo.erf_inv": (sf.erf_inv, None),
    "chlo.lgamma": (sf.lgamma, None),
}


for _name, (_real_fn, _complex_fn) in _UNARY_MATH.items():
    register_unary(_name, _real_fn, _complex_fn)


# Note [cosh and sinh as XLA decomposes them]
# CHLO has no spec beyond its decomposition into StableHLO, and XLA evaluates
# cosh(x) as exp(x + log(1/2)) + exp(log(1/2) - x) in f32 (f64 for f64, and
# in the complex type itself for complex). The rounding of x + log(1/2) is
# amplified by x: for |x| near 9 the f32 result is 4 ULP away from the exact
# cosh, and the conformance data expects that value. So these kernels follow
# the decomposition step by step, each step rounded to the compute type; exp
# itself is correctly rounded.


def _xla_compute(x: np.ndarray) -> np.ndarray:
    """``x`` in the type XLA's CHLO decompositions compute in.

    f16/bf16 are upcast to f32; f32, f64 and complex stay as they are.
    """
    if x.dtype.kind == "c" or x.dtype == np.float64:
        return x
    return nx.to_float64(x).astype(np.float32)


def _exp_rounded(x: np.ndarray) -> np.ndarray:
    """exp in double precision, rounded to ``x``'s own (real or complex) type."""
    return np.exp(x.astype(nx.compute_dtype(x.dtype))).astype(x.dtype)


def _log_half(x: np.ndarray):
    return np.asarray(np.log(0.5)).astype(x.dtype)


def _cosh_decomposed(x: np.ndarray) -> np.ndarray:
    log_half = _log_half(x)
    return _exp_rounded(x + log_half) + _exp_rounded(log_half - x)


def _sinh_decomposed(x: np.ndarray) -> np.ndarray:
    log_half = _log_half(x)
    large = _exp_rounded(x + log_half) - _exp_rounded(log_half - x)
    if x.dtype.kind == "c":
        return large
    # Small |x|: (expm1(x) + expm1(x) / (expm1(x) + 1)) / 2 avoids cancellation.
    em1 = np.expm1(x.astype(np.float64)).astype(x.dtype)
    small = x.dtype.type(0.5) * (em1 + em1 / (em1 + x.dtype.type(1)))
    return np.where(np.abs(x) < 1, small, large)


def _hyperbolic(op, operand, decomposed):
    if nx.category(operand.dtype) not in (nx.FLOAT, nx.COMPLEX):
        raise nx.unsupported(op, operand.dtype)
    result = decomposed(_xla_compute(operand))
    if operand.dtype.kind == "c":
        return result.astype(operand.dtype)
    return nx.round_to(nx.to_float64(result), operand.dtype)


@kernel("chlo.cosh")
@nx.quiet
def cosh(ctx, op, operand):
    return _hyperbolic(op, operand, _cosh_decomposed)


@kernel("chlo.sinh")
@nx.quiet
def sinh(ctx, op, operand):
    return _hyperbolic(op, operand, _sinh_decomposed)


def _in_xla_compute_type(op, lhs, rhs, fn):
    """``fn`` evaluated in f32 (f16/bf16 upcast) or f64, rounded to the result type."""
    if nx.category(lhs.dtype) != nx.FLOAT:
        raise nx.unsupported(op, lhs.dtype)
    result = fn(_xla_compute(lhs), _xla_compute(rhs))
    return nx.round_to(nx.to_float64(result), result_dtype(op))


@kernel("chlo.zeta")
@nx.quiet
def zeta(ctx, op, x, q):
    return _in_xla_compute_type(op, x, q, sf.zeta)


@kernel("chlo.polygamma")
@nx.quiet
def polygamma(ctx, op, n, x):
    return _in_xla_compute_type(op, n, x, sf.polygamma)


# ---------------------------------------------------------------------------
# Predicates, conj, square


def _float_predicate(op, operand, fn):
    if nx.category(operand.dtype) != nx.FLOAT:
        raise nx.unsupported(op, operand.dtype)
    return fn(nx.to_float64(operand))


@kernel("chlo.is_inf")
def is_inf(ctx, op, operand):
    return _float_predicate(op, operand, np.isinf)


@kernel("chlo.is_pos_inf")
def is_pos_inf(ctx, op, operand):
    return _float_predicate(op, operand, np.isposinf)


@kernel("chlo.is_neg_inf")
def is_neg_inf(ctx, op, operand):
    return _float_predicate(op, operand, np.isneginf)


@kernel("chlo.conj")
def conj(ctx, op, operand):
    if nx.category(operand.dtype) == nx.COMPLEX:
        return np.conj(operand)
    return operand


@kernel("chlo.square")
def square(ctx, op, operand):
    return multiply(ctx, op, operand, operand)


# ---------------------------------------------------------------------------
# next_after


@kernel("chlo.next_after")
@nx.quiet
def next_after(ctx, op, x, y):
    """The float after ``x`` in the direction of ``y`` (C nextafter)."""
    dtype = x.dtype
    if nx.category(dtype) != nx.FLOAT:
        raise nx.unsupported(op, dtype)
    x, y = np.broadcast_arrays(x, y)
    x64, y64 = nx.to_float64(x), nx.to_float64(y)
    width = nx.float_width(dtype)
    bits = nx.float_bits(x)
    sign_of_y = np.where(np.signbit(y64), np.uint64(1 << (width - 1)), np.uint64(0))
    # Away from zero when y lies beyond x on x's side, toward zero otherwise.
    away = (y64 > x64) == (x64 > 0)
    stepped = np.where(away, bits + np.uint64(1), bits - np.uint64(1))
    stepped = np.where(x64 == 0, sign_of_y | np.uint64(1), stepped)  # smallest subnormal
    result = nx.float_from_bits(stepped, dtype)
    result = np.where(x64 == y64, y, result)
    nan = nx.round_to(np.full(x.shape, np.nan), dtype)
    return np.where(np.isnan(x64) | np.isnan(y64), nan, result).astype(dtype)


# ---------------------------------------------------------------------------
# mulhi


def _unsigned_mulhi64(a, b):
    """High 64 bits of the 128-bit product of uint64 arrays."""
    low32 = np.uint64(0xFFFFFFFF)
    shift = np.uint64(32)
    a_lo, a_hi = a & low32, a >> shift
    b_lo, b_hi = b & low32, b >> shift
    lo_lo, hi_lo = a_lo * b_lo, a_hi * b_lo
    lo_hi, hi_hi = a_lo * b_hi, a_hi * b_hi
    cross = (lo_lo >> shift) + (hi_lo & low32) + lo_hi  # < 2**64: no carry lost
    return hi_hi + (hi_lo >> shift) + (cross >> shift)


@kernel("chlo.mulhi")
@nx.quiet
def mulhi(ctx, op, lhs, rhs):
    """The high half of the double-width product."""
    kind = nx.category(lhs.dtype)
    if kind not in (nx.SINT, nx.UINT):
        raise nx.unsupported(op, lhs.dtype)
    width = nx.int_width(lhs.dtype)
    if width <= 32:
        product = nx.widen_int(lhs) * nx.widen_int(rhs)  # exact in 64 bits
        return nx.wrap_int(product >> (np.int64(width) if kind == nx.SINT
                                       else np.uint64(width)), lhs.dtype)
    a, b = nx.to_unsigned_bits(lhs), nx.to_unsigned_bits(rhs)
    high = _unsigned_mulhi64(a, b)
    if kind == nx.SINT:
        # Signed product = unsigned product - 2**64 * (a<0 ? b : 0) - 2**64 * (b<0 ? a : 0).
        high = high - np.where(lhs < 0, b, np.uint64(0)) - np.where(rhs < 0, a, np.uint64(0))
    return nx.wrap_int(high, lhs.dtype)


# ---------------------------------------------------------------------------
# top_k


def _descending_keys(op, operand):
    """Integer keys whose ascending order is the operand's descending order."""
    kind = nx.category(operand.dtype)
    if kind == nx.FLOAT:
        keys = total_order_keys(operand)  # CHLO sorts with compare GT, TOTALORDER
    elif kind in (nx.SINT, nx.UINT):
        keys = nx.widen_int(operand)
    elif kind == nx.BOOL:
        keys = operand.astype(np.int64)
    else:
        raise nx.unsupported(op, operand.dtype)
    return np.invert(keys)  # ~k reverses the order without overflow


@kernel("chlo.top_k", multi=True)
def top_k(ctx, op, operand):
    k = int(attr_to_python(op.attributes["k"]))
    if operand.ndim == 0 or not 0 <= k <= operand.shape[-1]:
        raise InterpreterError(f"{op.where()}: k = {k} must lie between 0 and the size of the "
                               f"last dimension of operand of shape {operand.shape}")
    order = np.argsort(_descending_keys(op, operand), axis=-1, kind="stable")[..., :k]
    values = np.take_along_axis(operand, order, axis=-1)
    return [values, order.astype(result_dtype(op, 1))]


# ---------------------------------------------------------------------------
# scan


def _segments(op, name: str, total: int, default_first: int) -> tuple[int, int]:
    attr = op.attributes.get(name)
    if attr is None:
        return default_first, total - default_first
    sizes = [int(v) for v in attr_to_python(attr)]
    if len(sizes) != 2 or sum(sizes) != total:
        raise InterpreterError(f"{op.where()}: {name} {sizes} does not split {total} values "
                               f"in two")
    return sizes[0], sizes[1]


@kernel("chlo.scan", multi=True)
def scan(ctx, op, *operands):
    """Run the body once per index along ``dimension`` (backwards if is_reverse).

    The body takes one slice of every input (the scan dimension removed) and
    the carries, and returns the output slices followed by the new carries.
    """
    num_inputs, num_inits = _segments(op, "operandSegmentSizes", len(operands),
                                      len(operands) // 2)
    num_outputs, _ = _segments(op, "resultSegmentSizes", len(op.results), num_inits)
    inputs, carries = list(operands[:num_inputs]), list(operands[num_inputs:])
    dimension = int(attr_to_python(op.attributes["dimension"]))
    reverse = bool(attr_to_python(op.attributes.get("is_reverse", False)))
    length = inputs[0].shape[dimension] if inputs else 0
    steps = range(length - 1, -1, -1) if reverse else range(length)
    slices: list[list] = [[None] * length for _ in range(num_outputs)]
    for index in steps:
        args = [np.take(x, index, axis=dimension) for x in inputs] + carries
        results = ctx.run_region(op.regions[0], args)
        for k in range(num_outputs):
            slices[k][index] = np.asarray(results[k])
        carries = list(results[num_outputs:])
    outputs = [np.stack(parts, axis=dimension) if parts else
               np.zeros(t.shape, numpy_dtype(t.element_type))
               for parts, t in zip(slices, op.result_types[:num_outputs])]
    return outputs + carries
