// RUN: openhlo opt %s --split-input-file --passes=weight-only-dot,dce | filecheck %s

// Per-channel int8 weight-only (the quantizer's weight-int8 after quant-lower): the float dot
// on convert(q) * broadcast(scales) becomes one composite of (x, q, scales); the weight is
// no longer dequantized outside it, and the decomposition is the original math.
// CHECK-LABEL: @main
// CHECK: %[[Q:[^ ]+]] = stablehlo.constant dense<{{\[\[}}10, -14, 109], [10, -71, 73], [127, 127, -127], [-127, -85, 0]]> : tensor<4x3xi8>
// CHECK-NEXT: %[[S:[^ ]+]] = stablehlo.constant dense<[{{.*}}]> : tensor<3xf32>
// CHECK-NEXT: %[[Y:[^ ]+]] = stablehlo.composite "openhlo.weight_only_dot" %arg0, %[[Q]], %[[S]] {composite_attributes = {bits = 8 : i64, group_size = 4 : i64, weight_contracting = 0 : i64}, decomposition = @[[D:[^ ]+]]}
// CHECK-NEXT: return %[[Y]]
// CHECK: func.func private @[[D]](%arg0: tensor<2x4xf32>, %arg1: tensor<4x3xi8>, %arg2: tensor<3xf32>)
// CHECK-NEXT: %[[F:[^ ]+]] = stablehlo.convert %arg1 : (tensor<4x3xi8>) -> tensor<4x3xf32>
// CHECK-NEXT: %[[B:[^ ]+]] = stablehlo.broadcast_in_dim %arg2, dims = [1]
// CHECK-NEXT: %[[W:[^ ]+]] = stablehlo.multiply %[[F]], %[[B]]
// CHECK-NEXT: %[[R:[^ ]+]] = stablehlo.dot_general %arg0, %[[W]], contracting_dims = [1] x [0]
// CHECK-NEXT: return %[[R]]
func.func @main(%arg0: tensor<2x4xf32>) -> tensor<2x3xf32> {
  %c = stablehlo.constant dense<[[10, -14, 109], [10, -71, 73], [127, 127, -127], [-127, -85, 0]]> : tensor<4x3xi8>
  %0 = stablehlo.convert %c : (tensor<4x3xi8>) -> tensor<4x3xf32>
  %cst = stablehlo.constant dense<[0.0102362204, 0.00708661414, 0.005511811]> : tensor<3xf32>
  %1 = stablehlo.broadcast_in_dim %cst, dims = [1] : (tensor<3xf32>) -> tensor<4x3xf32>
  %2 = stablehlo.multiply %0, %1 : tensor<4x3xf32>
  %3 = stablehlo.dot_general %arg0, %2, contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  return %3 : tensor<2x3xf32>
}

// -----

// A float weight (nothing dequantized) is no weight-only dot: left as it is.
// CHECK-LABEL: @main
// CHECK-NOT: composite
// CHECK: stablehlo.dot_general %arg0, %arg1
func.func @main(%arg0: tensor<2x4xf32>, %arg1: tensor<4x3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
