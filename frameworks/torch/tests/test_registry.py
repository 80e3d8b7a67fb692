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
    x, grid = torch.randn(1, 2, 4, 4), torch.rand(1, 3, 3, 2) * 2 - 1

    def fn(a, g):
        return F.grid_sample(a, g, padding_mode="reflection", align_corners=False)

    ours, plan = trace_and_run(fn, x, grid)
    assert "padding_mode=2" in fallback_ops(plan)["aten.grid_sampler_2d.default"]
    torch.testing.assert_close(ours, fn(x, grid))
