"""Max pooling through torch.compile against eager PyTorch, bit for bit: values and indices
(the pair kernel), and the values alone, whose indices the compiler drops
(xla_core/passes/prune_argreduce_index.py, the value-only kernel). Inputs: random values,
few distinct ones (ties, both zeros, windows of -inf) and NaNs, at most one in a window
(eager keeps a window's last NaN, the lowering its first)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import frameworks.torch  # noqa: F401  (registers the "openhlo" backend)

# (NCHW shape, kernel, stride, padding, ceil_mode): ResNet's stem (k3 s2 p1), k2 s2, k3 s1
# p1 (GoogLeNet's and DenseNet's), ceil_mode; odd sizes and rows long enough that the
# vectorized runs have remainders.
POOLS = [((2, 3, 10, 12), 2, 2, 0, False), ((2, 4, 17, 19), 3, 2, 1, False),
         ((1, 3, 20, 33), 3, 1, 1, False), ((1, 2, 16, 15), 3, 2, 0, True),
         ((1, 2, 9, 70), 3, 2, 1, True)]


def _inputs(shape) -> dict:
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    ties = rng.choice(np.array([0.0, -0.0, 1.0, 2.0, -np.inf], np.float32), size=shape)
    ties[..., :3, :3] = -np.inf  # whole windows of -inf
    nans = x.copy()
    nans[..., ::4, ::4] = np.nan
    return {name: torch.from_numpy(a) for name, a in
            {"random": x, "ties": ties, "nans": nans}.items()}


def _same_bits(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype, what
    if got.dtype == torch.float32:
        got, want = got.view(torch.int32), want.view(torch.int32)
    assert torch.equal(got, want), what


@pytest.mark.parametrize("shape,k,s,p,ceil", POOLS)
def test_max_pool2d_matches_eager_bit_for_bit(shape, k, s, p, ceil):
    def with_indices(x):
        return F.max_pool2d(x, k, s, p, ceil_mode=ceil, return_indices=True)

    def values_only(x):
        return F.max_pool2d(x, k, s, p, ceil_mode=ceil)

    compiled_pair = torch.compile(with_indices, backend="openhlo")
    compiled_values = torch.compile(values_only, backend="openhlo")
    with torch.no_grad():
        for name, x in _inputs(shape).items():
            want_values, want_indices = with_indices(x)
            got_values, got_indices = compiled_pair(x)
            _same_bits(got_values, want_values, f"{name}: values")
            _same_bits(got_indices, want_indices, f"{name}: indices")
            _same_bits(compiled_values(x), values_only(x), f"{name}: values only")
