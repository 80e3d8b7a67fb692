"""The lowering registry: one rule per OpOverload, clear errors, refusals fall back."""
import pytest
import torch
import torch.nn.functional as F

from stablehlo.registry import RegistryError

from frameworks.torch.lowering import LOWERINGS, lowers
from frameworks.torch.testing import fallback_ops, trace_and_run

aten = torch.ops.aten


def test_registering_an_op_twice_is_an_error():
    with pytest.raises(RegistryError, match="already registered"):
        lowers(aten.add.Tensor)(lambda ctx, a, b: None)


def test_unknown_op_lists_known_ones():
    with pytest.raises(RegistryError, match=r"unknown ATen lowering.*aten\.add\.Tensor"):
        LOWERINGS.get(aten.i0.default)


def test_a_refusing_rule_falls_back_with_its_reason():
    q, k, v = torch.randn(1, 4, 3, 8), torch.randn(1, 2, 3, 8), torch.randn(1, 2, 3, 8)

    def fn(q, k, v):  # grouped-query attention: 4 query heads share 2 key/value heads
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    ours, plan = trace_and_run(fn, q, k, v)
    (reason,) = fallback_ops(plan).values()
    assert "grouped-query attention" in reason
    torch.testing.assert_close(ours, fn(q, k, v))
