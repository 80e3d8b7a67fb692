"""Checking OpenHLO against eager PyTorch: trace a function to the core-ATen graph the
backend sees, run it through a ``Plan``, compare; and the OpInfo sweep built on that (used by
frameworks/torch/tests and tools/torch_opinfo.py)."""
from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils._pytree import tree_flatten, tree_unflatten

from frameworks.torch.backend import client, decompositions
from frameworks.torch.lowering import op_name
from frameworks.torch.runner import Plan


def trace_and_run(fn, *args, **kwargs):
    """Trace ``fn(*args, **kwargs)`` to a core-ATen graph the way the backend sees it
    (FakeTensor metadata, our decomposition table), run it through a ``Plan`` and return
    ``(our outputs as fn's structure, the plan)``."""
    leaves, spec = tree_flatten((args, kwargs))
    tensor_pos = [i for i, a in enumerate(leaves) if isinstance(a, torch.Tensor)]

    def flat_fn(*tensors):
        filled = list(leaves)
        for i, t in zip(tensor_pos, tensors):
            filled[i] = t
        a, k = tree_unflatten(filled, spec)
        return fn(*a, **k)

    tensors = [leaves[i] for i in tensor_pos]
    # functionalized, as AOTAutograd gives the backend: no in-place ops
    functional = torch.func.functionalize(flat_fn, remove="mutations")
    gm = make_fx(functional, decomposition_table=decompositions(), tracing_mode="fake",
                 _allow_non_fake_inputs=True)(*tensors)  # closures become graph constants
    _, out_spec = tree_flatten(flat_fn(*tensors))  # the graph returns leaves only
    plan = Plan(gm, tensors, client(), "test")
    results, _ = tree_flatten(plan.run(tensors))
    return tree_unflatten(results, out_spec), plan


def fallback_ops(plan) -> dict:
    """``{op name: reason}`` of the nodes a plan runs in eager PyTorch."""
    return {op_name(n): reason for n, reason in plan.eager.items()}


def assert_close(ours, eager, rtol=1e-4, atol=1e-5):
    """Every tensor of ``ours`` matches ``eager`` (NaNs in the same places); other leaves
    are equal."""
    ours_leaves, _ = tree_flatten(ours)
    eager_leaves, _ = tree_flatten(eager)
    assert len(ours_leaves) == len(eager_leaves)
    for o, e in zip(ours_leaves, eager_leaves):
        if isinstance(e, torch.Tensor):
            torch.testing.assert_close(o, e, rtol=rtol, atol=atol, equal_nan=True)
        else:
            assert o == e


def check_opinfo(opinfo, max_samples: int | None = None, dtype=torch.float32) -> dict:
    """Run ``opinfo``'s ``dtype`` samples through OpenHLO. Returns counts
    ``{"pass", "fail", "fallback", "error"}`` and the first problem of each kind."""
    result = {"pass": 0, "fail": 0, "fallback": 0, "error": 0, "problems": {}}
    if dtype not in opinfo.supported_dtypes("cpu"):
        return result
    samples = opinfo.sample_inputs("cpu", dtype, requires_grad=False)
    for i, sample in enumerate(samples):
        if max_samples is not None and i >= max_samples:
            break
        op = opinfo.op
        args = (sample.input, *sample.args)
        try:
            expected = op(*args, **sample.kwargs)
        except Exception:  # noqa: BLE001 - a sample eager itself rejects says nothing of us
            continue
        try:
            ours, plan = trace_and_run(op, *args, **sample.kwargs)
        except Exception as exc:  # noqa: BLE001 - tracing problems count as errors
            kind, detail = "error", f"{type(exc).__name__}: {exc}"[:300]
        else:
            fallbacks = fallback_ops(plan)
            if fallbacks:
                kind, detail = "fallback", str(fallbacks)[:300]
            else:
                try:
                    assert_close(ours, expected, rtol=1e-4, atol=1e-5)
                    kind, detail = "pass", None
                except Exception as exc:  # noqa: BLE001
                    kind, detail = "fail", str(exc)[:300]
        result[kind] += 1
        if detail is not None:
            result["problems"].setdefault(kind, detail)
    return result
