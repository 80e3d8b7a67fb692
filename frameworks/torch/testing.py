"""Checking OpenHLO against eager PyTorch: trace a function to the core-ATen graph the
backend sees, run it through a ``Plan``, compare; and the OpInfo sweep built on that (used by
frameworks/torch/tests and tools/torch_opinfo.py)."""
from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

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
    mutated = _outputs_for_input_mutations(gm)
    _, out_spec = tree_flatten(flat_fn(*tensors))  # the graph returns leaves only
    plan = Plan(gm, tensors, client(), "test")
    results, _ = tree_flatten(plan.run(tensors))
    if mutated:  # the new values of mutated inputs come last; written back as AOTAutograd does
        for position, value in zip(mutated, results[-len(mutated):]):
            tensors[position].copy_(value)
        results = results[:-len(mutated)]
    return tree_unflatten(results, out_spec), plan


def _outputs_for_input_mutations(gm: torch.fx.GraphModule) -> list:
    """Functionalization writes a mutated input back with ``copy_`` into its placeholder;
    AOTAutograd instead returns the new value and copies it outside the compiled graph. Do
    the same: each such ``copy_`` becomes an extra graph output. Returns the positions of
    the inputs written, in the order of those outputs."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    output = next(n for n in gm.graph.nodes if n.op == "output")
    mutated, values = [], []
    for node in list(gm.graph.nodes):
        if node.target is torch.ops.aten.copy_.default and node.args[0] in placeholders \
                and not node.users:
            mutated.append(placeholders.index(node.args[0]))
            values.append(node.args[1])
            gm.graph.erase_node(node)
    if mutated:
        returned = output.args[0]
        returned = list(returned) if isinstance(returned, (list, tuple)) else [returned]
        output.args = (tuple(returned + values),)
        gm.recompile()
    return mutated


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


def _clone(x):
    return x.clone() if isinstance(x, torch.Tensor) else x


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
        # eager runs on copies: an op that mutates an input (embedding's max_norm) must
        # start from the same values on both sides, and end with the same ones
        eager_args, eager_kwargs = tree_map(_clone, (args, sample.kwargs))
        try:
            expected = op(*eager_args, **eager_kwargs)
        except Exception:  # noqa: BLE001 - a sample eager itself rejects says nothing of us
            continue
        expected = (expected, eager_args, eager_kwargs)
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
                    assert_close((ours, args, sample.kwargs), expected, rtol=1e-4, atol=1e-5)
                    kind, detail = "pass", None
                except Exception as exc:  # noqa: BLE001
                    kind, detail = "fail", str(exc)[:300]
        result[kind] += 1
        if detail is not None:
            result["problems"].setdefault(kind, detail)
    return result
