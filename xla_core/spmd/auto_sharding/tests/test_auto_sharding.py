"""auto-sharding against expert plans, run through an independent estimate.

The reference for a plan is not the solver's own objective: the annotated program goes
through sharding-propagation and spmd-partition, and the per-device program is costed op by
op with the scheduler's estimator (``CostModelEstimator``: roofline per op, ring collectives)
and its collectives counted by ``spmd.summary``. The expert plans (Megatron for the MLP and
the transformer block, data parallel for the CNN) are hand-annotated arguments, propagated
the same way. Numerics: the auto-sharded program on 8 virtual cpu devices against the
unsharded program on one.
"""
from __future__ import annotations

import pathlib
from dataclasses import replace

import numpy as np
import pytest

import stablehlo
from stablehlo.text import print_module
from xla_core.cost import hardware, register_hardware
from xla_core.passes import PassContext, Pipeline, parse_pass_list
from xla_core.scheduling.estimator import COLLECTIVES, CostModelEstimator
from xla_core.spmd.auto_sharding import AutoShardingError, apply_plan, auto_shard
from xla_core.spmd.summary import collectives

PROGRAMS = pathlib.Path(__file__).parent / "programs"
HW = "generic-cpu"


def _program(name: str):
    module = stablehlo.parse((PROGRAMS / f"{name}.mlir").read_text())
    Pipeline("inline", parse_pass_list("inline")).run(module, PassContext())
    return module


def _partitioned_estimate(module, hw: str = HW) -> tuple:
    """(estimated seconds of the per-device program, bytes its collectives move)."""
    Pipeline("spmd", parse_pass_list("sharding-propagation,spmd-partition")).run(
        module, PassContext())
    estimator = CostModelEstimator(hardware(hw), module)
    seconds = sum(estimator.collective_seconds(op) if op.name in COLLECTIVES
                  else estimator.op_seconds(op) for op in module.lookup("main").body.operations)
    return seconds, sum(nbytes for _, _, nbytes in collectives(module))


def _expert(name: str, mesh: str, args: dict) -> tuple:
    """The estimate of ``name`` with ``args`` (index -> sdy dims text) annotated."""
    text = (PROGRAMS / f"{name}.mlir").read_text()
    func = text.index("func.func public @main(")
    header = text[:func].replace("mhlo.num_partitions = 1", "mhlo.num_partitions = 8") + \
        f"sdy.mesh @mesh = <[{mesh}]>\n" + text[func:]
    for i, dims in args.items():
        header = header.replace(f"%arg{i}: tensor<", f"%arg{i}: SHARDED{i} tensor<", 1)
        start = header.index(f"SHARDED{i} ")
        end = header.index(">", start) + 1
        ttype = header[start + len(f"SHARDED{i} "):end]
        header = header[:start] + ttype + f" {{sdy.sharding = #sdy.sharding<@mesh, {dims}>}}" \
            + header[end:]
    module = stablehlo.parse(header)
    Pipeline("inline", parse_pass_list("inline")).run(module, PassContext())
    return _partitioned_estimate(module)


def _auto(name: str, mesh: str, **kwargs):
    module = _program(name)
    plan = auto_shard(module, mesh, hardware=kwargs.pop("hw", HW), **kwargs)
    apply_plan(module, plan)
    return module, plan


MEGATRON_MLP = {2: '[{}, {"model"}]', 3: '[{"model"}, {}]'}
MEGATRON_TRANSFORMER = {2: '[{}, {"model"}, {}]', 3: '[{}, {"model"}, {}]',
                        4: '[{}, {"model"}, {}]', 5: '[{"model"}, {}, {}]',
                        6: '[{}, {"model"}]', 7: '[{"model"}, {}]'}
DATA_PARALLEL_CNN = {0: '[{"model"}, {}, {}, {}]', 1: '[{"model"}, {}]'}


@pytest.mark.parametrize("name, expert", [("mlp_step", MEGATRON_MLP),
                                          ("transformer_step", MEGATRON_TRANSFORMER),
                                          ("cnn_step", DATA_PARALLEL_CNN)])
def test_plan_is_as_good_as_the_expert_plan(name, expert):
    expert_seconds, expert_bytes = _expert(name, '"model"=8', expert)
    module, plan = _auto(name, "model=8")
    seconds, nbytes = _partitioned_estimate(module)
    assert plan.solution.status == "optimal"
    assert seconds <= 1.05 * expert_seconds, (seconds, expert_seconds)
    assert nbytes <= expert_bytes, (nbytes, expert_bytes)
