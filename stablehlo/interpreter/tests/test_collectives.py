"""Process groups, collective math and run_parallel.

Expected values are the worked examples of the StableHLO spec (docs/spec.md,
sections "Collective ops", all_gather, all_to_all, reduce_scatter,
collective_broadcast, collective_permute) and small sums done by hand.
"""
import time

import numpy as np
import pytest

from stablehlo.errors import CheckFailure, InterpreterError, VerificationError
from stablehlo.interpreter import TOKEN, collectives, evaluate
from stablehlo.interpreter.collectives import (all_to_all_values, collective_broadcast_values,
                                               process_groups, reduce_scatter_values,
                                               strategy_for)
from stablehlo.text import parse_module
from stablehlo.verify import verify_module


def run(text, *args):
    return evaluate(parse_module(text, "t.mlir"), args)


# -- process groups (spec "Collective ops" examples) ----------------------------------

def test_cross_replica_example():
    assert process_groups("cross_replica", [[0, 1], [2, 3]], 4, 2) == [
        [(0, 0), (1, 0)], [(0, 1), (1, 1)], [(2, 0), (3, 0)], [(2, 1), (3, 1)]]


def test_cross_partition_example():
    assert process_groups("cross_partition", [[0, 1]], 4, 2) == [
        [(0, 0), (0, 1)], [(1, 0), (1, 1)], [(2, 0), (2, 1)], [(3, 0), (3, 1)]]


def test_cross_replica_and_partition_example():
    assert process_groups("cross_replica_and_partition", [[0, 1], [2, 3]], 4, 2) == [
        [(0, 0), (1, 0), (0, 1), (1, 1)], [(2, 0), (3, 0), (2, 1), (3, 1)]]


def test_flattened_ids_example():
    assert process_groups("flattened_ids", [[0, 1, 2, 3], [4, 5, 6, 7]], 4, 2) == [
        [(0, 0), (0, 1), (1, 0), (1, 1)], [(2, 0), (2, 1), (3, 0), (3, 1)]]


def test_padding_ids_and_empty_groups():
    assert process_groups("cross_replica", [[0, 1], [2, -1]], 3, 1) == [
        [(0, 0), (1, 0)], [(2, 0)]]
    assert process_groups("cross_replica", [], 3, 1) == [[(0, 0), (1, 0), (2, 0)]]


@pytest.mark.parametrize("op, channel, global_ids, expected", [
    ("stablehlo.all_reduce", 0, False, "cross_replica"),
    ("stablehlo.all_reduce", 1, False, "cross_replica_and_partition"),
    ("stablehlo.all_gather", 1, True, "flattened_ids"),
    ("stablehlo.all_to_all", 0, False, "cross_replica"),
    ("stablehlo.all_to_all", 1, False, "cross_partition"),
    ("stablehlo.collective_permute", 2, False, "cross_partition"),
])
def test_strategy(op, channel, global_ids, expected):
    assert strategy_for(op, channel, global_ids) == expected


# -- collective math (spec examples) ---------------------------------------------------

def test_all_to_all_example():
    p0 = [np.array([[1, 2, 3, 4], [5, 6, 7, 8]]), np.array([[17, 18, 19, 20], [21, 22, 23, 24]])]
    p1 = [np.array([[9, 10, 11, 12], [13, 14, 15, 16]]),
          np.array([[25, 26, 27, 28], [29, 30, 31, 32]])]
    r0 = all_to_all_values([p0, p1], 1, 0, 2, 0)
    r1 = all_to_all_values([p0, p1], 1, 0, 2, 1)
    assert r0[0].tolist() == [[1, 2], [5, 6], [9, 10], [13, 14]]
    assert r1[0].tolist() == [[3, 4], [7, 8], [11, 12], [15, 16]]
    assert r0[1].tolist() == [[17, 18], [21, 22], [25, 26], [29, 30]]
    assert r1[1].tolist() == [[19, 20], [23, 24], [27, 28], [31, 32]]


def test_reduce_scatter_example():
    p0 = [np.array([[1, 2, 3, 4], [5, 6, 7, 8]])]
    p1 = [np.array([[9, 10, 11, 12], [13, 14, 15, 16]])]
    add = lambda j, a, b: a + b  # noqa: E731
    assert reduce_scatter_values([p0, p1], 1, add, 0)[0].tolist() == [[10, 12], [18, 20]]
    assert reduce_scatter_values([p0, p1], 1, add, 1)[0].tolist() == [[14, 16], [22, 24]]


def test_collective_broadcast_sources():
    values = [[np.array([1])], [np.array([2])]]
    assert collective_broadcast_values(values, [1])[0].tolist() == [2]


# -- run_parallel programs -----------------------------------------------------------------

def test_all_reduce_with_non_trivial_body():
    # A body that is not a single op runs per element: max(a, b) * 1 -> maximum.
    r = run("""
    func.func @ar(%x: tensor<3xf32>) -> tensor<3xf32> {
      %r = "stablehlo.all_reduce"(%x) ({
        ^bb0(%a: tensor<f32>, %b: tensor<f32>):
          %one = stablehlo.constant dense<1.0> : tensor<f32>
          %m = stablehlo.maximum %a, %b : tensor<f32>
          %p = stablehlo.multiply %m, %one : tensor<f32>
          stablehlo.return %p : tensor<f32>
      }) {replica_groups = dense<[[0, 1, 2]]> : tensor<1x3xi64>} : (tensor<3xf32>) -> tensor<3xf32>
      return %r : tensor<3xf32>
    }
    func.func @main(%a: tensor<3xf32>, %b: tensor<3xf32>, %c: tensor<3xf32>)
        -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
      %r:3 = "interpreter.run_parallel"(%a, %b, %c) {programs = [[@ar], [@ar], [@ar]]}
          : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
          -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
      return %r#0, %r#1, %r#2 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
    }""", np.float32([1, 9, 2]), np.float32([5, 0, 2]), np.float32([3, 3, 8]))
    for out in r:
        assert out.tolist() == [5, 9, 8]


def test_all_gather_cross_replica_and_partition_2x2():
    outs = run("""
    func.func @g(%x: tensor<1xi64>) -> tensor<4xi64> {
      %r = "stablehlo.all_gather"(%x) {
        all_gather_dim = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>,
        channel_handle = #stablehlo.channel_handle<handle = 1, type = 0>
      } : (tensor<1xi64>) -> tensor<4xi64>
      return %r : tensor<4xi64>
    }
    func.func @main() -> (tensor<4xi64>, tensor<4xi64>, tensor<4xi64>, tensor<4xi64>) {
      %a = stablehlo.constant dense<[0]> : tensor<1xi64>
      %b = stablehlo.constant dense<[1]> : tensor<1xi64>
      %c = stablehlo.constant dense<[10]> : tensor<1xi64>
      %d = stablehlo.constant dense<[11]> : tensor<1xi64>
      %r:4 = "interpreter.run_parallel"(%a, %b, %c, %d) {programs = [[@g, @g], [@g, @g]]}
          : (tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>)
          -> (tensor<4xi64>, tensor<4xi64>, tensor<4xi64>, tensor<4xi64>)
      return %r#0, %r#1, %r#2, %r#3 : tensor<4xi64>, tensor<4xi64>, tensor<4xi64>, tensor<4xi64>
    }""")
    # Inputs are dealt (replica, partition) = (0,0), (0,1), (1,0), (1,1); the group
    # orders processes partition-major: (0,0), (1,0), (0,1), (1,1).
    for out in outs:
        assert out.tolist() == [0, 10, 1, 11]


_TWO_OPERAND_REDUCE_SCATTER = """
    func.func @rs(%x: tensor<4xi64>, %y: tensor<2x{n}xi64>) -> (tensor<2xi64>, tensor<1x{n}xi64>) {{
      %r:2 = "stablehlo.reduce_scatter"(%x, %y) ({{
        ^bb0(%a: tensor<i64>, %b: tensor<i64>):
          %s = stablehlo.add %a, %b : tensor<i64>
          stablehlo.return %s : tensor<i64>
      }}) {{scatter_dimension = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}}
          : (tensor<4xi64>, tensor<2x{n}xi64>) -> (tensor<2xi64>, tensor<1x{n}xi64>)
      return %r#0, %r#1 : tensor<2xi64>, tensor<1x{n}xi64>
    }}
    func.func @main() -> (tensor<2xi64>, tensor<1x{n}xi64>, tensor<2xi64>, tensor<1x{n}xi64>) {{
      %x0 = stablehlo.constant dense<[1, 2, 3, 4]> : tensor<4xi64>
      %x1 = stablehlo.constant dense<[10, 20, 30, 40]> : tensor<4xi64>
      %y0 = stablehlo.iota dim = 1 : tensor<2x{n}xi64>
      %y1 = stablehlo.iota dim = 0 : tensor<2x{n}xi64>
      %r:4 = "interpreter.run_parallel"(%x0, %y0, %x1, %y1) {{programs = [[@rs], [@rs]]}}
          : (tensor<4xi64>, tensor<2x{n}xi64>, tensor<4xi64>, tensor<2x{n}xi64>)
          -> (tensor<2xi64>, tensor<1x{n}xi64>, tensor<2xi64>, tensor<1x{n}xi64>)
      return %r#0, %r#1, %r#2, %r#3
          : tensor<2xi64>, tensor<1x{n}xi64>, tensor<2xi64>, tensor<1x{n}xi64>
    }}"""


def test_reduce_scatter_of_two_operands_scatters_each():
    # XLA's variadic reduce-scatter (what xla_core's reduce-scatter-combiner makes)
    outs = run(_TWO_OPERAND_REDUCE_SCATTER.format(n=3))
    assert [o.tolist() for o in outs] == [[11, 22], [[0, 1, 2]], [33, 44], [[1, 2, 3]]]


def test_reduce_scatter_checks_every_operand_against_the_group_size():
    text = _TWO_OPERAND_REDUCE_SCATTER.format(n=3).replace("tensor<2x3xi64>", "tensor<3x3xi64>")
    with pytest.raises(VerificationError, match=r"operand #1 dimension 0 has size 3, which is "
                                                r"not a multiple of the replica group size 2"):
        verify_module(parse_module(text, "t.mlir"))


def test_collective_permute_cross_replica():
    # spec example: pairs [[0, 1], [1, 2]] over 3 replicas.
    outs = run("""
    func.func @p(%x: tensor<2xi64>) -> tensor<2xi64> {
      %r = "stablehlo.collective_permute"(%x) {
        source_target_pairs = dense<[[0, 1], [1, 2]]> : tensor<2x2xi64>
      } : (tensor<2xi64>) -> tensor<2xi64>
      return %r : tensor<2xi64>
    }
    func.func @main(%a: tensor<2xi64>, %b: tensor<2xi64>, %c: tensor<2xi64>)
        -> (tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) {
      %r:3 = "interpreter.run_parallel"(%a, %b, %c) {programs = [[@p], [@p], [@p]]}
          : (tensor<2xi64>, tensor<2xi64>, tensor<2xi64>)
          -> (tensor<2xi64>, tensor<2xi64>, tensor<2xi64>)
      return %r#0, %r#1, %r#2 : tensor<2xi64>, tensor<2xi64>, tensor<2xi64>
    }""", np.int64([1, 2]), np.int64([5, 6]), np.int64([9, 10]))
    assert [o.tolist() for o in outs] == [[0, 0], [1, 2], [5, 6]]


def test_collective_broadcast_spec_example():
    outs = run("""
    func.func @b(%x: tensor<1x2xi64>) -> tensor<1x2xi64> {
      %r = "stablehlo.collective_broadcast"(%x) {
        replica_groups = dense<[[2, 1]]> : tensor<1x2xi64>
      } : (tensor<1x2xi64>) -> tensor<1x2xi64>
      return %r : tensor<1x2xi64>
    }
    func.func @main() -> (tensor<1x2xi64>, tensor<1x2xi64>, tensor<1x2xi64>, tensor<1x2xi64>) {
      %a = stablehlo.constant dense<[[1, 2]]> : tensor<1x2xi64>
      %b = stablehlo.constant dense<[[3, 4]]> : tensor<1x2xi64>
      %c = stablehlo.constant dense<[[5, 6]]> : tensor<1x2xi64>
      %d = stablehlo.constant dense<[[7, 8]]> : tensor<1x2xi64>
      %r:4 = "interpreter.run_parallel"(%a, %b, %c, %d) {programs = [[@b], [@b], [@b], [@b]]}
          : (tensor<1x2xi64>, tensor<1x2xi64>, tensor<1x2xi64>, tensor<1x2xi64>)
          -> (tensor<1x2xi64>, tensor<1x2xi64>, tensor<1x2xi64>, tensor<1x2xi64>)
      return %r#0, %r#1, %r#2, %r#3
          : tensor<1x2xi64>, tensor<1x2xi64>, tensor<1x2xi64>, tensor<1x2xi64>
    }""")
    assert [o.tolist() for o in outs] == [[[0, 0]], [[5, 6]], [[5, 6]], [[0, 0]]]


def test_replica_and_partition_ids_and_send_recv():
    outs = run("""
    func.func @send(%t: !stablehlo.token) -> (tensor<ui32>, !stablehlo.token) {
      %id = stablehlo.replica_id : tensor<ui32>
      %s = "stablehlo.send"(%id, %t) {
        channel_handle = #stablehlo.channel_handle<handle = 5, type = 2>, is_host_transfer = true
      } : (tensor<ui32>, !stablehlo.token) -> !stablehlo.token
      return %id, %s : tensor<ui32>, !stablehlo.token
    }
    func.func @recv(%t: !stablehlo.token) -> (tensor<ui32>, tensor<ui32>) {
      %v, %t2 = "stablehlo.recv"(%t) {
        channel_handle = #stablehlo.channel_handle<handle = 5, type = 3>, is_host_transfer = true
      } : (!stablehlo.token) -> (tensor<ui32>, !stablehlo.token)
      %p = stablehlo.partition_id : tensor<ui32>
      return %v, %p : tensor<ui32>, tensor<ui32>
    }
    func.func @main(%t: !stablehlo.token) -> (tensor<ui32>, tensor<ui32>, tensor<ui32>) {
      %r:4 = "interpreter.run_parallel"(%t, %t) {programs = [[@recv, @send]]}
          : (!stablehlo.token, !stablehlo.token)
          -> (tensor<ui32>, tensor<ui32>, tensor<ui32>, !stablehlo.token)
      return %r#0, %r#1, %r#2 : tensor<ui32>, tensor<ui32>, tensor<ui32>
    }""", TOKEN)
    received, recv_partition, sender_replica = outs
    assert int(received) == 0 and int(recv_partition) == 0 and int(sender_replica) == 0


def test_infeed_pops_functions_in_order():
    outs = run("""
    func.func @feed(%t: !stablehlo.token) -> (tensor<2xi64>, tensor<2xi64>) {
      %a:2 = "stablehlo.infeed"(%t) : (!stablehlo.token) -> (tensor<2xi64>, !stablehlo.token)
      %b:2 = "stablehlo.infeed"(%a#1) : (!stablehlo.token) -> (tensor<2xi64>, !stablehlo.token)
      return %a#0, %b#0 : tensor<2xi64>, tensor<2xi64>
    }
    func.func @q0() -> tensor<2xi64> {
      %c = stablehlo.constant dense<[1, 2]> : tensor<2xi64>
      return %c : tensor<2xi64>
    }
    func.func @q1() -> tensor<2xi64> {
      %c = stablehlo.constant dense<[3, 4]> : tensor<2xi64>
      return %c : tensor<2xi64>
    }
    func.func @main(%t: !stablehlo.token) -> (tensor<2xi64>, tensor<2xi64>) {
      %r:2 = "interpreter.run_parallel"(%t) {infeed = [@q0, @q1], programs = [[@feed]]}
          : (!stablehlo.token) -> (tensor<2xi64>, tensor<2xi64>)
      return %r#0, %r#1 : tensor<2xi64>, tensor<2xi64>
    }""", TOKEN)
    assert [o.tolist() for o in outs] == [[1, 2], [3, 4]]


MISSING_PARTNER = """
func.func @lonely(%x: tensor<i64>) -> tensor<i64> {
  %r = "stablehlo.all_reduce"(%x) ({
    ^bb0(%a: tensor<i64>, %b: tensor<i64>):
      %s = stablehlo.add %a, %b : tensor<i64>
      stablehlo.return %s : tensor<i64>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<i64>) -> tensor<i64>
  return %r : tensor<i64>
}
func.func @idle(%x: tensor<i64>) -> tensor<i64> {
  return %x : tensor<i64>
}
func.func @main(%x: tensor<i64>) -> (tensor<i64>, tensor<i64>) {
  %r:2 = "interpreter.run_parallel"(%x, %x) {programs = [[@lonely], [@idle]]}
      : (tensor<i64>, tensor<i64>) -> (tensor<i64>, tensor<i64>)
  return %r#0, %r#1 : tensor<i64>, tensor<i64>
}
"""


def test_rendezvous_times_out_with_clear_error(monkeypatch):
    monkeypatch.setenv("OPENHLO_COLLECTIVE_TIMEOUT_S", "0.5")
    start = time.monotonic()
    with pytest.raises(InterpreterError, match=r"rendezvous of stablehlo.all_reduce .* timed "
                                               r"out after 0.5 s"):
        run(MISSING_PARTNER, np.int64(1))
    assert time.monotonic() - start < 10


def test_failing_process_releases_the_others():
    # Replica 1 fails a check before the all_reduce that replica 0 waits in.
    text = MISSING_PARTNER.replace(
        "func.func @idle(%x: tensor<i64>) -> tensor<i64> {\n",
        "func.func @idle(%x: tensor<i64>) -> tensor<i64> {\n"
        "  check.expect_eq_const %x, dense<99> : tensor<i64>\n")
    start = time.monotonic()
    with pytest.raises(CheckFailure, match="expected 99"):
        run(text, np.int64(1))
    assert time.monotonic() - start < 10


def test_run_parallel_input_count_is_checked():
    with pytest.raises(InterpreterError, match=r"take 2 inputs in all, but run_parallel has 1"):
        run("""
        func.func @f(%x: tensor<i64>) -> tensor<i64> {
          return %x : tensor<i64>
        }
        func.func @main(%x: tensor<i64>) {
          %r:2 = "interpreter.run_parallel"(%x) {programs = [[@f], [@f]]}
              : (tensor<i64>) -> (tensor<i64>, tensor<i64>)
          return
        }""", np.int64(1))


def test_group_outside_the_grid_fails_at_once():
    start = time.monotonic()
    with pytest.raises(InterpreterError, match=r"names process \(1, 0\), but the grid has 1 "
                                               r"replica\(s\) x 1 partition\(s\)"):
        run(MISSING_PARTNER.split("func.func @idle")[0].replace("@lonely", "@main"),
            np.int64(1))
    assert time.monotonic() - start < 5
