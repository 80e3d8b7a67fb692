// RUN: openhlo opt %s --passes=async-collective-creator,latency-hiding-scheduler{hardware=generic-cpu},convert-async-to-sync | filecheck %s

// The all-reduce's operand is an argument: its start moves above the dots that do not
// read it (the creator left it right before its reader, where convert-async-to-sync would
// have made it synchronous), and its done stays before its reader.
// CHECK-LABEL: func.func @main
// CHECK-NEXT: %[[H:[^ ]+]] = "openhlo.async_start"(%arg0)
// CHECK: stablehlo.dot_general %arg1, %arg1
// CHECK-NEXT: %[[D:[^ ]+]] = "openhlo.async_done"(%[[H]])
// CHECK: stablehlo.add %[[D]], %arg0
func.func @main(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>, %v: tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>) {
  %a = stablehlo.dot_general %w, %w, contracting_dims = [1] x [0] : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %b = stablehlo.dot_general %a, %v, contracting_dims = [1] x [0] : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %r = "stablehlo.all_reduce"(%x) ({
    ^bb0(%p: tensor<f32>, %q: tensor<f32>):
      %s = stablehlo.add %p, %q : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %y = stablehlo.add %r, %x : tensor<64x64xf32>
  return %y, %b : tensor<64x64xf32>, tensor<64x64xf32>
}
