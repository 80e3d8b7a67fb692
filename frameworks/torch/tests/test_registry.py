"""The lowering registry: one rule per OpOverload, clear errors, refusals fall back."""
import pytest
import torch

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
    def fn(x, index, src):  # an integer mean: torch floor-divides, which no rule spells
        return x.scatter_reduce(0, index, src, reduce="mean")

    args = (torch.arange(6), torch.tensor([0, 0, 1, 2, 2, 2]), torch.arange(6) * 3)
    ours, plan = trace_and_run(fn, *args)
    (reason,) = fallback_ops(plan).values()
    assert "reduce='mean' on integers" in reason
    torch.testing.assert_close(ours, fn(*args))
