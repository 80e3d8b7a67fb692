"""``weight-only-dot``: the quantizer's weight-only programs (after ``quant-lower``) and the
packed-int4 form frameworks/torch emits become ``openhlo.weight_only_dot`` composites whose
results on the interpreter are the original program's, bit for bit (the decomposition is
the original math); dots that are not weight-only stay as they are."""
from __future__ import annotations

import numpy as np
import pytest

from stablehlo.builder import Builder
from stablehlo.ir.core import Module
from stablehlo.ir.types import F32, IntegerType, TensorType, tensor
from stablehlo.text import print_module
from xla_core.ir_utils import clone_operation
from xla_core.passes import PassContext, Pipeline, parse_pass_list
from xla_core.quantization import quantize
from xla_core.quantization.tests.helpers import interpret, lowered
from xla_core.quantization.tests.programs import mlp, torch_int4_program
from xla_core.quantization.weight_only_dot import WEIGHT_ONLY_DOT

RNG = np.random.default_rng(11)


def _rewritten(module):
    copy = Module(clone_operation(module.op, {}))
    Pipeline("p", parse_pass_list("weight-only-dot,dce")).run(copy, PassContext())
    return copy


def _composites(module) -> list:
    return [op for f in module.functions() if f.body is not None
            for op in f.body.operations if op.name == "stablehlo.composite"
            and op.attr("name").value == WEIGHT_ONLY_DOT]


def _attrs(op) -> dict:
    return {k: v.value for k, v in op.attr("composite_attributes").items}


@pytest.mark.parametrize("mode,bits", [("weight-int8", 8), ("weight-int4", 4)])
def test_quantizer_programs_become_composites(mode, bits):
    weights = [(RNG.standard_normal((64, 32)).astype(np.float32),
                RNG.standard_normal(32).astype(np.float32)),
               (RNG.standard_normal((32, 16)).astype(np.float32),
                RNG.standard_normal(16).astype(np.float32))]
    program = lowered(quantize(mlp(weights, 3), mode, group_size=16)[0])
    x = RNG.standard_normal((3, 64)).astype(np.float32)
    rewritten = _rewritten(program)
    composites = _composites(rewritten)
    assert [_attrs(op)["bits"] for op in composites] == [bits, bits]
    if bits == 4:   # group-wise along K, the weight's rows n * K/G + g
        assert [_attrs(op)["group_size"] for op in composites] == [16, 16]
        assert [op.operands[1].type.shape for op in composites] == [(32 * 4, 16), (16 * 2, 16)]
    else:           # per channel: the [K, N] weight as the program holds it
        assert [_attrs(op) for op in composites] == [
            {"bits": 8, "group_size": 64, "weight_contracting": 0},
            {"bits": 8, "group_size": 32, "weight_contracting": 0}]
    # nothing dequantizes the weights outside the composites any more
    main_text = print_module(rewritten).split("func.func private")[0]
    assert "stablehlo.convert" not in main_text
    np.testing.assert_array_equal(interpret(rewritten, x), interpret(program, x))


def test_packed_int4_arguments_are_read_packed():
    program = torch_int4_program(outputs=24, depth=64, group=32, batch=2)
    rewritten = _rewritten(program)
    [composite] = _composites(rewritten)
    assert _attrs(composite) == {"bits": 4, "group_size": 32, "weight_contracting": 1}
    assert str(composite.operands[1].type) == "tensor<24x32xui8>"   # the packed argument
    x = RNG.standard_normal((2, 64)).astype(np.float32)
    w = RNG.integers(0, 256, (24, 32), dtype=np.uint8)
    s = RNG.uniform(0.01, 0.1, (24, 2)).astype(np.float32)
    np.testing.assert_array_equal(interpret(rewritten, x, w, s), interpret(program, x, w, s))


def test_other_dots_are_left_alone():
    b = Builder()
    with b.function("main", [tensor((2, 8), F32), tensor((8, 4), F32),
                             TensorType((8, 4), IntegerType(8)), tensor((8,), F32)]) as (
            _, (x, w, q, s)):
        plain = b.dot_general(x, w, contracting=((1,), (0,)))
        # scales along the contracting dim: not a per-output-channel dequantization
        scaled = b.multiply(b.convert(q, F32), b.broadcast_in_dim(s, (8, 4), [0]))
        b.return_(plain, b.dot_general(x, scaled, contracting=((1,), (0,))))
    assert _composites(_rewritten(b.module)) == []
