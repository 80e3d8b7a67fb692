"""PT2E-quantized graphs (quantize/dequantize ops around convolutions and linears) lowered to
integer ops, against torch's own eager run of the same quantized graph.

``QdqNet`` is what ``convert_pt2e`` produces for conv -> relu -> linear with x86's quantizer
(uint8 activations with a zero point, int8 per-channel weights), written with torch's
``quantized_decomposed`` ops directly, since torch 2.13 no longer ships ``prepare_pt2e``;
with torchao installed the real flow is tested too.
"""
import numpy as np
import pytest
import torch

from frameworks.torch import export_to_stablehlo
from frameworks.torch.tests.torch_support import fresh_compile, records

qd = torch.ops.quantized_decomposed


def _per_channel(weight: torch.Tensor, zero_points: torch.Tensor):
    """int8 weights, f32 scales and int64 zero points, per output channel."""
    flat = weight.reshape(weight.shape[0], -1)
    scales = (flat.abs().amax(1) / 120).to(torch.float32)
    q = qd.quantize_per_channel(weight, scales, zero_points, 0, -128, 127, torch.int8)
    return q, scales, zero_points


class QdqNet(torch.nn.Module):
    def __init__(self, weight_zero_points: bool):
        super().__init__()
        torch.manual_seed(0)
        conv = torch.nn.Conv2d(4, 8, 3, padding=1, groups=2)
        fc = torch.nn.Linear(8 * 6 * 6, 10)
        zeros = torch.zeros(8, dtype=torch.int64)
        fc_zeros = (torch.arange(10) % 5 - 2) if weight_zero_points else torch.zeros(10)
        for name, layer, zp in (("conv", conv, zeros), ("fc", fc, fc_zeros.to(torch.int64))):
            q, s, z = _per_channel(layer.weight.detach(), zp)
            self.register_buffer(f"{name}_q", q)
            self.register_buffer(f"{name}_scale", s)
            self.register_buffer(f"{name}_zero_point", z)
            self.register_buffer(f"{name}_bias", layer.bias.detach().clone())

    def forward(self, x):
        x = qd.quantize_per_tensor(x, 0.02, 128, 0, 255, torch.uint8)
        x = qd.dequantize_per_tensor(x, 0.02, 128, 0, 255, torch.uint8)
        w = qd.dequantize_per_channel(self.conv_q, self.conv_scale, self.conv_zero_point, 0,
                                      -128, 127, torch.int8)
        y = torch.relu(torch.nn.functional.conv2d(x, w, self.conv_bias, padding=1, groups=2))
        y = qd.quantize_per_tensor(y, 0.01, 0, 0, 255, torch.uint8)
        y = qd.dequantize_per_tensor(y, 0.01, 0, 0, 255, torch.uint8)
        w = qd.dequantize_per_channel(self.fc_q, self.fc_scale, self.fc_zero_point, 0,
                                      -128, 127, torch.int8)
        return torch.nn.functional.linear(y.flatten(1), w, self.fc_bias)


def _integer_ops(text: str) -> tuple[list, list]:
    lines = text.splitlines()
    convs = [line for line in lines if "stablehlo.convolution" in line
             and "xi8>, tensor<8x2x3x3xi8>) -> tensor<" in line]
    dots = [line for line in lines if "stablehlo.dot_general" in line
            and "xi8>, tensor<" in line and "xi32>" in line]
    return convs, dots


def _within_a_step(got: torch.Tensor, want: torch.Tensor, model: QdqNet) -> None:
    """Equal up to f32 rounding, except where rounding moved a quantized activation by one
    step (0.01) on the way: at most that step times the largest weight row's sum."""
    bound = 0.01 * float((model.fc_q.float() - model.fc_zero_point[:, None]).abs().sum(1).max()
                         * model.fc_scale.max())
    difference = (got - want).abs()
    assert difference.max().item() <= bound
    assert (difference <= 1e-4).float().mean().item() >= 0.95


@pytest.mark.parametrize("weight_zero_points", [False, True])
def test_compiled_qdq_graph_runs_integer_ops(weight_zero_points, monkeypatch, caplog):
    from frameworks.torch import backend
    real, modules = backend.client(), []

    class Recorder:
        def compile(self, module, *args, **kwargs):
            modules.append(module)
            return real.compile(module, *args, **kwargs)
    monkeypatch.setattr(backend, "client", lambda: Recorder())
    model = QdqNet(weight_zero_points).eval()
    x = torch.randn(2, 4, 6, 6)
    with torch.no_grad():
        want = model(x)
        got = fresh_compile(model)(x)
    _within_a_step(got, want, model)
    convs, dots = _integer_ops("\n".join(str(m) for m in modules))
    assert len(convs) == 1 and len(dots) == 1
    assert not records(caplog, "runs in float")


def test_export_of_a_qdq_graph_is_integer():
    model = QdqNet(weight_zero_points=False).eval()
    x = torch.randn(2, 4, 6, 6)
    exported = export_to_stablehlo(model, (x,))
    convs, dots = _integer_ops(exported.text)
    assert len(convs) == 1 and len(dots) == 1
    assert "quant.uniform" not in exported.text   # the integer form, not quantized types
    _within_a_step(exported.run(x)[0], model(x).detach(), model)


def test_one_dequantized_operand_warns_and_runs_in_float(caplog):
    def f(x, w_q, scale, zero_point):
        w = qd.dequantize_per_channel(w_q, scale, zero_point, 0, -128, 127, torch.int8)
        return x @ w.t()
    w_q = torch.randint(-127, 128, (6, 5), dtype=torch.int8)
    scale, zero_point = torch.rand(6) / 100 + 0.01, torch.zeros(6, dtype=torch.int64)
    x = torch.randn(3, 5)
    got = fresh_compile(f)(x, w_q, scale, zero_point)
    np.testing.assert_allclose(got.numpy(), f(x, w_q, scale, zero_point).numpy(), rtol=1e-5,
                               atol=1e-6)
    assert records(caplog, "only one operand is dequantized")


def test_torchao_convert_pt2e_model_is_lowered_to_integer_ops():
    pt2e = pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")
    from torchao.quantization.pt2e.quantizer.x86_inductor_quantizer import (
        X86InductorQuantizer, get_default_x86_inductor_quantization_config)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.fc = torch.nn.Linear(8 * 8 * 8, 10)

        def forward(self, x):
            return self.fc(torch.relu(self.conv(x)).flatten(1))
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8, 8)
    graph = torch.export.export(Net().eval(), (x,)).module()
    quantizer = X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config())
    prepared = pt2e.prepare_pt2e(graph, quantizer)
    for _ in range(4):
        prepared(torch.randn(2, 3, 8, 8))
    converted = pt2e.convert_pt2e(prepared)
    exported = export_to_stablehlo(converted, (x,))
    assert "xi8>) -> tensor<2x8x8x8xi32>" in exported.text
    torch.testing.assert_close(exported.run(x)[0], converted(x), rtol=1e-4, atol=1e-4)
