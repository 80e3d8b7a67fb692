// RUN: openhlo opt %s --split-input-file --passes=all-reduce-combiner | filecheck %s

// Two independent sums over the same groups become one all_reduce with both operands, at the
// place of the second; the multiply that read the first moves after it. The third sum reads
// the multiply (so the first sum): it stays on its own.
// CHECK: %[[C:[^:]+]]:2 = "stablehlo.all_reduce"(%arg0, %arg1)
// CHECK: }) : (tensor<4xf32>, tensor<2xf32>) -> (tensor<4xf32>, tensor<2xf32>)
// CHECK-NEXT: %[[M:[^ ]+]] = stablehlo.multiply %[[C]]#0, %[[C]]#0
// CHECK-NEXT: "stablehlo.all_reduce"(%[[M]])
// CHECK: return %{{[^ ]+}}, %[[C]]#1
func.func @main(%a: tensor<4xf32>, %b: tensor<2xf32>) -> (tensor<4xf32>, tensor<2xf32>) {
  %0 = "stablehlo.all_reduce"(%a) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = stablehlo.add %x, %y : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = stablehlo.multiply %0, %0 : tensor<4xf32>
  %2 = "stablehlo.all_reduce"(%b) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = stablehlo.add %x, %y : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2xf32>) -> tensor<2xf32>
  %3 = "stablehlo.all_reduce"(%1) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = stablehlo.add %x, %y : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %3, %2 : tensor<4xf32>, tensor<2xf32>
}

// -----

// Different groups or reducers do not merge.
// CHECK-COUNT-2: "stablehlo.all_reduce"
func.func @main(%a: tensor<4xf32>, %b: tensor<2xf32>) -> (tensor<4xf32>, tensor<2xf32>) {
  %0 = "stablehlo.all_reduce"(%a) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = stablehlo.add %x, %y : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "stablehlo.all_reduce"(%b) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = stablehlo.maximum %x, %y : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2xf32>) -> tensor<2xf32>
  return %0, %1 : tensor<4xf32>, tensor<2xf32>
}
