"""The ``fuse-attention`` pass: every softmax that ends an attention (fuse_attention.py)
becomes one ``openhlo.attention``, and with it the backward JAX's autodiff wrote for it
(fuse_attention_grad.py) one ``openhlo.attention_grad``; the old ops are left for ``dce``."""
from __future__ import annotations

from dataclasses import dataclass

from stablehlo.ir.core import Block, Module, Operation

from xla_core.passes.base import Pass, PassContext
from xla_core.passes.fuse_attention import match_forward, rewrite_forward, static, users_of
from xla_core.passes.fuse_attention_grad import match_grad, rewrite_grad


@dataclass(frozen=True)
class FuseAttentionPass(Pass):
    name = "fuse-attention"

    def run(self, module: Module, ctx: PassContext) -> bool:
        changed = False
        # a composite's decomposition is its meaning: never rewritten into itself
        decompositions = {op.attr("decomposition").name for op in module.walk()
                          if op.name == "stablehlo.composite"}
        for func in list(module.functions()):
            if func.body is None or func.name in decompositions:
                continue
            changed |= _fuse_block(module, func.op, func.body)
        return changed


def _fuse_block(module: Module, func_op: Operation, block: Block) -> bool:
    changed = False
    users = users_of(block)
    for op in list(block.operations):
        if op.name != "stablehlo.divide":
            continue
        grad = match_grad(op, users)
        if grad is not None:
            rewrite_grad(module, func_op, block, grad)
        else:
            match = match_forward(op, users)
            if match is None or not static(match):
                continue
            rewrite_forward(module, func_op, block, match)
        users = users_of(block)  # the rewrite added readers of q, k, v, bias and mask
        changed = True
    return changed
