"""``export_to_stablehlo``: exported programs run on our cpu backend with eager's results."""
import pytest
import torch

from frameworks.torch.export import ExportError, export_to_stablehlo


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(),
                               torch.nn.Linear(16, 4)).eval()


def test_weights_as_constants():
    model, x = _mlp(), torch.randn(3, 8)
    exported = export_to_stablehlo(model, (x,))
    assert "func.func @main(%arg0: tensor<3x8xf32>)" in exported.text
    assert exported.weights == []
    [out] = exported.run(x)
    torch.testing.assert_close(out, model(x).detach(), rtol=1e-4, atol=1e-5)


def test_weights_as_arguments():
    model, x = _mlp(), torch.randn(3, 8)
    exported = export_to_stablehlo(model, (x,), weights="arguments")
    assert exported.weight_names == ["p_0_weight", "p_0_bias", "p_2_weight", "p_2_bias"]
    assert "(%arg0: tensor<16x8xf32>, %arg1: tensor<16xf32>" in exported.text
    [out] = exported.run(x)
    torch.testing.assert_close(out, model(x).detach(), rtol=1e-4, atol=1e-5)
    # the text alone is a complete program: compile it and pass the weights ourselves
    import pjrt
    from frameworks.torch.lowering.dtypes import to_numpy
    exe = pjrt.make_client("cpu").compile(exported.text)
    [again] = exe(*exported.weights, to_numpy(x))
    torch.testing.assert_close(torch.from_numpy(again), out)


def test_transformer_block_and_sdpa_kept_whole():
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        block = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0,
                                                 batch_first=True).eval()
        x = torch.randn(2, 5, 32)
        [out] = export_to_stablehlo(block, (x,)).run(x)
        torch.testing.assert_close(out, block(x).detach(), rtol=1e-4, atol=1e-5)
    finally:
        torch.backends.mha.set_fastpath_enabled(True)


def test_cnn_with_batch_norm():
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(8, 2)).eval()
    x = torch.randn(2, 3, 8, 8)
    [out] = export_to_stablehlo(model, (x,), weights="arguments").run(x)
    torch.testing.assert_close(out, model(x).detach(), rtol=1e-4, atol=1e-5)


def test_unsupported_op_is_a_clear_error():
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.special.i0(x)

    with pytest.raises(ExportError, match=r"aten\.i0\.default.*no lowering registered"):
        export_to_stablehlo(M(), (torch.randn(3),))
