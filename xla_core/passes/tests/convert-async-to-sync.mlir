// RUN: openhlo opt %s --split-input-file --passes=convert-async-to-sync | filecheck %s

// A pair with nothing between its start and its done is the collective again.
// CHECK-NOT: openhlo.async
// CHECK: %[[R:[^ ]+]] = "stablehlo.all_reduce"(%arg0)
// CHECK: stablehlo.multiply %[[R]], %[[R]]
func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %h = "openhlo.async_start"(%a) ({
    ^bb0(%v: tensor<4xf32>):
      %r = "stablehlo.all_reduce"(%v) ({
        ^bb0(%x: tensor<f32>, %y: tensor<f32>):
          %s = stablehlo.add %x, %y : tensor<f32>
          stablehlo.return %s : tensor<f32>
      }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
      stablehlo.return %r : tensor<4xf32>
  }) : (tensor<4xf32>) -> !openhlo.future<tensor<4xf32>>
  %d = "openhlo.async_done"(%h) : (!openhlo.future<tensor<4xf32>>) -> tensor<4xf32>
  %m = stablehlo.multiply %d, %d : tensor<4xf32>
  return %m : tensor<4xf32>
}

// -----

// Work between them keeps the pair.
// CHECK: "openhlo.async_start"
// CHECK: stablehlo.multiply %arg1, %arg1
// CHECK: "openhlo.async_done"
func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %h = "openhlo.async_start"(%a) ({
    ^bb0(%v: tensor<4xf32>):
      %r = "stablehlo.all_reduce"(%v) ({
        ^bb0(%x: tensor<f32>, %y: tensor<f32>):
          %s = stablehlo.add %x, %y : tensor<f32>
          stablehlo.return %s : tensor<f32>
      }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
      stablehlo.return %r : tensor<4xf32>
  }) : (tensor<4xf32>) -> !openhlo.future<tensor<4xf32>>
  %m = stablehlo.multiply %b, %b : tensor<4xf32>
  %d = "openhlo.async_done"(%h) : (!openhlo.future<tensor<4xf32>>) -> tensor<4xf32>
  return %d, %m : tensor<4xf32>, tensor<4xf32>
}
