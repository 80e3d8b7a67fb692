"""Per-op lowerings against eager PyTorch: each case is traced to core ATen, lowered with
no eager fallback, run on the cpu backend and compared."""
import pytest
import torch
import torch.nn.functional as F

from frameworks.torch.testing import assert_close, fallback_ops, trace_and_run

torch.manual_seed(0)
X = torch.randn(2, 3, 8, 8)
W = torch.randn(4, 3, 3, 3)
M = torch.randn(5, 7)
IDX = torch.tensor([0, 2, 1, 2])

CASES = {
    "add_alpha": (lambda x: torch.add(x, x * 2, alpha=0.5), X),
    "div_floor_int": (lambda a: torch.div(a, 3, rounding_mode="floor"),
                      torch.tensor([-7, -6, 5, 7])),
    "remainder": (lambda x: torch.remainder(x, -0.7), X),
    "compare_mixed": (lambda x: (x > 0.5) & (x.to(torch.int32) <= 1), X),
    "where": (lambda x: torch.where(x > 0, x, 0.1 * x), X),
    "clamp": (lambda x: x.clamp(-0.5, 0.25), X),
    "unary": (lambda x: (x.exp() + x.tanh() + x.abs().rsqrt() + x.sigmoid() + x.erf()
                         + x.abs().log1p() + x.sin()), X),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), X),
    "leaky_elu": (lambda x: F.leaky_relu(x, 0.2) + F.elu(x), X),
    "sum_mean": (lambda x: (x.sum((1, 3)), x.mean(-1, keepdim=True)), X),
    "amax_amin_prod": (lambda x: (x.amax(1), x.amin((0, 2)), x.prod(2)), X),
    "argmax_max": (lambda x: (x.argmax(1), x.max(2), x.argmin()), X),
    "var": (lambda x: torch.var(x, (2, 3), correction=1), X),
    "cumsum": (lambda x: torch.cumsum(x, 2), X),
    "softmax": (lambda x: (torch.softmax(x, -1), torch.log_softmax(x, 1)), X),
    "layer_norm": (lambda x: F.layer_norm(x, (8,), torch.ones(8) * 2, torch.ones(8)), X),
    "group_norm": (lambda x: F.group_norm(torch.cat([x, x], 1), 3), X),
    "batch_norm_eval": (lambda x: F.batch_norm(x, torch.zeros(3), torch.ones(3) * 2), X),
    "view_permute": (lambda x: x.view(6, 64).t().reshape(8, 8, 6).permute(2, 0, 1), X),
    "slice_select": (lambda x: x[:, 1:, ::2, 3], X),
    "expand_cat": (lambda m: torch.cat([m[None].expand(2, 5, 7), m[None, :, :2].expand(
        2, 5, 2)], -1), M),
    "split_flip_pad": (lambda x: (F.pad(x.flip(-1), (1, 2, 0, -1)), *x.split([1, 2], 1)), X),
    "repeat": (lambda m: m.repeat(2, 1, 3), M),
    "slice_scatter": (lambda m: torch.slice_scatter(m, torch.ones(5, 3), 1, 1, 7, 2), M),
    "arange_full": (lambda m: m + torch.arange(7) * 0.5 + torch.full((5, 1), 3.0), M),
    "mm_bmm_addmm": (lambda m: (m @ m.t(), torch.bmm(m[None], m.t()[None]),
                               torch.addmm(torch.ones(5), m, m.t(), beta=0.5, alpha=2)), M),
    "conv2d": (lambda x, w: F.conv2d(x, w, torch.ones(4), stride=2, padding=1), X, W),
    "conv2d_groups_dilation": (lambda x: F.conv2d(torch.cat([x, x], 1), W[:, :2].repeat(
        3, 1, 1, 1), groups=3, dilation=2), X),
    "conv_transpose2d": (lambda x, w: F.conv_transpose2d(x, w.transpose(0, 1), stride=2,
                                                          padding=1, output_padding=1), X, W),
    "max_pool2d": (lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True), X),
    "max_pool2d_indices": (lambda x: F.max_pool2d(x, 2, return_indices=True), X),
    "avg_pool2d": (lambda x: (F.avg_pool2d(x, 3, 2, 1), F.avg_pool2d(
        x, 3, 2, 1, ceil_mode=True, count_include_pad=False)), X),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (3, 4)), X),
    "upsample": (lambda x: (F.interpolate(x, scale_factor=2), F.interpolate(
        x, size=(5, 11), mode="bilinear"), F.interpolate(x, size=(5, 11), mode="bilinear",
                                                         align_corners=True)), X),
    "embedding": (lambda m: F.embedding(IDX.view(2, 2), m), M),
    "index_select_gather": (lambda m: (m.index_select(1, IDX), torch.gather(
        m, 1, IDX.repeat(5, 1))), M),
    "index_tensor": (lambda x: (x[IDX[:2] // 2, :, IDX[1:3]], x[:, IDX[:3]], x[..., -1],
                               x[IDX[2:] - 1, :, :, IDX[:2]]), X),
    "index_put": (lambda m: m.index_put((IDX,), torch.ones(7), accumulate=True), M),
    "scatter": (lambda m: (m.scatter(1, IDX.view(1, 4).repeat(5, 1) * 2, 1.5),
                           m.scatter_add(0, IDX.view(4, 1).repeat(1, 7), m[:4]),
                           m.scatter_reduce(1, IDX.view(1, 4).repeat(5, 1), m, "amax")), M),
    "sort_topk": (lambda m: (torch.sort(m, 1, descending=True), torch.topk(m, 3, 0)), M),
    "sdpa": (lambda q: F.scaled_dot_product_attention(q, q * 0.5, q.flip(2), is_causal=True),
             torch.randn(2, 2, 6, 8)),
    "sdpa_mask": (lambda q, m: F.scaled_dot_product_attention(q, q, q, attn_mask=m),
                  torch.randn(2, 2, 6, 8), torch.rand(6, 6) > 0.3),
    "as_strided": (lambda m: torch.as_strided(m, (3, 3), (7, 2), 1), M),
    # a strided part of m replaced, and all of m in order (what functionalized in-place ops
    # on views of a whole tensor leave, as in torchvision ConvNeXt's backward)
    "as_strided_scatter": (lambda m: (torch.as_strided_scatter(m, -m[:3, :3], (3, 3), (7, 2), 1),
                                      torch.as_strided_scatter(m, m.t().contiguous().t() * 2,
                                                               m.shape, m.stride())), M),
    # timm GhostNet's training step makes one (strides do not matter: values are row-major)
    "new_empty_strided": (lambda m: m.new_empty_strided((5, 7), (1, 5)).fill_(3.0) + m, M),
    "to_copy": (lambda m: (m.to(torch.float64) * 3).to(torch.int32), M),
    "diagonal": (lambda x: (torch.diagonal(x, 1, 1, 3), torch.diagonal(x, -2, -1, -2)), X),
    "signs": (lambda m: (torch.signbit(m * -0.0), torch.copysign(m, -m), torch.fmax(
        m, torch.full_like(m, float("nan")))), M),
    "special": (lambda m: (torch.lgamma(m.abs() + 0.1), torch.digamma(m.abs() + 0.1),
                           torch.erfinv(m.clamp(-0.9, 0.9)), torch.exp2(m),
                           torch.round(m, decimals=2)), M),
    "addmv_addbmm": (lambda m: (torch.addmv(torch.ones(5), m, torch.ones(7), alpha=2),
                                torch.addbmm(torch.ones(5, 5), m[None], m.t()[None])), M),
    "cumprod_var_mean_norm": (lambda m: (torch.cumprod(m, 1), torch.var_mean(m, 1),
                                         torch.linalg.vector_norm(m, 3, dim=0)), M),
    "cdist_pdist": (lambda m: (torch.cdist(m, m[:3]), F.pdist(m, 1)), M),
    "masked_scatter": (lambda x: x.masked_scatter(x > 0, -x), X),
    "grid_sample": (lambda x, g: F.grid_sample(x, g, align_corners=False), X,
                    torch.rand(2, 5, 6, 2) * 2.4 - 1.2),
    # booleans: the reductions start from the monoid identity of i1 (false for max, true for min)
    "bool_amax_amin_scatter": (lambda b: (torch.amax(b, 1), torch.amin(b, 0),
                                          b[0].scatter_reduce(0, IDX, b[1], "amax",
                                                              include_self=False),
                                          b[0].scatter_reduce(0, IDX, b[2], "amin",
                                                              include_self=False)),
                               torch.tensor([[True, False, False, True, False],
                                             [False, True, False, False, True],
                                             [False, False, True, False, True]])),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_matches_eager(name):
    fn, *args = CASES[name]
    ours, plan = trace_and_run(fn, *args)
    assert fallback_ops(plan) == {}
    assert_close(ours, fn(*args))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_pow_by_small_integers_rounds_as_eager(dtype):
    # eager computes x**2, x**3 and x**-2 by multiplying; so do we, to the bit
    x = (X * 3).to(dtype)
    fn = lambda a: (a ** 2, a ** 3, a ** -2, a ** 2.5)
    ours, plan = trace_and_run(fn, x)
    assert fallback_ops(plan) == {}
    for got, expected in zip(ours[:3], fn(x)[:3]):
        assert torch.equal(got, expected)
    assert_close(ours[3], fn(x)[3])


def test_bfloat16_inputs_cross_unchanged():
    x = torch.randn(4, 8).to(torch.bfloat16)
    ours, plan = trace_and_run(lambda a: a * 2 + 1, x)
    assert ours.dtype == torch.bfloat16 and fallback_ops(plan) == {}
    assert_close(ours, x * 2 + 1, rtol=1e-2, atol=1e-2)
