"""``export_to_stablehlo(..., dynamic_shapes=...)``: symbolic dims print as ``?``; the text
parses and verifies in upstream MLIR (jaxlib), XLA (jaxlib's cpu client) runs it after shape
refinement, and our cpu backend runs the same graph specialized per input shape, all with
eager's results at two sizes of each symbolic dim."""
import pytest
import torch

from frameworks.torch.export import ExportError, export_to_stablehlo

jax = pytest.importorskip("jax")

from frameworks.torch.models.upstream import run_on_xla
from frameworks.torch.models.upstream import verify as upstream_verify

Dim = torch.export.Dim


def _check(model, exported, examples):
    upstream_verify(exported.text)
    for args in examples:
        with torch.no_grad():
            expected = model(*args)
        expected = (expected,) if isinstance(expected, torch.Tensor) else tuple(expected)
        ours = exported.run(*args)
        torch.testing.assert_close(tuple(ours), expected, rtol=1e-4, atol=1e-5)
        arrays = [*exported.weights, *(a.numpy() for a in args)]
        on_xla = run_on_xla(exported.module, arrays, [e.shape for e in expected])
        torch.testing.assert_close(tuple(map(torch.from_numpy, on_xla)), expected,
                                   rtol=1e-4, atol=1e-5)


def test_dynamic_batch_mlp():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(),
                                torch.nn.Linear(16, 4)).eval()
    exported = export_to_stablehlo(model, (torch.randn(3, 8),),
                                   dynamic_shapes=({0: Dim("batch")},), weights="arguments")
    assert "%arg4: tensor<?x8xf32>) -> tensor<?x4xf32>" in exported.text
    _check(model, exported, [(torch.randn(3, 8),), (torch.randn(7, 8),)])


def test_dynamic_dims_weights_as_constants():
    torch.manual_seed(0)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.randn(8))

        def forward(self, x, y):
            return (torch.softmax(x * self.scale, dim=-1) * torch.tanh(y)
                    + x.sum(-1, keepdim=True) + 1.0)

    model = Model().eval()
    b, s = Dim("b"), Dim("s")
    exported = export_to_stablehlo(model, (torch.randn(2, 5, 8), torch.randn(2, 5, 8)),
                                   dynamic_shapes=({0: b, 1: s}, {0: b, 1: s}))
    assert "func.func @main(%arg0: tensor<?x?x8xf32>, %arg1: tensor<?x?x8xf32>)" in exported.text
    _check(model, exported, [(torch.randn(2, 5, 8), torch.randn(2, 5, 8)),
                             (torch.randn(3, 9, 8), torch.randn(3, 9, 8))])


def test_dynamic_shapes_by_argument_name_and_static_dims():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()).eval()
    x = torch.randn(3, 8)
    static = export_to_stablehlo(model, (x,), dynamic_shapes={"input": {0: None}})
    assert "func.func @main(%arg0: tensor<3x8xf32>)" in static.text  # None: a static dim
    exported = export_to_stablehlo(model, (x,), dynamic_shapes={"input": {0: Dim("n")}})
    assert "func.func @main(%arg0: tensor<?x8xf32>) -> tensor<?x4xf32>" in exported.text
    _check(model, exported, [(x,), (torch.randn(11, 8),)])


def test_derived_sizes_flatten_and_slice():
    class Model(torch.nn.Module):
        def forward(self, x):
            flat = x.flatten(0, 1)                   # size 4 * batch
            return flat[1:] * 2.0, torch.arange(x.shape[0]) + 1

    model = Model()
    exported = export_to_stablehlo(model, (torch.randn(3, 4, 5),),
                                   dynamic_shapes=({0: Dim("batch")},))
    assert "func.func @main(%arg0: tensor<?x4x5xf32>) -> (tensor<?x5xf32>, tensor<?xi64>)" \
        in exported.text
    _check(model, exported, [(torch.randn(3, 4, 5),), (torch.randn(6, 4, 5),)])


def test_a_size_used_as_a_value_is_read_at_run_time():
    """``mean`` divides by the dynamic size and ``* x.shape[0]`` multiplies by it: float
    scalars that must come from the argument, not from the stand-in size."""
    class Model(torch.nn.Module):
        def forward(self, x):
            return x - x.mean(0), torch.full((x.shape[0],), 2.0) * x.shape[0]

    model = Model()
    exported = export_to_stablehlo(model, (torch.randn(3, 4),),
                                   dynamic_shapes=({0: Dim("n")},))
    assert "stablehlo.get_dimension_size" in exported.text
    _check(model, exported, [(torch.randn(3, 4),), (torch.randn(6, 4),)])


def test_unsupported_symbolic_size_is_an_error():
    model = torch.nn.AvgPool1d(2)  # output length (n - 2) // 2 + 1: a floor division
    with pytest.raises(ExportError, match="sizes must be symbols"):
        export_to_stablehlo(model, (torch.randn(2, 3, 8),),
                            dynamic_shapes=({2: Dim("n", min=4, max=64)},))
