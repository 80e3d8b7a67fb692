"""Outputs that are views of a compiled graph's inputs, of its intermediates or of each other
(output_layout.py, Note [Output layouts]): each has eager's values, shape and strides, and
aliases the input where eager's does, for a static batch and a dynamic one padded to buckets
or compiled per size, on the cpu backend and the interpreter. Before the fix, every view
sized by the dynamic dim (``x.view(n, 2, 2)[:, 0]``, a permute, an expand, an as_strided)
came back reading the wrong elements of the input."""
import pytest
import torch

import frameworks.torch as oht
from frameworks.torch.backend import openhlo_backend
from frameworks.torch.tests.view_outputs_support import (CASES, EXACT_ONLY,
                                                         assert_same_as_eager, on_backend)

BACKENDS = ("cpu", "interpreter")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_dynamic_batch_padded_to_buckets(case, backend, monkeypatch):
    with on_backend(backend, monkeypatch):
        assert_same_as_eager(case, "bucketed")
    report = oht.metrics_report()
    if case in EXACT_ONLY:  # a hazard: each size compiled exactly
        assert "bucketed calls: 0" in report and "compiled per size: inference_" in report
    else:  # sizes 5, 7, 3, 12 in buckets 8, 4, 16
        assert "bucketed calls: 4" in report and "bucket hits: 1" in report


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_dynamic_batch_compiled_per_size(case, backend, monkeypatch):
    with on_backend(backend, monkeypatch):
        assert_same_as_eager(case, "exact")
    assert "bucketed calls" not in oht.metrics_report()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_static_batch(case, backend, monkeypatch):
    with on_backend(backend, monkeypatch):
        assert_same_as_eager(case, "static", sizes=(5,))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ["view_of_view_after_full", "view_of_view_after_add"])
def test_compiled_with_dynamic_true(case, backend, monkeypatch):
    with on_backend(backend, monkeypatch):
        assert_same_as_eager(case, "dynamic")


@pytest.mark.parametrize("mode", ["bucketed", "exact"])
def test_input_that_is_itself_a_strided_view(mode, monkeypatch):
    """Columns 2..5 of a wider tensor: row stride 7, storage offset 2."""
    def make_input(n):
        return (torch.arange(n * 7.0).reshape(n, 7) / 3)[:, 2:6]
    with on_backend("cpu", monkeypatch):
        for case in ("view_of_view_after_add", "transpose", "select", "in_place_then_view"):
            assert_same_as_eager(case, mode, make_input=make_input)


def test_view_of_an_input_that_requires_grad():
    """The forward returns the view (AOTAutograd rebuilds it from the input, with the
    gradient of a view); the input's gradient equals eager's."""
    def fn(x):
        n = x.shape[0]
        return x.view(n, 2, 2)[:, 0], (x * 2).sum()
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=openhlo_backend)
    for n in (5, 6, 12):
        x = torch.randn(n, 4, requires_grad=True)
        x_eager = x.detach().clone().requires_grad_()
        torch._dynamo.mark_dynamic(x, 0)
        (view, total), (view_eager, total_eager) = compiled(x), fn(x_eager)
        torch.testing.assert_close(view, view_eager)
        assert view.stride() == view_eager.stride()
        weights = torch.arange(float(view.numel())).view(n, 2)
        ((view * weights).sum() + total).backward()
        ((view_eager * weights).sum() + total_eager).backward()
        torch.testing.assert_close(x.grad, x_eager.grad)
