"""Functions whose outputs alias their inputs (or each other), and a runner comparing their
compiled results with eager PyTorch for several sizes of a dynamic or static batch dim."""
import contextlib

import torch


import frameworks.torch as oht
from frameworks.torch import backend as torch_backend


def _full_added(x):
    n = x.shape[0]
    return x + torch.full((n, 1), n), x.view(n, 2, 2)[:, 0]


def _view_after_add(x):
    n = x.shape[0]
    return x + 1, x.view(n, 2, 2)[:, 0]


def _in_place_then_view(x):
    x.add_(1)
    return x[:, 1:3]


def _arange_and_full(x):
    n = x.shape[0]
    return torch.arange(n) * 2 + x[:, 0], torch.full((n, 2), 3.0), torch.arange(1, n + 1)


def _two_aliasing_outputs(x):
    y = x * 2
    return y, y[:, 1:], y.t()


def _view_after_eager_fallback(x):
    n = x.shape[0]  # polygamma runs in eager PyTorch by design (README, Limits)
    return (torch.polygamma(1, x + 1).view(n, 2, 2)[:, 1].t(),
            x.view(n, 2, 2).transpose(1, 2)[:, 0])


# name -> a function of one (n, 4) float32 input
CASES = {
    "view_of_view_after_full": _full_added,
    "view_of_view_after_add": _view_after_add,
    "input_itself": lambda x: (x, x + 1),
    "transpose": lambda x: x.t(),
    "permute": lambda x: x.view(x.shape[0], 2, 2).permute(2, 0, 1),
    "expand": lambda x: x.unsqueeze(1).expand(x.shape[0], 3, 4),
    "expand_column": lambda x: x[:, :1].expand(x.shape[0], 4),
    "slice_with_step": lambda x: x[:, ::2],
    "slice_batch_with_step": lambda x: x[1::2],
    "narrow": lambda x: x.narrow(1, 1, 2),
    "select": lambda x: x[:, 3],
    "as_strided": lambda x: x.as_strided((x.shape[0] - 1, 2), (4, 2), 1),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "view_of_intermediate": lambda x: (x * 2).view(x.shape[0], 2, 2)[:, 1],
    "two_aliasing_outputs": _two_aliasing_outputs,
    "in_place_then_view": _in_place_then_view,
    "arange_and_full": _arange_and_full,
    "view_after_eager_fallback": _view_after_eager_fallback,
}
# cases whose dynamic batch cannot be padded (a hazard, bounded_shapes.py): a program per size
EXACT_ONLY = {"view_of_view_after_full", "slice_batch_with_step", "as_strided"}
# the batch sizes: two in one power-of-two bucket (8) and two in others (4, 16)
SIZES = (5, 7, 3, 12)


@contextlib.contextmanager
def on_backend(name: str, monkeypatch):
    """Graphs compiled within run on the PJRT backend ``name``."""
    monkeypatch.setenv("OPENHLO_TORCH_BACKEND", name)
    torch_backend.client.cache_clear()
    try:
        yield
    finally:
        torch_backend.client.cache_clear()


def assert_same_as_eager(case: str, mode: str, sizes=SIZES, make_input=None):
    """Compile ``CASES[case]`` and call it at each size: ``mode`` is ``static`` (a graph per
    size), ``bucketed`` (a dynamic batch dim, ``mark_dynamic``, padded to buckets),
    ``exact`` (the same, buckets off) or ``dynamic`` (``torch.compile(dynamic=True)``). Each output must have eager's values, shape and strides, and alias the
    input exactly where eager's does; an input changed in place must change as in eager.
    ``make_input(n)`` gives the input (default: an (n, 4) float32 tensor); the metrics are
    reset first."""
    fn = CASES[case]
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=torch_backend.openhlo_backend,
                             dynamic={"static": False, "dynamic": True}.get(mode))
    policy = "off" if mode == "exact" else "pow2"
    oht.reset_metrics()
    with oht.buckets(policy), torch.no_grad():
        for n in sizes:
            # two equal inputs of the same layout (a clone would be contiguous)
            x, x_eager = (make_input(n) if make_input else torch.arange(n * 4.0).reshape(n, 4) / 3
                          for _ in range(2))
            if mode in ("bucketed", "exact"):
                torch._dynamo.mark_dynamic(x, 0)
            got, expected = compiled(x), fn(x_eager)
            got = got if isinstance(got, tuple) else (got,)
            expected = expected if isinstance(expected, tuple) else (expected,)
            where = f"{case} ({mode}) at n={n}"
            assert len(got) == len(expected), where
            for i, (g, e) in enumerate(zip(got, expected)):
                torch.testing.assert_close(g, e, msg=lambda m: f"{where}, output {i}: {m}")
                assert g.stride() == e.stride(), \
                    f"{where}, output {i}: strides {g.stride()}, eager's {e.stride()}"
                shares = e.untyped_storage().data_ptr() == x_eager.untyped_storage().data_ptr()
                assert (g.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()) \
                    == shares, f"{where}, output {i}: aliases the input: {not shares}"
                if shares:  # the same place in the input's memory as eager's view
                    assert g.storage_offset() == e.storage_offset(), f"{where}, output {i}"
            torch.testing.assert_close(x, x_eager, msg=lambda m: f"{where}, input: {m}")
