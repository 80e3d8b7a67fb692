"""float64 numpy attention for the JAX attention tests (test_jax_attention*.py): the forward
and, given the output's cotangent, the gradients, in JAX's [..., L, heads, D] layout with
grouped heads."""
import numpy as np


def attention_reference(q, k, v, dout=None, bias=None, keep=None, scale=None):
    """The attention output; with ``dout`` (out, dq, dk, dv), dk and dv per key/value head."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    group = q.shape[-2] // k.shape[-2]
    kr, vr = np.repeat(k, group, axis=-2), np.repeat(v, group, axis=-2)
    scale = scale if scale is not None else 1 / np.sqrt(q.shape[-1])
    s = np.einsum("...lhd,...shd->...hls", q, kr) * scale
    if bias is not None:
        s = s + bias
    if keep is not None:
        s = np.where(keep, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = np.einsum("...hls,...shd->...lhd", p, vr)
    if dout is None:
        return out
    dout = np.asarray(dout, np.float64)
    dp = np.einsum("...lhd,...shd->...hls", dout, vr)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True)) * scale
    dq = np.einsum("...hls,...shd->...lhd", ds, kr)
    dk = np.einsum("...hls,...lhd->...shd", ds, q)
    dv = np.einsum("...hls,...lhd->...shd", p, dout)

    def per_kv_head(x):  # the query heads of a group share one key/value head
        return x.reshape(x.shape[:-2] + (k.shape[-2], group, x.shape[-1])).sum(-2)
    return out, dq, per_kv_head(dk), per_kv_head(dv)
