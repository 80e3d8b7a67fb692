"""What the quantizer's tests share: running programs, lowering, the MLIR oracle."""
from __future__ import annotations

import numpy as np
import pytest

from stablehlo.interpreter import evaluate
from stablehlo.text import print_module
from xla_core.ir_utils import clone_operation
from xla_core.passes import PassContext, Pipeline, parse_pass_list


def lowered(module):
    """A copy of ``module`` through ``quant-lower``."""
    from stablehlo.ir.core import Module
    copy = Module(clone_operation(module.op, {}))
    Pipeline("lower", parse_pass_list("quant-lower")).run(copy, PassContext())
    return copy


def interpret(module, *inputs) -> np.ndarray:
    return np.asarray(evaluate(module, list(inputs))[0])


def run_cpu(module, *inputs) -> np.ndarray:
    import pjrt
    return np.asarray(pjrt.make_client("cpu").compile(module)(*inputs)[0])


def assert_upstream_verifies(module) -> None:
    """Upstream MLIR (with the quant dialect) parses and verifies our printing."""
    pytest.importorskip("iree.compiler")
    from stablehlo.tests.mlir_oracle import mlir_verify_quantized
    problem = mlir_verify_quantized(print_module(module))
    assert problem is None, problem
