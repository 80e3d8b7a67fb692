"""Fusion kinds as registered objects, and the backend hook legality asks."""
from __future__ import annotations

import pytest

import stablehlo
from stablehlo.registry import RegistryError
from xla_core.fusion import fuse_module
from xla_core.fusion.codegen_hook import CodegenHook
from xla_core.fusion.kinds import FUSION_KINDS, kind_of_fusion

SOFTMAX_ROW = """
func.func @main(%x: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %e = stablehlo.exponential %x : tensor<8x32xf32>
  %s = stablehlo.reduce(%e init: %z) applies stablehlo.add across dimensions = [1] : (tensor<8x32xf32>, tensor<f32>) -> tensor<8xf32>
  %b = stablehlo.broadcast_in_dim %s, dims = [0] : (tensor<8xf32>) -> tensor<8x32xf32>
  %d = stablehlo.divide %e, %b : tensor<8x32xf32>
  %n = stablehlo.negate %d : tensor<8x32xf32>
  return %n : tensor<8x32xf32>
}
"""


def _kinds(module) -> list[str]:
    return sorted(kind_of_fusion(op).name for op in module.walk()
                  if op.name == "stablehlo.composite")


def test_the_three_kinds_are_registered_and_read_back():
    assert FUSION_KINDS.names() == ["loop", "output", "reduction"]
    with pytest.raises(RegistryError, match="known: loop, output, reduction"):
        FUSION_KINDS.get("tile")
    module = stablehlo.parse(SOFTMAX_ROW)
    fuse_module(module)
    assert _kinds(module) == ["reduction"]
    assert not FUSION_KINDS.get("reduction").writes_in_place
    assert FUSION_KINDS.get("loop").writes_in_place


class _NoReductions(CodegenHook):
    def why_not_kind(self, kind, summary):
        return "no reduction template" if kind.name == "reduction" else None


class _NoExp(CodegenHook):
    def why_not_op(self, op):
        return "no exp" if op.name == "stablehlo.exponential" else None


def test_a_kind_the_backend_cannot_generate_is_never_formed():
    module = stablehlo.parse(SOFTMAX_ROW)
    explain = fuse_module(module, codegen=_NoReductions())
    assert "reduction" not in _kinds(module)
    assert explain.counters["refused"] >= 1


def test_an_op_the_backend_cannot_generate_joins_no_fusion():
    module = stablehlo.parse(SOFTMAX_ROW)
    fuse_module(module, codegen=_NoExp())
    fused = [op.name for f in module.functions() if f.name.startswith("fused_")
             for op in f.body.operations]
    assert fused and "stablehlo.exponential" not in fused
