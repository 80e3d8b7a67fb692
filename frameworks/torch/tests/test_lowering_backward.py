"""The backward ATen ops that AOTAutograd keeps whole in training graphs, called directly on
several configurations and compared with eager."""
import pytest
import torch

from frameworks.torch.testing import assert_close, fallback_ops, trace_and_run

aten = torch.ops.aten


def _check(fn, *args, rtol=1e-4, atol=1e-5):
    ours, plan = trace_and_run(fn, *args)
    assert fallback_ops(plan) == {}
    assert_close(ours, fn(*args), rtol=rtol, atol=atol)


@pytest.mark.parametrize("stride,padding,dilation,groups,size", [
    (1, 0, 1, 1, 9), (2, 1, 1, 1, 9), (2, 0, 2, 1, 10), (3, 2, 1, 2, 11), (1, 1, 1, 4, 8),
])
def test_convolution_backward(stride, padding, dilation, groups, size):
    torch.manual_seed(0)
    x = torch.randn(2, 4, size, size - 1)
    w = torch.randn(8, 4 // groups, 3, 2)
    out = torch.nn.functional.conv2d(x, w, None, stride, padding, dilation, groups)
    grad = torch.randn_like(out)

    def backward(grad, x, w):
        return aten.convolution_backward.default(
            grad, x, w, [8], [stride] * 2, [padding] * 2, [dilation] * 2, False, [0, 0],
            groups, [True, True, True])
    _check(backward, grad, x, w, atol=1e-4)


@pytest.mark.parametrize("kernel,stride,padding,ceil_mode,include_pad", [
    (2, 2, 0, False, True), (3, 2, 1, False, True), (3, 2, 1, True, False), (3, 1, 1, False,
                                                                              False),
])
def test_avg_pool2d_backward(kernel, stride, padding, ceil_mode, include_pad):
    x = torch.randn(2, 3, 9, 8)
    out = torch.nn.functional.avg_pool2d(x, kernel, stride, padding, ceil_mode, include_pad)
    grad = torch.randn_like(out)
    _check(lambda g, x: aten.avg_pool2d_backward.default(
        g, x, [kernel] * 2, [stride] * 2, [padding] * 2, ceil_mode, include_pad, None), grad, x)


def test_adaptive_avg_pool2d_backward():
    x, grad = torch.randn(2, 3, 9, 7), torch.randn(2, 3, 4, 3)
    _check(aten._adaptive_avg_pool2d_backward.default, grad, x)


@pytest.mark.parametrize("causal,mask", [(False, False), (True, False), (False, True)])
def test_flash_attention_backward(causal, mask):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8) for _ in range(3))
    attn_mask = torch.randn(5, 5) if mask else None  # (SDPA turns bool masks into these)
    out, lse = aten._scaled_dot_product_flash_attention_for_cpu.default(
        q, k, v, 0.0, causal, attn_mask=attn_mask)
    grad = torch.randn_like(out)

    def backward(grad, q, k, v, out, lse):
        return aten._scaled_dot_product_flash_attention_for_cpu_backward.default(
            grad, q, k, v, out, lse, 0.0, causal, attn_mask=attn_mask)
    _check(backward, grad, q, k, v, out, lse)


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_embedding_bag(mode):
    weight, indices = torch.randn(10, 3), torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
    offsets = torch.tensor([0, 4, 4])
    _check(lambda w, i, o: aten._embedding_bag.default(w, i, o, False, mode, False, None,
                                                       False, 2), weight, indices, offsets)
