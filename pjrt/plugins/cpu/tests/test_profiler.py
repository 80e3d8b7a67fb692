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
