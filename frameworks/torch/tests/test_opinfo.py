"""OpInfo samples (float32) against eager for the ops we claim to lower, two samples each to
keep the suite fast; ``python -m tools.torch_opinfo`` sweeps every op and sample."""
import pytest

CLAIMED = """
abs acos acosh add addmm addcmul addcdiv amax amin any all argmax argmin asin asinh atan
atan2 atanh baddbmm bmm cat ceil clamp clone constant_pad_nd cos cosh cumsum div.floor_rounding
div.no_rounding_mode div.trunc_rounding eq erf exp expand expm1 flip floor fmod gather ge gt
index_add index_select isinf isnan le log log10 log1p log2 log_softmax logical_and logical_not
logical_or logical_xor lt masked_fill max.reduction_with_dim maximum mean min.reduction_with_dim
minimum mm native_layer_norm native_group_norm ne neg permute pow prod reciprocal remainder
repeat round rsqrt scatter scatter_add select select_scatter sigmoid sign sin sinh slice
slice_scatter softmax sort split_with_sizes sqrt squeeze sub sum tan tanh topk trunc unsqueeze
var where nn.functional.adaptive_avg_pool2d nn.functional.avg_pool2d nn.functional.conv1d
nn.functional.conv2d nn.functional.conv_transpose2d nn.functional.elu nn.functional.embedding
nn.functional.gelu nn.functional.hardtanh nn.functional.interpolate.bilinear
nn.functional.interpolate.nearest nn.functional.layer_norm nn.functional.leaky_relu
nn.functional.max_pool2d nn.functional.relu nn.functional.grid_sample nn.functional.pdist
diagonal masked_scatter cdist max_pool2d_with_indices_backward addmv addbmm copysign fmax
fmin var_mean nextafter exp2 digamma lgamma erfc erfinv linalg.vector_norm cumprod cummax
cummin logcumsumexp kthvalue unfold scatter_reduce.sum scatter_reduce.mean scatter_reduce.amax
nn.functional.interpolate.trilinear nonzero masked_select unique
""".split()


def _opinfos():
    pytest.importorskip("expecttest")  # torch's OpInfo database imports it
    from torch.testing._internal.common_methods_invocations import op_db
    by_name = {op.name + (f".{op.variant_test_name}" if op.variant_test_name else ""): op
               for op in op_db}
    return by_name


@pytest.mark.parametrize("name", CLAIMED)
def test_opinfo_samples_match_eager(name):
    from frameworks.torch.testing import check_opinfo
    opinfo = _opinfos()[name]
    result = check_opinfo(opinfo, max_samples=2)
    assert result["pass"] > 0, result
    assert result["fail"] == result["fallback"] == result["error"] == 0, result["problems"]
