// RUN: openhlo opt %s --split-input-file --passes=transpose-folding | filecheck %s

// Operand transposes fold into the batching and contracting dimensions when
// the operand's free dimensions keep their order (attention's head split:
// q and k.T after reshape + transpose); the dead transposes are left to dce.
// CHECK-LABEL: func.func public @operands
// CHECK: %[[D:[^ ]+]] = stablehlo.dot_general %arg0, %arg1, batching_dims = [0, 2] x [0, 2], contracting_dims = [3] x [3]
// CHECK-SAME: (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) -> tensor<2x4x8x8xf32>
// CHECK-NEXT: return %[[D]]
func.func public @operands(%arg0: tensor<2x8x4x16xf32>, %arg1: tensor<2x8x4x16xf32>) -> tensor<2x4x8x8xf32> {
  %q = stablehlo.transpose %arg0, dims = [0, 2, 1, 3] : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
  %k = stablehlo.transpose %arg1, dims = [0, 2, 3, 1] : (tensor<2x8x4x16xf32>) -> tensor<2x4x16x8xf32>
  %0 = stablehlo.dot_general %q, %k, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2] : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32>
  func.return %0 : tensor<2x4x8x8xf32>
}

// -----

// A transpose that reorders an operand's free dimensions would reorder the
// result: it stays.
// CHECK-LABEL: func.func public @free_order_kept
// CHECK-NEXT: %[[T:[^ ]+]] = stablehlo.transpose %arg0, dims = [1, 0, 2]
// CHECK-NEXT: stablehlo.dot_general %[[T]], %arg1, contracting_dims = [2] x [0]
func.func public @free_order_kept(%arg0: tensor<3x2x5xf32>, %arg1: tensor<5x7xf32>) -> tensor<2x3x7xf32> {
  %t = stablehlo.transpose %arg0, dims = [1, 0, 2] : (tensor<3x2x5xf32>) -> tensor<2x3x5xf32>
  %0 = stablehlo.dot_general %t, %arg1, contracting_dims = [2] x [0] : (tensor<2x3x5xf32>, tensor<5x7xf32>) -> tensor<2x3x7xf32>
  func.return %0 : tensor<2x3x7xf32>
}

// -----

// transpose(dot(a, b)) that puts b's free dimensions first is dot(b, a), the
// precision configs swapped (a weight gradient); one that reorders only batch
// dimensions reorders the batching lists.
// CHECK-LABEL: func.func public @results
// CHECK-NEXT: %[[G:[^ ]+]] = stablehlo.dot_general %arg1, %arg0, contracting_dims = [0, 1] x [0, 1], precision = [HIGHEST, DEFAULT] : (tensor<2x4x6xf32>, tensor<2x4x3xf32>) -> tensor<6x3xf32>
// CHECK-NEXT: %[[B:[^ ]+]] = stablehlo.dot_general %arg2, %arg3, batching_dims = [1, 0] x [1, 0], contracting_dims = [3] x [2] : (tensor<2x3x4x5xf32>, tensor<2x3x5x6xf32>) -> tensor<3x2x4x6xf32>
// CHECK-NEXT: return %[[G]], %[[B]]
func.func public @results(%arg0: tensor<2x4x3xf32>, %arg1: tensor<2x4x6xf32>, %arg2: tensor<2x3x4x5xf32>, %arg3: tensor<2x3x5x6xf32>) -> (tensor<6x3xf32>, tensor<3x2x4x6xf32>) {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [0, 1] x [0, 1], precision = [DEFAULT, HIGHEST] : (tensor<2x4x3xf32>, tensor<2x4x6xf32>) -> tensor<3x6xf32>
  %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<3x6xf32>) -> tensor<6x3xf32>
  %2 = stablehlo.dot_general %arg2, %arg3, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2] : (tensor<2x3x4x5xf32>, tensor<2x3x5x6xf32>) -> tensor<2x3x4x6xf32>
  %3 = stablehlo.transpose %2, dims = [1, 0, 2, 3] : (tensor<2x3x4x6xf32>) -> tensor<3x2x4x6xf32>
  func.return %1, %3 : tensor<6x3xf32>, tensor<3x2x4x6xf32>
}

// -----

// A dot with another use, or a transpose mixing batch and free dimensions, stays.
// CHECK-LABEL: func.func public @results_kept
// CHECK-NEXT: %[[D:[^ ]+]] = stablehlo.dot_general %arg0, %arg1
// CHECK-NEXT: %[[T:[^ ]+]] = stablehlo.transpose %[[D]], dims = [1, 0]
// CHECK-NEXT: %[[E:[^ ]+]] = stablehlo.dot_general %arg2, %arg3
// CHECK-NEXT: %[[U:[^ ]+]] = stablehlo.transpose %[[E]], dims = [0, 2, 1, 3]
// CHECK-NEXT: return %[[D]], %[[T]], %[[U]]
func.func public @results_kept(%arg0: tensor<3x4xf32>, %arg1: tensor<4x6xf32>, %arg2: tensor<2x3x4x5xf32>, %arg3: tensor<2x3x5x6xf32>) -> (tensor<3x6xf32>, tensor<6x3xf32>, tensor<2x4x3x6xf32>) {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<3x4xf32>, tensor<4x6xf32>) -> tensor<3x6xf32>
  %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<3x6xf32>) -> tensor<6x3xf32>
  %2 = stablehlo.dot_general %arg2, %arg3, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2] : (tensor<2x3x4x5xf32>, tensor<2x3x5x6xf32>) -> tensor<2x3x4x6xf32>
  %3 = stablehlo.transpose %2, dims = [0, 2, 1, 3] : (tensor<2x3x4x6xf32>) -> tensor<2x4x3x6xf32>
  func.return %0, %1, %3 : tensor<3x6xf32>, tensor<6x3xf32>, tensor<2x4x3x6xf32>
}

// -----

// A transpose that became a dot is read by the new dot, not folded into its reader again
// (whose operand would be the removed dot).
// CHECK-LABEL: func.func public @result_then_operand
// CHECK-NEXT: %[[N:[^ ]+]] = stablehlo.dot_general %arg1, %arg0, contracting_dims = [0] x [1]
// CHECK-NEXT: %[[M:[^ ]+]] = stablehlo.dot_general %[[N]], %arg2, contracting_dims = [1] x [0]
// CHECK-NEXT: return %[[M]]
func.func public @result_then_operand(%arg0: tensor<3x4xf32>, %arg1: tensor<4x6xf32>, %arg2: tensor<3x5xf32>) -> tensor<6x5xf32> {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<3x4xf32>, tensor<4x6xf32>) -> tensor<3x6xf32>
  %1 = stablehlo.transpose %0, dims = [1, 0] : (tensor<3x6xf32>) -> tensor<6x3xf32>
  %2 = stablehlo.dot_general %1, %arg2, contracting_dims = [1] x [0] : (tensor<6x3xf32>, tensor<3x5xf32>) -> tensor<6x5xf32>
  func.return %2 : tensor<6x5xf32>
}
