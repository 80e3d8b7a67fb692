"""inplace_pairs, buffer assignment invariants, the report and ``openhlo opt --memory-report``."""
from __future__ import annotations

import pytest

import stablehlo
from xla_core.buffers import BuffersError, assign_buffers, inplace_pairs
from xla_core.buffers.tests.fused_programs import FUSIONS
from xla_core.buffers.tests.jax_programs import gpt_block_train_step, mlp_train_step
from xla_core.buffers.tests.random_dags import random_program
from xla_core.passes import PassContext, Pipeline, parse_pass_list



def _ops(m):
    return {op.attributes["decomposition"].name if op.name == "stablehlo.composite" else op.name:
            op for op in m.lookup("main").body.operations}


def test_inplace_pairs_of_fusions():
    ops = _ops(stablehlo.parse(FUSIONS))
    # p0 is read only by elementwise ops at its own shape; p1 is broadcast: never.
    assert inplace_pairs(ops["fused_loop_0"]) == [(0, 0)]
    # reverse reads element i of p0 for another output element.
    assert inplace_pairs(ops["fused_loop_1"]) == []
    # only loop fusions write in place.
    assert inplace_pairs(ops["fused_reduction_2"]) == []


ELEMENTWISE = """
func.func public @main(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>, %p: tensor<4x4xi1>) -> (tensor<4x4xi1>, tensor<4x4xi32>, tensor<4x4xf64>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %0 = stablehlo.compare GT, %a, %b : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xi1>
  %1 = stablehlo.convert %a : (tensor<4x4xf32>) -> tensor<4x4xi32>
  %2 = stablehlo.convert %a : (tensor<4x4xf32>) -> tensor<4x4xf64>
  %3 = stablehlo.select %p, %a, %b : tensor<4x4xi1>, tensor<4x4xf32>
  %4 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %5 = stablehlo.add %a, %b : tensor<4x4xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<4x4xi1>, tensor<4x4xi32>, tensor<4x4xf64>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}
"""


def test_inplace_pairs_of_elementwise_ops():
    ops = list(stablehlo.parse(ELEMENTWISE).lookup("main").body.operations)
    pairs = [inplace_pairs(op) for op in ops[:-1]]
    assert pairs == [[], [(0, 0)], [], [(0, 1), (0, 2)], [], [(0, 0), (0, 1)]]


def check_assignment(a, func) -> None:
    """Invariants every assignment must keep, checked from its slots alone."""
    position = {id(op): k for k, op in enumerate(a.schedule)}
    heap = [(s.interval, s.offset, s.size, s.buffer, v) for v, s in a.slots.items()
            if s.parameter is None and s.size > 0]
    heap += [(s.interval, s.offset, s.size, ("scratch", k), None) for k, s in a.scratch.items()]
    for i, (iv1, off1, size1, b1, _) in enumerate(heap):
        assert off1 + size1 <= a.heap_bytes
        for iv2, off2, size2, b2, _ in heap[i + 1:]:
            if b1 == b2:
                continue
            overlap_in_time = iv1[0] <= iv2[1] and iv2[0] <= iv1[1]
            overlap_in_space = off1 < off2 + size2 and off2 < off1 + size1
            assert not (overlap_in_time and overlap_in_space), (iv1, off1, iv2, off2)
    args = set(func.body.arguments)
    for result, operand in a.inplace:
        op = result.owner
        k = position[id(op)]
        assert any(r == result.index and op.operands[o] is operand
                   for r, o in inplace_pairs(op))
        if operand in args:
            assert a.slots[result].parameter == func.body.arguments.index(operand)
            continue
        # The operand dies here and is not a result: nobody reads it after the write.
        assert a.slots[operand].interval[1] == k
        assert a.slots[operand].buffer == a.slots[result].buffer
        assert not any(operand is v for v in func.body.operations[-1].operands)
    assert a.heap_lower_bound <= a.heap_bytes
    assert a.peak_bytes == a.argument_bytes + a.heap_bytes


@pytest.mark.parametrize("seed", range(20))
def test_random_programs_get_a_consistent_assignment(seed):
    m = stablehlo.parse(random_program(seed, num_ops=30))
    func = m.lookup("main")
    check_assignment(assign_buffers(func), func)


def test_fusions_write_in_place_only_where_legal():
    m = stablehlo.parse(FUSIONS)
    func = m.lookup("main")
    a = assign_buffers(func)
    check_assignment(a, func)
    by_name = {r.owner.attributes["decomposition"].name if r.owner.name == "stablehlo.composite"
               else r.owner.name for r, _ in a.inplace}
    # %x dies at fused_loop_3 (its last reader), not at fused_loop_0; %0 dies at fused_loop_1
    # whose pairs are empty; negate's operand is a parameter. So only fused_loop_3 reuses.
    assert by_name == {"fused_loop_3"}


def test_donated_parameters_may_be_written_in_place():
    text = """
func.func public @main(%arg0: tensor<256xf32> {jax.buffer_donor = true}, %arg1: tensor<256xf32>) -> tensor<256xf32> {
  %0 = stablehlo.exponential %arg0 : tensor<256xf32>
  %1 = stablehlo.exponential %arg1 : tensor<256xf32>
  %2 = stablehlo.add %0, %1 : tensor<256xf32>
  return %2 : tensor<256xf32>
}"""
    func = stablehlo.parse(text).lookup("main")
    a = assign_buffers(func)
    check_assignment(a, func)
    first, second, total = (op.results[0] for op in func.body.operations[:3])
    assert a.slots[first].parameter == 0       # donated: exp writes over %arg0
    assert a.slots[second].parameter is None   # not donated: a heap buffer
    assert a.slots[total].buffer == a.slots[first].buffer
    assert a.heap_bytes == 1024                # only exp(%arg1) lives in the heap


@pytest.mark.parametrize("program", [mlp_train_step, gpt_block_train_step],
                         ids=["mlp", "gpt_block"])
def test_training_steps_reuse_memory(program):
    text, _ = program()
    m = stablehlo.parse(text)
    Pipeline("t", parse_pass_list("inline,dce,memory-schedule")).run(m, PassContext())
    func = m.lookup("main")
    a = assign_buffers(func)
    check_assignment(a, func)
    assert a.inplace
    assert a.peak_bytes < a.intermediate_bytes
    assert a.argument_bytes == sum(4 * arg.type.num_elements for arg in func.body.arguments)


def test_schedules_must_be_legal():
    func = stablehlo.parse(ELEMENTWISE).lookup("main")
    ops = list(func.body.operations)
    a = assign_buffers(func, schedule=ops[::-1][1:] + ops[-1:])
    assert [op.name for op in a.schedule] == [op.name for op in ops[::-1][1:] + ops[-1:]]
    with pytest.raises(BuffersError, match="terminator not last"):
        assign_buffers(func, schedule=ops[::-1])
    dependent = stablehlo.parse(random_program(1, num_ops=6)).lookup("main")
    ops = list(dependent.body.operations)
    with pytest.raises(BuffersError, match="scheduled before"):
        assign_buffers(dependent, schedule=ops[:-1][::-1] + ops[-1:])


def test_inplace_pairs_takes_the_module_explicitly_too():
    m = stablehlo.parse(FUSIONS)
    fusion = _ops(m)["fused_loop_0"]
    detached = stablehlo.parse(FUSIONS)  # same functions, found through the argument
    fusion.parent.operations.remove(fusion)
    fusion.parent = None
    assert inplace_pairs(fusion, detached) == [(0, 0)]
    with pytest.raises(BuffersError, match="decomposition not found"):
        inplace_pairs(fusion)
