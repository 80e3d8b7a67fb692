"""A program of four fusions (loop and reduction kinds) for the buffer-assignment tests and
the memory report of `openhlo opt` (tools/tests/test_opt.py)."""

FUSIONS = """
func.func public @main(%arg0: tensor<8x4xf32>, %arg1: tensor<4xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8xf32>) {
  %x = stablehlo.negate %arg0 : tensor<8x4xf32>
  %0 = stablehlo.composite "openhlo.fusion" %x, %arg1 {composite_attributes = {kind = "loop"}, decomposition = @fused_loop_0} : (tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  %1 = stablehlo.composite "openhlo.fusion" %0 {composite_attributes = {kind = "loop"}, decomposition = @fused_loop_1} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %2 = stablehlo.composite "openhlo.fusion" %1 {composite_attributes = {kind = "reduction"}, decomposition = @fused_reduction_2} : (tensor<8x4xf32>) -> tensor<8xf32>
  %3 = stablehlo.composite "openhlo.fusion" %x {composite_attributes = {kind = "loop"}, decomposition = @fused_loop_3} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  return %1, %3, %2 : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8xf32>
}
func.func private @fused_loop_0(%p0: tensor<8x4xf32>, %p1: tensor<4xf32>) -> tensor<8x4xf32> {
  %0 = stablehlo.broadcast_in_dim %p1, dims = [1] : (tensor<4xf32>) -> tensor<8x4xf32>
  %1 = stablehlo.add %p0, %0 : tensor<8x4xf32>
  %2 = stablehlo.tanh %1 : tensor<8x4xf32>
  return %2 : tensor<8x4xf32>
}
func.func private @fused_loop_1(%p0: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %0 = stablehlo.reverse %p0, dims = [0] : tensor<8x4xf32>
  %1 = stablehlo.multiply %p0, %0 : tensor<8x4xf32>
  return %1 : tensor<8x4xf32>
}
func.func private @fused_reduction_2(%p0: tensor<8x4xf32>) -> tensor<8xf32> {
  %c = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.reduce(%p0 init: %c) applies stablehlo.add across dimensions = [1] : (tensor<8x4xf32>, tensor<f32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
func.func private @fused_loop_3(%p0: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %0 = stablehlo.exponential %p0 : tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}
"""
