"""stablehlo/attention.py: the composite's checks, its decomposition on the reference
interpreter, and k/v read from before a repeat over heads."""
import numpy as np
import pytest

from stablehlo.attention import attention, unrepeated_heads
from stablehlo.builder import Builder
from stablehlo.errors import VerificationError
from stablehlo.interpreter.evaluator import evaluate
from stablehlo.ir.types import F32, I32, TensorType


def _args(b, *shapes, element=F32):
    return b.function("main", [TensorType(s, element) for s in shapes])


def test_heads_must_divide():
    b = Builder()
    with _args(b, (1, 3, 4, 8), (1, 2, 5, 8), (1, 2, 5, 8)) as (_, (q, k, v)):
        with pytest.raises(VerificationError, match="not a multiple of key/value heads"):
            attention(b, q, k, v, scale=1.0)
        b.return_(q)


def test_integer_operands_are_refused():
    b = Builder()
    with _args(b, (1, 2, 4, 8), (1, 2, 5, 8), (1, 2, 5, 8), element=I32) as (_, (q, k, v)):
        with pytest.raises(VerificationError, match="one float type"):
            attention(b, q, k, v, scale=1.0)
        b.return_(q)


def test_a_repeated_key_is_read_from_before_the_repeat():
    """transformers' repeat_kv: [b, 2, s, d] -> [b, 2, 3, s, d] -> [b, 6, s, d]."""
    b = Builder()
    with _args(b, (1, 6, 4, 8), (1, 2, 5, 8), (1, 2, 5, 8)) as (_, (q, k, v)):
        def repeat(x):
            wide = b.broadcast_in_dim(x, (1, 2, 3, 5, 8), [0, 1, 3, 4])
            return b.reshape(wide, (1, 6, 5, 8))
        rk, rv = repeat(k), repeat(v)
        assert unrepeated_heads(rk) is k and unrepeated_heads(q) is q
        (out,) = attention(b, q, rk, rv, scale=0.5)
        b.return_(out)
    composite = out.owner
    assert composite.operands[1] is k and composite.operands[2] is v  # grouped-query
    rng = np.random.default_rng(0)
    qa, ka, va = (rng.standard_normal(s).astype(np.float32)
                  for s in ((1, 6, 4, 8), (1, 2, 5, 8), (1, 2, 5, 8)))
    (got,) = evaluate(b.module, [qa, ka, va])
    kr, vr = (np.repeat(x.astype(np.float64), 3, axis=1) for x in (ka, va))
    s = np.einsum("bhld,bhsd->bhls", qa.astype(np.float64), kr) * 0.5
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(got, np.einsum("bhls,bhsd->bhld", p, vr), rtol=1e-5, atol=1e-6)
