// RUN: openhlo opt %s --split-input-file --passes=memory-schedule | filecheck %s

// Two independent big-then-small chains: program order keeps both 256 KiB
// broadcasts live at once; the schedule finishes one chain before the next.
// CHECK-LABEL: @main
// CHECK: %[[A:[^ ]+]] = stablehlo.broadcast_in_dim %arg0
// CHECK: %[[RA:[^ ]+]] = stablehlo.reduce(%[[A]] init:
// CHECK-NEXT: %[[B:[^ ]+]] = stablehlo.broadcast_in_dim %arg1
// CHECK-NEXT: %[[RB:[^ ]+]] = stablehlo.reduce(%[[B]] init:
// CHECK-NEXT: stablehlo.add %[[RA]], %[[RB]]
func.func public @main(%arg0: tensor<256xf32>, %arg1: tensor<256xf32>) -> tensor<256xf32> {
  %0 = stablehlo.broadcast_in_dim %arg0, dims = [0] : (tensor<256xf32>) -> tensor<256x256xf32>
  %1 = stablehlo.broadcast_in_dim %arg1, dims = [0] : (tensor<256xf32>) -> tensor<256x256xf32>
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %2 = stablehlo.reduce(%0 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<256x256xf32>, tensor<f32>) -> tensor<256xf32>
  %3 = stablehlo.reduce(%1 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<256x256xf32>, tensor<f32>) -> tensor<256xf32>
  %4 = stablehlo.add %2, %3 : tensor<256xf32>
  return %4 : tensor<256xf32>
}

// -----

// Ops with effects keep their relative order even when swapping them would
// lower the peak (@second frees the big broadcast, @first defines a big value).
// CHECK-LABEL: @main
// CHECK: %[[BIG:[^ ]+]] = stablehlo.broadcast_in_dim %arg0
// CHECK-NEXT: stablehlo.custom_call @first(%arg0)
// CHECK-NEXT: stablehlo.custom_call @second(%[[BIG]])
func.func public @main(%arg0: tensor<16xf32>) -> (tensor<f32>, tensor<16x1024xf32>) {
  %0 = stablehlo.broadcast_in_dim %arg0, dims = [0] : (tensor<16xf32>) -> tensor<16x1024xf32>
  %1 = stablehlo.custom_call @first(%arg0) {has_side_effect = true} : (tensor<16xf32>) -> tensor<16x1024xf32>
  %2 = stablehlo.custom_call @second(%0) {has_side_effect = true} : (tensor<16x1024xf32>) -> tensor<f32>
  return %2, %1 : tensor<f32>, tensor<16x1024xf32>
}

// -----

// Blocks nested in a while body are scheduled too.
// CHECK-LABEL: @main
// CHECK: stablehlo.while
// CHECK: do {
// CHECK: %[[A:[^ ]+]] = stablehlo.broadcast_in_dim %iterArg_0
// CHECK-NEXT: %[[RA:[^ ]+]] = stablehlo.reduce(%[[A]]
// CHECK-NEXT: %[[B:[^ ]+]] = stablehlo.broadcast_in_dim %iterArg_0
// CHECK-NEXT: %[[RB:[^ ]+]] = stablehlo.reduce(%[[B]]
func.func public @main(%arg0: tensor<256xf32>) -> tensor<256xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.while(%iterArg = %c0, %iterArg_0 = %arg0) : tensor<i32>, tensor<256xf32>
   cond {
    %c3 = stablehlo.constant dense<3> : tensor<i32>
    %1 = stablehlo.compare  LT, %iterArg, %c3,  SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %1 : tensor<i1>
  } do {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %c1 = stablehlo.constant dense<1> : tensor<i32>
    %1 = stablehlo.broadcast_in_dim %iterArg_0, dims = [0] : (tensor<256xf32>) -> tensor<256x256xf32>
    %2 = stablehlo.broadcast_in_dim %iterArg_0, dims = [1] : (tensor<256xf32>) -> tensor<256x256xf32>
    %3 = stablehlo.reduce(%1 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<256x256xf32>, tensor<f32>) -> tensor<256xf32>
    %4 = stablehlo.reduce(%2 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<256x256xf32>, tensor<f32>) -> tensor<256xf32>
    %5 = stablehlo.add %3, %4 : tensor<256xf32>
    %6 = stablehlo.add %iterArg, %c1 : tensor<i32>
    stablehlo.return %6, %5 : tensor<i32>, tensor<256xf32>
  }
  return %0#1 : tensor<256xf32>
}
