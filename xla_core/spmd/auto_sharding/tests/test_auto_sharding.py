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


def _run_sharded(module, inputs) -> list:
    import pjrt
    client = pjrt.make_client("cpu", num_devices=8)
    exe = client.compile(module, pjrt.CompileOptions(num_partitions=8))
    return [np.asarray(r) for r in exe.execute_global(*inputs)]


def _run_unsharded(text: str, inputs) -> list:
    import pjrt
    return [np.asarray(r) for r in pjrt.make_client("cpu").compile(text)(*inputs)]


def _inputs(module, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [0.1 * rng.standard_normal(t.shape).astype(np.float32)
            for t in module.lookup("main").type.inputs]


def _assert_close(got: list, want: list) -> None:
    """Equal up to float rounding: partial sums are added in another order on 8 devices."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        scale = float(np.max(np.abs(w))) if w.size else 1.0
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * max(scale, 1.0))


@pytest.mark.parametrize("name, mesh", [("mlp_step", "model=8"),
                                        ("transformer_step", "x=4,y=2"),
                                        ("cnn_step", "model=8")])
def test_auto_sharded_program_computes_the_unsharded_results(name, mesh):
    text = (PROGRAMS / f"{name}.mlir").read_text()
    module, _ = _auto(name, mesh)
    inputs = _inputs(module)
    _assert_close(_run_sharded(module, inputs), _run_unsharded(text, inputs))


def test_two_dimensional_mesh_is_as_good_as_megatron_on_it():
    # Megatron on x=4,y=2: the layers split over both axes
    both = '{"x", "y"}'
    expert = {2: f"[{{}}, {both}]", 3: f"[{both}, {{}}]"}
    expert_seconds, expert_bytes = _expert("mlp_step", '"x"=4, "y"=2', expert)
    module, plan = _auto("mlp_step", "x=4,y=2")
    seconds, nbytes = _partitioned_estimate(module)
    assert seconds <= 1.05 * expert_seconds and nbytes <= expert_bytes


# A data-parallel SGD step: the batch is annotated split (kept as the user's), the weight is
# free. Without a limit it stays whole (its gradient all-reduced); a tight limit shards it.
SGD_STEP = """
sdy.mesh @mesh = <["model"=8]>
func.func public @main(
    %x: tensor<2048x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>},
    %w: tensor<32x256xf32>) -> (tensor<f32>, tensor<32x256xf32>) {
  %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] :
      (tensor<2048x32xf32>, tensor<32x256xf32>) -> tensor<2048x256xf32>
  %sq = stablehlo.multiply %y, %y : tensor<2048x256xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %loss = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [0, 1] :
      (tensor<2048x256xf32>, tensor<f32>) -> tensor<f32>
  %two = stablehlo.constant dense<2.0> : tensor<f32>
  %twos = stablehlo.broadcast_in_dim %two, dims = [] : (tensor<f32>) -> tensor<2048x256xf32>
  %dy = stablehlo.multiply %twos, %y : tensor<2048x256xf32>
  %dw = stablehlo.dot_general %x, %dy, contracting_dims = [0] x [0] :
      (tensor<2048x32xf32>, tensor<2048x256xf32>) -> tensor<32x256xf32>
  %lr = stablehlo.constant dense<0.01> : tensor<f32>
  %lrs = stablehlo.broadcast_in_dim %lr, dims = [] : (tensor<f32>) -> tensor<32x256xf32>
  %step = stablehlo.multiply %lrs, %dw : tensor<32x256xf32>
  %new = stablehlo.subtract %w, %step : tensor<32x256xf32>
  return %loss, %new : tensor<f32>, tensor<32x256xf32>
}
"""


def test_tight_memory_limit_shards_the_parameter():
    free = auto_shard(stablehlo.parse(SGD_STEP), hardware=HW)
    assert free.arguments[1] == ((), ())  # data parallel: the weight whole on every device
    limit = free.peak_memory_bytes - 16 * 1024
    module = stablehlo.parse(SGD_STEP)
    plan = auto_shard(module, memory_limit=int(limit), hardware=HW)
    assert any(plan.arguments[1]), plan.arguments  # FSDP-like: the weight split
    assert plan.peak_memory_bytes <= limit
    assert plan.step_seconds > free.step_seconds  # it pays for the gathers
    apply_plan(module, plan)
    inputs = _inputs(module)
    _assert_close(_run_sharded(module, inputs), _run_unsharded(SGD_STEP, inputs))


def test_impossible_memory_limit_is_a_clear_error():
    with pytest.raises(AutoShardingError, match="memory limit 1.00 KiB per device is below"):
        auto_shard(stablehlo.parse(SGD_STEP), memory_limit="1KiB", hardware=HW)


def test_same_plan_on_every_run():
    plans = [_auto("transformer_step", "x=4,y=2")[1] for _ in range(5)]
    first = plans[0]
    for plan in plans[1:]:
        assert plan.arguments == first.arguments and plan.layouts() == first.layouts()
        assert [c.ins for c in plan.choices] == [c.ins for c in first.choices]


def test_ten_times_slower_collectives_mean_less_communication():
    # Links with a long latency (100 us): the transformer step's MLP still pays for its
    # Megatron all-reduce; with a tenth of the bandwidth, computing it whole is cheaper.
    far = replace(hardware(HW), name="test-far-links", collective_latency=100e-6)
    slow = replace(far, name="test-far-slow-links",
                   collective_bandwidth=far.collective_bandwidth / 10)
    for description in (far, slow):
        register_hardware(description.name, description, override=True)
    fast_module, fast = _auto("transformer_step", "model=8", hw=far.name)
    slow_module, slow_plan = _auto("transformer_step", "model=8", hw=slow.name)
    _, fast_bytes = _partitioned_estimate(fast_module)
    _, slow_bytes = _partitioned_estimate(slow_module)
    assert fast_bytes > 0 and slow_plan.arguments != fast.arguments
    assert slow_bytes < fast_bytes
    assert slow_plan.communication_s + slow_plan.resharding_s < \
        fast.communication_s + fast.resharding_s


def test_time_limit_gives_the_greedy_plan_and_says_so(caplog):
    with caplog.at_level("WARNING", logger="openhlo.spmd"):
        plans = [_auto("transformer_step", "x=4,y=2", time_limit_s=1e-6)[1] for _ in range(2)]
    assert all(p.solution.fallback and p.solution.status == "time limit: greedy fallback"
               for p in plans)
    assert "auto-sharding: time limit: greedy fallback" in caplog.text
    assert plans[0].layouts() == plans[1].layouts()
    assert "the plan is the greedy fallback's" in plans[0].explain()[-1]


def test_program_with_a_single_choice_everywhere_has_the_trivial_plan():
    # scalars can only be replicated: no variables and no rows for the solver (this crashed
    # building an empty constraint matrix)
    module = stablehlo.parse("""
func.func public @main(%a: tensor<f32>) -> tensor<f32> {
  %b = stablehlo.negate %a : tensor<f32>
  return %b : tensor<f32>
}
""")
    plan = auto_shard(module, "model=8", hardware=HW)
    assert plan.solution.status == "optimal" and plan.solution.variables == 0
    assert plan.arguments == ((),) and plan.results == ((),)
