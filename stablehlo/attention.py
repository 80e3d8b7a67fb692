"""Scaled-dot-product attention as one op: the ``openhlo.attention`` composite and its
gradient ``openhlo.attention_grad``, built with their decompositions.

A backend with a fused kernel runs the composite by its name (the cpu backend's tiled,
online-softmax kernel: pjrt/plugins/cpu/native/kernels_attention.cc); every other backend,
the interpreter included, runs the decomposition, which is the plain math below. Frontends
(the PyTorch lowering) build the composite directly; xla_core's ``fuse-attention`` pass
makes it from the math that JAX and hand-written models spell out.

Operands, in this order (``...`` is any number of leading dims, the same for q, k and v):

* ``q`` [..., Hq, L, D], ``k`` [..., Hkv, S, D], ``v`` [..., Hkv, S, Dv], of one float type.
  Hq is a multiple of Hkv: query head h reads key/value head h // (Hq / Hkv) (grouped-query
  attention; Hkv = 1 is multi-query), as torch's repeat_interleave of K/V does.
* ``bias`` (if ``has_bias``): the type of q, the rank of q, each dim 1 or that of the
  scores [..., Hq, L, S]; added to the scaled scores.
* ``mask`` (if ``has_mask``): i1, broadcastable the same way; false entries get ``fill``.

Attributes (``composite_attributes``): ``scale`` (f64), ``causal`` (key j > query i gets
``fill``, top-left aligned, as PyTorch's ``is_causal`` and JAX's ``is_causal``), ``has_bias``,
``has_mask``, ``fill`` (f64: -inf, or the large finite negative JAX masks with).

Results: ``out`` [..., Hq, L, Dv] (the type of q) and, if ``with_lse``, the row logsumexp
[..., Hq, L] in the compute type (what the backward rebuilds the probabilities from).

The gradient composite takes q, k, v, [bias], [mask], out, lse, dout and returns dq, dk, dv
(dk, dv summed over the query heads of each key head). Both compute in f32 (f64 for f64
operands), the compute type.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

from stablehlo.errors import VerificationError
from stablehlo.ir.attributes import BoolAttr, FloatAttr
from stablehlo.ir.types import F32, F64, I1, I32, TensorType

ATTENTION = "openhlo.attention"
ATTENTION_GRAD = "openhlo.attention_grad"
FLOAT_TYPES = ("f32", "f16", "bf16", "f64")


@dataclass(frozen=True)
class AttentionConfig:
    """The composite attributes of one attention."""
    scale: float
    causal: bool = False
    has_bias: bool = False
    has_mask: bool = False
    fill: float = -math.inf

    def attributes(self) -> dict:
        return {"scale": FloatAttr(float(self.scale), F64), "causal": BoolAttr(self.causal),
                "has_bias": BoolAttr(self.has_bias), "has_mask": BoolAttr(self.has_mask),
                "fill": FloatAttr(float(self.fill), F64)}


def attention(b, q, k, v, bias=None, mask=None, *, scale: float, causal: bool = False,
              fill: float = -math.inf, with_lse: bool = False) -> list:
    """Builds an ``openhlo.attention`` composite with ``b`` (a stablehlo Builder) at its
    insertion point; returns [out] or [out, lse]."""
    config = AttentionConfig(scale, causal, bias is not None, mask is not None, fill)
    _check(q, k, v, bias, mask)
    k_source, v_source = unrepeated_heads(k), unrepeated_heads(v)
    if k_source.type.shape[-3] == v_source.type.shape[-3]:
        k, v = k_source, v_source  # read k/v before a repeat over heads: grouped-query
    operands = [x for x in (q, k, v, bias, mask) if x is not None]
    r = len(q.type.shape)
    results = [TensorType(q.type.shape[:-1] + v.type.shape[-1:], q.type.element_type)]
    if with_lse:
        results.append(TensorType(q.type.shape[:-1], compute_type(q.type.element_type)))
    name = _decomposition(b, ATTENTION, operands, results, config,
                          lambda args: _forward_body(b, args, config, r, with_lse))
    out = b.composite(ATTENTION, operands, name, attributes=config.attributes())
    return out if isinstance(out, list) else [out]


def attention_grad(b, q, k, v, bias, mask, out, lse, dout, *, scale: float,
                   causal: bool = False, fill: float = -math.inf) -> list:
    """Builds an ``openhlo.attention_grad`` composite; returns [dq, dk, dv]."""
    config = AttentionConfig(scale, causal, bias is not None, mask is not None, fill)
    _check(q, k, v, bias, mask)
    operands = [x for x in (q, k, v, bias, mask) if x is not None] + [out, lse, dout]
    results = [q.type, k.type, v.type]
    name = _decomposition(b, ATTENTION_GRAD, operands, results, config,
                          lambda args: _backward_body(b, args, config, len(q.type.shape)))
    return list(b.composite(ATTENTION_GRAD, operands, name, attributes=config.attributes()))


def unrepeated_heads(x):
    """``x`` [..., H, S, D] before a repeat of each head (``reshape(broadcast_in_dim)``
    from [..., Hkv, S, D] or [..., Hkv, 1, S, D], as transformers' ``repeat_kv`` and
    ``repeat_interleave`` lower), or ``x`` itself."""
    outer = x.owner
    if not _is_op(outer, "stablehlo.reshape"):
        return x
    spread = outer.operands[0].owner
    if not _is_op(spread, "stablehlo.broadcast_in_dim"):
        return x
    wide = spread.results[0].type.shape
    shape = x.type.shape
    r = len(shape)
    if len(wide) != r + 1 or wide[:r - 3] != shape[:r - 3] or wide[-2:] != shape[-2:] or \
            wide[r - 3] * wide[r - 2] != shape[r - 3]:
        return x
    source = spread.operands[0]
    dims = list(spread.attr("broadcast_dimensions").values)
    if source.type.shape == wide[:r - 2] + wide[r - 1:] and \
            dims == list(range(r - 2)) + [r - 1, r]:
        return source
    if source.type.shape == wide[:r - 2] + (1,) + wide[r - 1:] and dims == list(range(r + 1)):
        inner = source.owner
        if _is_op(inner, "stablehlo.reshape") and \
                inner.operands[0].type.shape == wide[:r - 2] + wide[r - 1:]:
            return inner.operands[0]
    return x


def _is_op(owner, name: str) -> bool:
    return getattr(owner, "name", None) == name and hasattr(owner, "operands")


def compute_type(element_type):
    """What the composites compute in: f32, or f64 for f64 operands."""
    return F64 if element_type == F64 else F32


def _check(q, k, v, bias, mask) -> None:
    qs, ks, vs = q.type.shape, k.type.shape, v.type.shape
    where = f"{ATTENTION} of q {q.type}, k {k.type}, v {v.type}"
    if len(qs) < 3 or len(ks) != len(qs) or len(vs) != len(qs):
        raise VerificationError(f"{where}: q, k, v must be [..., heads, length, dim], rank >= 3")
    if qs[:-3] != ks[:-3] or ks[:-3] != vs[:-3] or ks[:-1] != vs[:-1] or qs[-1] != ks[-1]:
        raise VerificationError(f"{where}: the shapes of k and v do not fit q")
    if ks[-3] == 0 or qs[-3] % ks[-3]:
        raise VerificationError(f"{where}: query heads are not a multiple of key/value heads")
    if str(q.type.element_type) not in FLOAT_TYPES or \
            not q.type.element_type == k.type.element_type == v.type.element_type:
        raise VerificationError(f"{where}: q, k and v must have one float type")
    scores = qs[:-1] + (ks[-2],)
    for name, x in (("bias", bias), ("mask", mask)):
        if x is None:
            continue
        shape = x.type.shape
        if len(shape) != len(scores) or any(d not in (1, s) for d, s in zip(shape, scores)):
            raise VerificationError(f"{where}: the {name} {x.type} does not broadcast to the "
                                    f"scores {scores}")
    if bias is not None and bias.type.element_type != q.type.element_type:
        raise VerificationError(f"{where}: the bias {bias.type} has another type than q")
    if mask is not None and mask.type.element_type != I1:
        raise VerificationError(f"{where}: the mask {mask.type} is not i1")


def _decomposition(b, kind: str, operands, results, config: AttentionConfig, body) -> str:
    """The name of the module's decomposition function for this signature and config,
    built by ``body(args) -> results`` the first time (every layer of a model shares it)."""
    key = repr((kind, [str(x.type) for x in operands], [str(t) for t in results], config))
    name = f"{kind.split('.')[1]}_{hashlib.sha256(key.encode()).hexdigest()[:12]}"
    if not b.module.has_function(name):
        with b.function(name, [x.type for x in operands], results, visibility="private") as (
                _, args):
            b.return_(*body(args))
    return name


def _split(args, config: AttentionConfig):
    q, k, v = args[:3]
    rest = list(args[3:])
    bias = rest.pop(0) if config.has_bias else None
    mask = rest.pop(0) if config.has_mask else None
    return q, k, v, bias, mask, rest


def _widen(b, x):
    """``x`` in the compute type."""
    wide = compute_type(x.type.element_type)
    return x if x.type.element_type == wide else b.convert(x, wide)


def _full(b, value: float, like):
    """A splat of ``value`` shaped and typed as the value ``like``."""
    return b.broadcast_in_dim(b.constant(np.asarray(value), like.type.element_type),
                              like.type.shape, [])


def _repeat_heads(b, x, group: int):
    """[..., Hkv, S, D] -> [..., Hkv * group, S, D], each head repeated ``group`` times."""
    if group == 1:
        return x
    shape = x.type.shape
    r = len(shape)
    wide = shape[:-2] + (group,) + shape[-2:]
    spread = b.broadcast_in_dim(x, wide, list(range(r - 2)) + [r - 1, r])
    return b.reshape(spread, shape[:-3] + (shape[-3] * group,) + shape[-2:])


def _batched(b, x, y, x_contract: int, y_contract: int):
    batch = tuple(range(len(x.type.shape) - 2))
    return b.dot_general(x, y, contracting=((x_contract,), (y_contract,)),
                         batching=(batch, batch))


def _logits(b, q, k, bias, mask, config: AttentionConfig, r: int):
    """scale * q k^T + bias, masked: [..., Hq, L, S] f32 (k already repeated to Hq)."""
    s = _batched(b, _widen(b, q), _widen(b, k), r - 1, r - 1)
    shape = s.type.shape
    s = b.multiply(s, _full(b, config.scale, s))
    if bias is not None:
        s = b.add(s, b.broadcast_in_dim(_widen(b, bias), shape, list(range(r))))
    keep = None if mask is None else b.broadcast_in_dim(mask, shape, list(range(r)))
    if config.causal:
        length, source = shape[-2:]
        rows = b.iota((length, source), I32, 0)
        cols = b.iota((length, source), I32, 1)
        causal = b.broadcast_in_dim(b.compare(rows, cols, "GE"), shape, [r - 2, r - 1])
        keep = causal if keep is None else b.and_(keep, causal)
    if keep is not None:
        s = b.select(keep, s, _full(b, config.fill, s))
    return s


def _row_reduce(b, x, kind: str):
    """Reduce the last dim of ``x``, kept as a size-1 dim."""
    r = len(x.type.shape)
    init = b.constant(np.asarray(-np.inf if kind == "maximum" else 0.0), x.type.element_type)
    reduced = b.reduce([x], [init], [r - 1], kind)
    return b.reshape(reduced, x.type.shape[:-1] + (1,))


def _spread(b, x, shape):
    return b.broadcast_in_dim(x, shape, list(range(len(shape))))


def _forward_body(b, args, config: AttentionConfig, r: int, with_lse: bool) -> list:
    q, k, v, bias, mask, _ = _split(args, config)
    group = q.type.shape[-3] // k.type.shape[-3]
    s = _logits(b, q, _repeat_heads(b, k, group), bias, mask, config, r)
    shape = s.type.shape
    row_max = _row_reduce(b, s, "maximum")
    e = b.exponential(b.subtract(s, _spread(b, row_max, shape)))
    total = _row_reduce(b, e, "add")
    p = b.divide(e, _spread(b, total, shape))
    out = _batched(b, p, _widen(b, _repeat_heads(b, v, group)), r - 1, r - 2)
    if out.type.element_type != q.type.element_type:
        out = b.convert(out, q.type.element_type)
    if not with_lse:
        return [out]
    lse = b.reshape(b.add(b.log(total), row_max), shape[:-1])
    return [out, lse]


def _sum_heads(b, x, kv_heads: int, group: int):
    """[..., Hkv * group, S, D] -> [..., Hkv, S, D], summing each key head's queries' share."""
    if group == 1:
        return x
    shape = x.type.shape
    r = len(shape)
    split = b.reshape(x, shape[:-3] + (kv_heads, group) + shape[-2:])
    return b.reduce([split], [b.constant(np.asarray(0.0), x.type.element_type)], [r - 2], "add")


def _backward_body(b, args, config: AttentionConfig, r: int) -> list:
    q, k, v, bias, mask, (out, lse, dout) = _split(args, config)
    kv_heads = k.type.shape[-3]
    group = q.type.shape[-3] // kv_heads
    kf, vf = _widen(b, _repeat_heads(b, k, group)), _widen(b, _repeat_heads(b, v, group))
    qf, dout, out = _widen(b, q), _widen(b, dout), _widen(b, out)
    s = _logits(b, qf, kf, bias, mask, config, r)
    shape = s.type.shape
    p = b.exponential(b.subtract(s, _spread(b, b.reshape(lse, shape[:-1] + (1,)), shape)))
    dv = _batched(b, p, dout, r - 2, r - 2)
    dp = _batched(b, dout, vf, r - 1, r - 1)
    delta = _row_reduce(b, b.multiply(dout, out), "add")
    ds = b.multiply(b.multiply(p, b.subtract(dp, _spread(b, delta, shape))),
                    _full(b, config.scale, p))
    dq = _batched(b, ds, kf, r - 1, r - 2)
    dk = _batched(b, ds, qf, r - 2, r - 2)
    grads = [dq, _sum_heads(b, dk, kv_heads, group), _sum_heads(b, dv, kv_heads, group)]
    return [g if g.type.element_type == x.type.element_type
            else b.convert(g, x.type.element_type) for g, x in zip(grads, (q, k, v))]
