"""Sharded programs shared by the SPMD tests and the command-line tests (tools/tests)."""

# A program sharded over 4 devices whose contracting dimension is split, so the partitioner
# all-reduces (test_locations here; test_spmd_cli, test_run_multiprocess and others in tools/tests).
SHARDED_DOT_PROGRAM = """
sdy.mesh @mesh = <["x"=4]>
func.func public @main(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>},
                       %b: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>})
    -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] :
      (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %1 = stablehlo.tanh %0 : tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}
"""
