// RUN: openhlo opt %s --split-input-file --passes=all-gather-combiner | filecheck %s

// Two independent gathers along the same dimension over the same groups become one variadic
// all_gather; their element types may differ (XLA's default).
// CHECK: %[[G:[^:]+]]:2 = "stablehlo.all_gather"(%arg0, %arg1)
// CHECK-SAME: all_gather_dim = 0
// CHECK-SAME: (tensor<2x3xf32>, tensor<4xi32>) -> (tensor<8x3xf32>, tensor<16xi32>)
// CHECK: return %[[G]]#0, %[[G]]#1
func.func @main(%a: tensor<2x3xf32>, %b: tensor<4xi32>) -> (tensor<8x3xf32>, tensor<16xi32>) {
  %0 = "stablehlo.all_gather"(%a) {all_gather_dim = 0 : i64,
      replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>} : (tensor<2x3xf32>) -> tensor<8x3xf32>
  %1 = "stablehlo.all_gather"(%b) {all_gather_dim = 0 : i64,
      replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>} : (tensor<4xi32>) -> tensor<16xi32>
  return %0, %1 : tensor<8x3xf32>, tensor<16xi32>
}

// -----

// Different gather dimensions, or a gather of the other's result, stay apart.
// CHECK-COUNT-3: "stablehlo.all_gather"
func.func @main(%a: tensor<2x3xf32>) -> (tensor<8x3xf32>, tensor<2x12xf32>, tensor<32x3xf32>) {
  %0 = "stablehlo.all_gather"(%a) {all_gather_dim = 0 : i64,
      replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>} : (tensor<2x3xf32>) -> tensor<8x3xf32>
  %1 = "stablehlo.all_gather"(%a) {all_gather_dim = 1 : i64,
      replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>} : (tensor<2x3xf32>) -> tensor<2x12xf32>
  %2 = "stablehlo.all_gather"(%0) {all_gather_dim = 0 : i64,
      replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>} : (tensor<8x3xf32>) -> tensor<32x3xf32>
  return %0, %1, %2 : tensor<8x3xf32>, tensor<2x12xf32>, tensor<32x3xf32>
}
