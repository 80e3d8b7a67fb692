"""``openhlo::sharding_constraint``: a torch op that pins a value's layout inside a traced
program, lowered to ``sdy.sharding_constraint`` on the module's ``@mesh`` (sharding.py's
``annotate`` adds it).

    y = torch.ops.openhlo.sharding_constraint(x, "", "fsdp,")   # x gathered whole here

``dims`` spells the layout of the result, one entry per dimension separated by commas, each
entry the mesh axes splitting that dimension joined by ``+`` (empty: whole), e.g. ``"fsdp,"``
for a matrix split on rows. ``grad_dims`` is the layout its gradient gets: the backward of a
constraint is the constraint of the gradient, so gathering a parameter (``dims`` whole,
``grad_dims`` the parameter's layout) makes the partitioner gather it where it is used and
reduce-scatter its gradient (fsdp.py). Eagerly the op is the identity (a copy).
"""
from __future__ import annotations

import torch

from stablehlo.ir.sharding import ShardingAttr, TensorSharding

from frameworks.torch.lowering.registry import Unsupported, lowers


def spell_dims(dims: tuple) -> str:
    """``(("fsdp",), ())`` -> ``"fsdp,"``."""
    return ",".join("+".join(axes) for axes in dims)


def parse_dims(text: str, rank: int) -> tuple:
    """The inverse of ``spell_dims`` for a value of ``rank`` dimensions."""
    entries = text.split(",") if rank else []
    if len(entries) != rank:
        raise Unsupported(f"sharding constraint {text!r} has {len(entries)} entries for a "
                          f"value of rank {rank}")
    return tuple(tuple(a for a in entry.split("+") if a) for entry in entries)


@torch.library.custom_op("openhlo::sharding_constraint", mutates_args=())
def sharding_constraint(x: torch.Tensor, dims: str, grad_dims: str) -> torch.Tensor:
    return x.clone()


@sharding_constraint.register_fake
def _fake(x, dims, grad_dims):
    return torch.empty_like(x)


def _setup(ctx, inputs, output) -> None:
    _, ctx.dims, ctx.grad_dims = inputs


def _backward(ctx, grad):
    return sharding_constraint(grad, ctx.grad_dims, ctx.dims), None, None


sharding_constraint.register_autograd(_backward, setup_context=_setup)


@lowers(torch.ops.openhlo.sharding_constraint.default)
def _constraint(ctx, x, dims, grad_dims):
    spec = TensorSharding("mesh", parse_dims(dims, len(x.type.shape)))
    return ctx.b.op("sdy.sharding_constraint", [x], [x.type],
                    {"sharding": ShardingAttr.of(spec)}).results[0]
