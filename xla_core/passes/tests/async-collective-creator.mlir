// RUN: openhlo opt %s --split-input-file --passes=async-collective-creator | filecheck %s

// The all_reduce becomes a start at its place, wrapping it, and a done just before its first
// reader; the multiply, which does not read it, runs between them.
// CHECK: %[[H:[^ ]+]] = "openhlo.async_start"(%arg0)
// CHECK: "stablehlo.all_reduce"
// CHECK: -> !openhlo.future<tensor<4xf32>>
// CHECK-NEXT: %[[M:[^ ]+]] = stablehlo.multiply %arg1, %arg1
// CHECK-NEXT: %[[D:[^ ]+]] = "openhlo.async_done"(%[[H]])
// CHECK-NEXT: stablehlo.add %[[D]], %[[M]]
func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "stablehlo.all_reduce"(%a) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = stablehlo.add %x, %y : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = stablehlo.multiply %b, %b : tensor<4xf32>
  %2 = stablehlo.add %0, %1 : tensor<4xf32>
  return %2, %1 : tensor<4xf32>, tensor<4xf32>
}
