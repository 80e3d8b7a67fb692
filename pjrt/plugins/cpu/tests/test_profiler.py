"""The executor's per-instruction profiler: what ran, how often, and only while profiling."""
import numpy as np

import pjrt
from pjrt.plugins.cpu.native_module import native
from pjrt.plugins.cpu.profiler import profile

PROGRAM = """
func.func @main(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %1 = stablehlo.add %0, %a : tensor<64x64xf32>
  return %1 : tensor<64x64xf32>
}
"""


def test_profile_counts_each_instruction_while_open():
    exe = pjrt.make_client("cpu", opt_level=0).compile(PROGRAM)  # op by op, unfused
    a = np.ones((64, 64), np.float32)
    with profile() as prof:
        for _ in range(3):
            exe(a, a)
    by_op = {where.rsplit("'", 2)[-2]: (calls, seconds) for where, calls, seconds in prof.rows}
    assert by_op["stablehlo.dot_general"][0] == 3
    assert by_op["stablehlo.add"][0] == 3
    assert all(seconds > 0 for _, seconds in by_op.values())
    assert "stablehlo.add" in prof.report()
    exe(a, a)  # after the block nothing is recorded
    assert native().profile_snapshot() == []


DEVICES = 8
# An all_reduce started before independent work and done after it.
ASYNC_ALL_REDUCE = """func.func @main(%x: tensor<8x2xf32>) -> (tensor<8x2xf32>, tensor<8x2xf32>) {
  %h = "openhlo.async_start"(%x) ({
  ^bb0(%a: tensor<8x2xf32>):
    %r = "stablehlo.all_reduce"(%a) ({
    ^bb0(%p: tensor<f32>, %q: tensor<f32>):
      %s = stablehlo.add %p, %q : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>}
        : (tensor<8x2xf32>) -> tensor<8x2xf32>
    stablehlo.return %r : tensor<8x2xf32>
  }) : (tensor<8x2xf32>) -> !openhlo.future<tensor<8x2xf32>>
  %y = stablehlo.multiply %x, %x : tensor<8x2xf32>
  %z = stablehlo.sine %y : tensor<8x2xf32>
  %d = "openhlo.async_done"(%h) : (!openhlo.future<tensor<8x2xf32>>) -> tensor<8x2xf32>
  return %d, %z : tensor<8x2xf32>, tensor<8x2xf32>
}"""


def test_timeline_puts_a_started_collective_on_the_communication_thread():
    # Every device: the start, the work between, the done on the executor thread, and the
    # all_reduce itself on a thread of its own, named and measured under its own key.
    import numpy as np
    import pjrt
    from pjrt.api import CompileOptions
    from pjrt.plugins.cpu.profiler import timeline, timeline_events
    exe = pjrt.make_client("cpu", num_devices=DEVICES, opt_level=0).compile(
        ASYNC_ALL_REDUCE, CompileOptions(num_replicas=DEVICES))
    args = [[np.full((8, 2), k, np.float32)] for k in range(DEVICES)]
    with timeline() as intervals:
        [[b.to_numpy() for b in out] for out in exe.execute_sharded(args)]  # waits
    events = timeline_events(exe, intervals)
    assert {e.device for e in events} == set(range(DEVICES))
    for device in range(DEVICES):
        mine = [e for e in events if e.device == device]
        communication = [e for e in mine if e.thread_name == "communication"]
        assert len(communication) == 1
        (transfer,) = communication
        assert transfer.name.endswith("'openhlo.async_start' [communication thread]")
        assert transfer.category == "collective"
        assert transfer.args["op"] == "stablehlo.all_reduce" and transfer.args["bytes"] == 64
        executor_threads = {e.thread for e in mine if e.thread_name == "executor"}
        assert len(executor_threads) == 1 and transfer.thread not in executor_threads
        assert {e.args["op"] for e in mine if e.thread_name == "executor"} == {
            "stablehlo.all_reduce", "openhlo.async_done", "stablehlo.multiply", "stablehlo.sine"}
