// RUN: openhlo opt %s --split-input-file --passes=remat{memory-limit=2.5MiB} | filecheck %s

// A 1 MiB value read at the start and again at the end: with two more 1 MiB values live
// between, the peak (arguments 2 KiB + heap 3 MiB and a constant) is over 2.5 MiB. The cheap broadcast is
// recomputed right before its late use (a marked copy), so it is free in between: the heap
// needs 2 MiB.
// CHECK-LABEL: @main
// CHECK-SAME: openhlo.remat_summary = {limit = 2621440 : i64, peak_after = 2099264 : i64, peak_before = 3147840 : i64, recomputed = 1 : i64}
// CHECK: %[[B:[^ ]+]] = stablehlo.broadcast_in_dim %arg0, dims = [0] : (tensor<512xf32>) -> tensor<512x512xf32>
// CHECK-NEXT: %[[T1:[^ ]+]] = stablehlo.transpose %[[B]]
// CHECK-NEXT: %[[T2:[^ ]+]] = stablehlo.transpose %[[T1]]
// CHECK-NEXT: %[[T3:[^ ]+]] = stablehlo.transpose %[[T2]]
// CHECK-NEXT: %[[R3:[^ ]+]] = stablehlo.reduce(%[[T3]]
// CHECK-NEXT: %[[C:[^ ]+]] = stablehlo.broadcast_in_dim %arg0, dims = [0] {openhlo.remat}
// CHECK-NEXT: %[[R0:[^ ]+]] = stablehlo.reduce(%[[C]]
// CHECK-NEXT: stablehlo.add %[[R3]], %[[R0]]
func.func public @main(%arg0: tensor<512xf32>) -> tensor<512xf32> {
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %0 = stablehlo.broadcast_in_dim %arg0, dims = [0] : (tensor<512xf32>) -> tensor<512x512xf32>
  %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<512x512xf32>) -> tensor<512x512xf32>
  %2 = stablehlo.transpose %1, dims = [1, 0] : (tensor<512x512xf32>) -> tensor<512x512xf32>
  %3 = stablehlo.transpose %2, dims = [1, 0] : (tensor<512x512xf32>) -> tensor<512x512xf32>
  %4 = stablehlo.reduce(%3 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<512x512xf32>, tensor<f32>) -> tensor<512xf32>
  %5 = stablehlo.reduce(%0 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<512x512xf32>, tensor<f32>) -> tensor<512xf32>
  %6 = stablehlo.add %4, %5 : tensor<512xf32>
  return %6 : tensor<512xf32>
}

// -----

// A weight-update-like dot reads the 768 KiB %0 and writes 24 KiB: written last, it keeps %0
// live across the chain of transposes (heap 3 x 768 KiB). Hoisted to right after %0
// (ops that free more than they define move up first), it frees %0 there: the heap needs
// 2 x 768 KiB + 24 KiB, under the limit with nothing recomputed.
// CHECK-LABEL: @main
// CHECK-SAME: openhlo.remat_summary = {limit = 2621440 : i64, peak_after = 2416640 : i64, peak_before = 3178496 : i64, recomputed = 0 : i64}
// CHECK: %[[E:[^ ]+]] = stablehlo.exponential %arg0
// CHECK-NEXT: stablehlo.dot_general %[[E]], %arg1
// CHECK-NEXT: stablehlo.transpose %arg0
// CHECK-NOT: openhlo.remat}
func.func public @main(%arg0: tensor<384x512xf32>, %arg1: tensor<512x16xf32>) -> (tensor<384x16xf32>, tensor<512x384xf32>) {
  %0 = stablehlo.exponential %arg0 : tensor<384x512xf32>
  %1 = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<384x512xf32>) -> tensor<512x384xf32>
  %2 = stablehlo.transpose %1, dims = [1, 0] : (tensor<512x384xf32>) -> tensor<384x512xf32>
  %3 = stablehlo.transpose %2, dims = [1, 0] : (tensor<384x512xf32>) -> tensor<512x384xf32>
  %4 = stablehlo.dot_general %0, %arg1, contracting_dims = [1] x [0] : (tensor<384x512xf32>, tensor<512x16xf32>) -> tensor<384x16xf32>
  return %4, %3 : tensor<384x16xf32>, tensor<512x384xf32>
}

// -----

// Under the limit already: nothing changes, no summary.
// CHECK-LABEL: @main
// CHECK-NOT: openhlo.remat
func.func public @main(%arg0: tensor<512xf32>) -> tensor<512x512xf32> {
  %0 = stablehlo.broadcast_in_dim %arg0, dims = [0] : (tensor<512xf32>) -> tensor<512x512xf32>
  %1 = stablehlo.exponential %0 : tensor<512x512xf32>
  return %1 : tensor<512x512xf32>
}

// -----

// An op with an effect is never recomputed: the custom call's value stays live, the peak
// stays over the limit (a warning says so) and the program is left as it was.
// CHECK-LABEL: @main
// CHECK-NOT: openhlo.remat
// CHECK: stablehlo.custom_call @make
func.func public @main(%arg0: tensor<512xf32>) -> tensor<512xf32> {
  %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %0 = stablehlo.custom_call @make(%arg0) {has_side_effect = true} : (tensor<512xf32>) -> tensor<512x512xf32>
  %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<512x512xf32>) -> tensor<512x512xf32>
  %2 = stablehlo.transpose %1, dims = [1, 0] : (tensor<512x512xf32>) -> tensor<512x512xf32>
  %3 = stablehlo.transpose %2, dims = [1, 0] : (tensor<512x512xf32>) -> tensor<512x512xf32>
  %4 = stablehlo.reduce(%3 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<512x512xf32>, tensor<f32>) -> tensor<512xf32>
  %5 = stablehlo.reduce(%0 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<512x512xf32>, tensor<f32>) -> tensor<512xf32>
  %6 = stablehlo.add %4, %5 : tensor<512xf32>
  return %6 : tensor<512xf32>
}
