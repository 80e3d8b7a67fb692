"""Interpreter kernels of the contractions: dot_general, dot, einsum, unary_einsum,
chlo.ragged_dot.

Every contraction is computed as one batched matmul over the layout
``(batch, free, contracting)`` in the accumulation dtype of accumulate.py
(int64/uint64 for integers and booleans, f32 or f64 for floats), and rounded
or wrapped to the result element type once. That matches XLA, which
accumulates bf16/f16 dots in f32 (upstream's interpreter accumulates in the
element type and misses XLA's expected values), and keeps integer overflow
modular. Small float contractions are summed in XLA's order (Note
[summation order]). ``precision_config`` is ignored; a ``dot_algorithm``
only chooses the float accumulation width.

Importing this module also registers the other linear-algebra families
(convolution, fft, factorization, batch_norm, random); see the end of file.
"""
from __future__ import annotations

import numpy as np

from stablehlo.interpreter.accumulate import accumulation_dtype, kind, to_result, widen
from stablehlo.interpreter.kernels import kernel
from stablehlo.interpreter.opattrs import fail
from stablehlo.ir.attributes import DictAttr, StringAttr, StructAttr
from stablehlo.ir.types import FloatType, numpy_dtype


def result_dtype(op, index: int = 0) -> np.dtype:
    return numpy_dtype(op.result_types[index].element_type)


def struct_field(op, attr, name: str) -> list[int]:
    """An integer-list field of a struct attribute (``#stablehlo.dot<...>`` and kin)."""
    if isinstance(attr, StructAttr):
        value = attr.get(name, ())
    elif isinstance(attr, DictAttr):
        value = attr.get(name)
        value = getattr(value, "values", ()) if value is not None else ()
    else:
        raise fail(op, f"expected dimension numbers, got {attr}")
    return [int(v) for v in value]


def contract(lhs: np.ndarray, rhs: np.ndarray, lhs_batch, rhs_batch, lhs_contract,
             rhs_contract, acc: np.dtype) -> np.ndarray:
    """dot_general in dtype ``acc``: result dims are (batch, lhs free, rhs free)."""
    lhs_free = [d for d in range(lhs.ndim) if d not in lhs_batch and d not in lhs_contract]
    rhs_free = [d for d in range(rhs.ndim) if d not in rhs_batch and d not in rhs_contract]
    batch_shape = [lhs.shape[d] for d in lhs_batch]
    m_shape = [lhs.shape[d] for d in lhs_free]
    n_shape = [rhs.shape[d] for d in rhs_free]
    b = int(np.prod(batch_shape, dtype=np.int64))
    m = int(np.prod(m_shape, dtype=np.int64))
    n = int(np.prod(n_shape, dtype=np.int64))
    k = int(np.prod([lhs.shape[d] for d in lhs_contract], dtype=np.int64))
    left = widen(lhs, acc).transpose(list(lhs_batch) + lhs_free + list(lhs_contract))
    right = widen(rhs, acc).transpose(list(rhs_batch) + list(rhs_contract) + rhs_free)
    with np.errstate(all="ignore"):
        out = matmul(left.reshape(b, m, k), right.reshape(b, k, n))
    return out.reshape(batch_shape + m_shape + n_shape)


# Note [summation order]
# The conformance expected values come from XLA's CPU backend, and the
# checks allow float results only 3 ULPs of slack. For small contractions
# XLA sums the products one at a time, in contracting-index order, each
# product and sum rounded in the accumulation type (no fused multiply-add);
# a BLAS matmul (blocked, FMA) or an exactly rounded sum differs from that
# by tens of ULPs wherever terms cancel. So float contractions whose work
# is small are summed sequentially with numpy, which reproduces XLA's
# rounding; large ones use BLAS, where XLA's own order is blocked as well.
# Integer sums are exact modulo 2**64 in any order.
SEQUENTIAL_WORK = 1 << 22


def sequential_ok(acc: np.dtype, k: int, work: int) -> bool:
    """Whether a float sum of ``k`` terms per output, ``work`` products, runs sequentially."""
    return kind(acc) in "fc" and k > 1 and work <= SEQUENTIAL_WORK


def matmul(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """``left (B, M, K) @ right (B, K, N)`` in their dtype; see Note [summation order]."""
    b, m, k = left.shape
    n = right.shape[2]
    if not sequential_ok(left.dtype, k, b * m * n * k):
        return np.matmul(left, right)
    out = left[:, :, 0, None] * right[:, None, 0, :]
    for i in range(1, k):
        out += left[:, :, i, None] * right[:, None, i, :]
    return out


def _check_dims(op, lhs, rhs, lb, rb, lc, rc) -> None:
    if len(lb) != len(rb) or len(lc) != len(rc):
        raise fail(op, "lhs and rhs need as many batching and as many contracting dimensions")
    for name, dims, array in (("lhs", lb + lc, lhs), ("rhs", rb + rc, rhs)):
        if len(set(dims)) != len(dims) or any(d < 0 or d >= array.ndim for d in dims):
            raise fail(op, f"{name} batching/contracting dimensions {dims} must be unique "
                           f"and within rank {array.ndim}")
    for a, b in list(zip(lb, rb)) + list(zip(lc, rc)):
        if lhs.shape[a] != rhs.shape[b]:
            raise fail(op, f"lhs dimension {a} (size {lhs.shape[a]}) does not match rhs "
                           f"dimension {b} (size {rhs.shape[b]})")


def _algorithm_acc(op, acc: np.dtype) -> np.dtype:
    """A dot_algorithm's accumulation_type picks f32 or f64 accumulation for floats."""
    algorithm = op.attributes.get("algorithm")
    if not isinstance(algorithm, StructAttr) or kind(acc) not in "fc":
        return acc
    acc_type = algorithm.get("accumulation_type")
    if isinstance(acc_type, FloatType) and acc_type.name == "f64":
        return np.dtype(np.complex128 if kind(acc) == "c" else np.float64)
    return acc


@kernel("stablehlo.dot_general")
def dot_general(ctx, op, lhs, rhs):
    dims = op.attributes.get("dot_dimension_numbers")
    if dims is None:
        raise fail(op, "missing attribute 'dot_dimension_numbers'")
    lb = struct_field(op, dims, "lhs_batching_dimensions")
    rb = struct_field(op, dims, "rhs_batching_dimensions")
    lc = struct_field(op, dims, "lhs_contracting_dimensions")
    rc = struct_field(op, dims, "rhs_contracting_dimensions")
    _check_dims(op, lhs, rhs, lb, rb, lc, rc)
    out = result_dtype(op)
    acc = _algorithm_acc(op, accumulation_dtype(lhs.dtype, rhs.dtype, out))
    return to_result(contract(lhs, rhs, lb, rb, lc, rc, acc), out)


@kernel("stablehlo.dot")
def dot(ctx, op, lhs, rhs):
    if lhs.ndim not in (1, 2) or rhs.ndim not in (1, 2):
        raise fail(op, f"operands must be vectors or matrices, got ranks {lhs.ndim}, {rhs.ndim}")
    lc, rc = [lhs.ndim - 1], [0]
    _check_dims(op, lhs, rhs, [], [], lc, rc)
    out = result_dtype(op)
    acc = accumulation_dtype(lhs.dtype, rhs.dtype, out)
    return to_result(contract(lhs, rhs, [], [], lc, rc, acc), out)


def _einsum_config(op) -> str:
    config = op.attributes.get("einsum_config")
    if not isinstance(config, StringAttr):
        raise fail(op, "missing string attribute 'einsum_config'")
    return config.value.replace(" ", "")


@kernel("stablehlo.einsum")
def einsum(ctx, op, lhs, rhs):
    out = result_dtype(op)
    acc = accumulation_dtype(lhs.dtype, rhs.dtype, out)
    try:
        with np.errstate(all="ignore"):
            value = np.einsum(_einsum_config(op), widen(lhs, acc), widen(rhs, acc))
    except ValueError as exc:
        raise fail(op, f"bad einsum_config: {exc}") from None
    return to_result(np.asarray(value), out)


@kernel("stablehlo.unary_einsum")
def unary_einsum(ctx, op, operand):
    out = result_dtype(op)
    acc = accumulation_dtype(operand.dtype, out)
    # Upstream writes the unary form either as "ab->ba" or with an empty first
    # operand, ",ab->ba"; both mean the same contraction.
    config = _einsum_config(op).lstrip(",")
    try:
        with np.errstate(all="ignore"):
            value = np.einsum(config, widen(operand, acc))
    except ValueError as exc:
        raise fail(op, f"bad einsum_config: {exc}") from None
    return to_result(np.asarray(value), out)


# ---------------------------------------------------------------------------
# chlo.ragged_dot: a dot_general whose lhs ragged dimension is split into
# groups of group_sizes rows (see ChloOps.td for the three modes).

def _group_bounds(op, group_sizes, prefix_dims, rank):
    """Per group i, (start, end) arrays broadcastable over a rank-``rank`` array.

    group_sizes has shape [prefix..., g] (or [g]); prefix axis j lies along
    dimension prefix_dims[j] of the target array.
    """
    sizes = np.asarray(group_sizes).astype(np.int64)
    ends = np.cumsum(sizes, axis=-1)
    starts = ends - sizes
    if sizes.ndim > 1 and sizes.ndim - 1 != len(prefix_dims):
        raise fail(op, f"group_sizes has shape {sizes.shape}, expected "
                       f"{len(prefix_dims)} leading dimensions before the groups")
    dims = list(prefix_dims) if sizes.ndim > 1 else []
    order = np.argsort(dims) if dims else []
    shape = [1] * rank
    for d in dims:
        shape[d] = -1

    def place(array):
        if not dims:
            return array
        return np.transpose(array, order).reshape(shape)

    return [(place(starts[..., i]), place(ends[..., i])) for i in range(sizes.shape[-1])]


def _ragged_mask(op, group_sizes, prefix_dims, shape, ragged_dim):
    """Boolean masks of shape ``shape``: element belongs to group i along ragged_dim."""
    iota_shape = [1] * len(shape)
    iota_shape[ragged_dim] = shape[ragged_dim]
    iota = np.arange(shape[ragged_dim]).reshape(iota_shape)
    return [np.broadcast_to((iota >= s) & (iota < e), shape)
            for s, e in _group_bounds(op, group_sizes, prefix_dims, len(shape))]


@kernel("chlo.ragged_dot")
def ragged_dot(ctx, op, lhs, rhs, group_sizes):
    dims = op.attributes.get("ragged_dot_dimension_numbers")
    if dims is None:
        raise fail(op, "missing attribute 'ragged_dot_dimension_numbers'")
    lb, rb, lc, rc, lr, rg = (struct_field(op, dims, f) for f in (
        "lhs_batching_dimensions", "rhs_batching_dimensions", "lhs_contracting_dimensions",
        "rhs_contracting_dimensions", "lhs_ragged_dimensions", "rhs_group_dimensions"))
    if len(lr) != 1:
        raise fail(op, "there must be exactly one lhs ragged dimension")
    out = result_dtype(op)
    acc = accumulation_dtype(lhs.dtype, rhs.dtype, out)
    ragged = lr[0]
    if ragged in lb:  # mode 3: groups only partition a batch dimension
        _check_dims(op, lhs, rhs, lb, rb, lc, rc)
        return to_result(contract(lhs, rhs, lb, rb, lc, rc, acc), out)
    if ragged in lc:
        return to_result(_ragged_contracting(op, lhs, rhs, group_sizes, lb, rb, lc, rc,
                                             ragged, acc), out)
    if len(rg) != 1:
        raise fail(op, "the rhs needs exactly one group dimension when the lhs ragged "
                       "dimension is not contracting")
    return to_result(_ragged_free(op, lhs, rhs, group_sizes, lb, rb, lc, rc, ragged, rg[0],
                                  acc), out)


def _ragged_free(op, lhs, rhs, group_sizes, lb, rb, lc, rc, ragged, group_dim, acc):
    """Mode 1: row r of the ragged dimension multiplies rhs group g(r)."""
    lhs_free = [d for d in range(lhs.ndim) if d not in lb and d not in lc]
    prefix = list(lb) + [d for d in lhs_free if d < ragged]
    # Result dims: batch (lhs_batch[j] -> j), lhs free (lhs_free[j] -> len(lb) + j), rhs free.
    to_result_dim = {d: j for j, d in enumerate(lb)}
    to_result_dim.update({d: len(lb) + j for j, d in enumerate(lhs_free)})
    shift = [d - 1 if d > group_dim else d for d in range(rhs.ndim)]
    rb_i = [shift[d] for d in rb]
    rc_i = [shift[d] for d in rc]
    result = None
    for g in range(rhs.shape[group_dim]):
        rhs_g = np.take(rhs, g, axis=group_dim)
        _check_dims(op, lhs, rhs_g, lb, rb_i, lc, rc_i)
        part = contract(lhs, rhs_g, lb, rb_i, lc, rc_i, acc)
        if result is None:
            result = np.zeros(part.shape, dtype=acc)
            masks = _ragged_mask(op, group_sizes, [to_result_dim[d] for d in prefix],
                                 part.shape, to_result_dim[ragged])
            if len(masks) != rhs.shape[group_dim]:
                raise fail(op, f"group_sizes has {len(masks)} groups, rhs group dimension "
                               f"has {rhs.shape[group_dim]}")
        result = np.where(masks[g], part, result)
    return result


def _ragged_contracting(op, lhs, rhs, group_sizes, lb, rb, lc, rc, ragged, acc):
    """Mode 2: group g contracts only its slice of the ragged dimension; groups lead."""
    prefix = list(lb) + list(lc[:lc.index(ragged)])
    _check_dims(op, lhs, rhs, lb, rb, lc, rc)
    parts = []
    for mask in _ragged_mask(op, group_sizes, prefix, lhs.shape, ragged):
        masked = np.where(mask, lhs, np.zeros((), dtype=lhs.dtype))
        parts.append(contract(masked, rhs, lb, rb, lc, rc, acc))
    if not parts:
        raise fail(op, "group_sizes has no groups")
    return np.stack(parts)

