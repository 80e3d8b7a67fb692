// RUN: openhlo opt %s --split-input-file --passes=reduce-scatter-combiner | filecheck %s

// Two independent sums scattered along dimension 0 over the same groups become one variadic
// reduce_scatter (XLA's form; StableHLO 1.20 has one operand).
// CHECK: %[[R:[^:]+]]:2 = "stablehlo.reduce_scatter"(%arg0, %arg1)
// CHECK: (tensor<8x3xf32>, tensor<4x2xf32>) -> (tensor<2x3xf32>, tensor<1x2xf32>)
// CHECK: return %[[R]]#0, %[[R]]#1
func.func @main(%a: tensor<8x3xf32>, %b: tensor<4x2xf32>) -> (tensor<2x3xf32>, tensor<1x2xf32>) {
  %0 = "stablehlo.reduce_scatter"(%a) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = stablehlo.add %x, %y : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }) {scatter_dimension = 0 : i64, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>}
      : (tensor<8x3xf32>) -> tensor<2x3xf32>
  %1 = "stablehlo.reduce_scatter"(%b) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = stablehlo.add %x, %y : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }) {scatter_dimension = 0 : i64, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>}
      : (tensor<4x2xf32>) -> tensor<1x2xf32>
  return %0, %1 : tensor<2x3xf32>, tensor<1x2xf32>
}

// -----

// A maximum does not merge with a sum.
// CHECK-COUNT-2: "stablehlo.reduce_scatter"
func.func @main(%a: tensor<8x3xf32>, %b: tensor<4x2xf32>) -> (tensor<2x3xf32>, tensor<1x2xf32>) {
  %0 = "stablehlo.reduce_scatter"(%a) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = stablehlo.add %x, %y : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }) {scatter_dimension = 0 : i64, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>}
      : (tensor<8x3xf32>) -> tensor<2x3xf32>
  %1 = "stablehlo.reduce_scatter"(%b) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = stablehlo.maximum %x, %y : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }) {scatter_dimension = 0 : i64, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>}
      : (tensor<4x2xf32>) -> tensor<1x2xf32>
  return %0, %1 : tensor<2x3xf32>, tensor<1x2xf32>
}
