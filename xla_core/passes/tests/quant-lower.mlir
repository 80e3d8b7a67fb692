// RUN: openhlo opt %s --split-input-file --passes=quant-lower | filecheck %s

// Static int8: quantize is x / scale + zp, clamped, rounded half to even, converted; the dot
// runs on the i8 storage with an i32 result, minus the lhs zero point (-3) times the weight's
// column sums (exactly the dot of a tensor of the zero point); the i32 accumulator (scales 0.5 * rhs scales, zero point 0) needs no requantization;
// dequantize multiplies by the per-axis scales broadcast along the result's axis 1.
// CHECK-LABEL: @main
// CHECK: %[[S:[^ ]+]] = stablehlo.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[SB:[^ ]+]] = stablehlo.broadcast_in_dim %[[S]], dims = []
// CHECK: %[[D:[^ ]+]] = stablehlo.divide %arg0, %[[SB]] : tensor<2x4xf32>
// CHECK: %[[Z:[^ ]+]] = stablehlo.constant dense<-3.000000e+00> : tensor<f32>
// CHECK: %[[ZB:[^ ]+]] = stablehlo.broadcast_in_dim %[[Z]]
// CHECK: %[[A:[^ ]+]] = stablehlo.add %[[D]], %[[ZB]]
// CHECK: %[[LO:[^ ]+]] = stablehlo.constant dense<-1.280000e+02> : tensor<f32>
// CHECK: %[[HI:[^ ]+]] = stablehlo.constant dense<1.270000e+02> : tensor<f32>
// CHECK: %[[C:[^ ]+]] = stablehlo.clamp %[[LO]], %[[A]], %[[HI]]
// CHECK: %[[R:[^ ]+]] = stablehlo.round_nearest_even %[[C]]
// CHECK: %[[Q:[^ ]+]] = stablehlo.convert %[[R]] : (tensor<2x4xf32>) -> tensor<2x4xi8>
// CHECK: %[[W:[^ ]+]] = stablehlo.constant dense<{{\[\[}}1, 2, 3], [4, 5, 6], [7, 8, 9], [1, 2, 3]]> : tensor<4x3xi8>
// CHECK: %[[ACC:[^ ]+]] = stablehlo.dot_general %[[Q]], %[[W]], contracting_dims = [1] x [0] : (tensor<2x4xi8>, tensor<4x3xi8>) -> tensor<2x3xi32>
// CHECK: %[[WI:[^ ]+]] = stablehlo.convert %[[W]] : (tensor<4x3xi8>) -> tensor<4x3xi32>
// CHECK: %[[COLS:[^ ]+]] = stablehlo.reduce(%[[WI]] init: {{.*}}) applies stablehlo.add across dimensions = [0] : (tensor<4x3xi32>, tensor<i32>) -> tensor<3xi32>
// CHECK: %[[COLSB:[^ ]+]] = stablehlo.broadcast_in_dim %[[COLS]], dims = [1] : (tensor<3xi32>) -> tensor<2x3xi32>
// CHECK: %[[ZP:[^ ]+]] = stablehlo.constant dense<-3> : tensor<i32>
// CHECK: %[[ZPB:[^ ]+]] = stablehlo.broadcast_in_dim %[[ZP]], dims = [] : (tensor<i32>) -> tensor<2x3xi32>
// CHECK: %[[OFF:[^ ]+]] = stablehlo.multiply %[[COLSB]], %[[ZPB]] : tensor<2x3xi32>
// CHECK: %[[SUB:[^ ]+]] = stablehlo.subtract %[[ACC]], %[[OFF]] : tensor<2x3xi32>
// CHECK: %[[F:[^ ]+]] = stablehlo.convert %[[SUB]] : (tensor<2x3xi32>) -> tensor<2x3xf32>
// CHECK: %[[SC:[^ ]+]] = stablehlo.constant dense<[5.000000e-02, 1.000000e-01, 1.250000e-01]> : tensor<3xf32>
// CHECK: %[[SCB:[^ ]+]] = stablehlo.broadcast_in_dim %[[SC]], dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: %[[OUT:[^ ]+]] = stablehlo.multiply %[[F]], %[[SCB]] : tensor<2x3xf32>
// CHECK: return %[[OUT]] : tensor<2x3xf32>
// CHECK-NOT: quant
func.func public @main(%arg0: tensor<2x4xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.uniform_quantize %arg0 : (tensor<2x4xf32>) -> tensor<2x4x!quant.uniform<i8:f32, 5.000000e-01:-3>>
  %1 = stablehlo.constant() <{value = dense<[[1, 2, 3], [4, 5, 6], [7, 8, 9], [1, 2, 3]]> : tensor<4x3xi8>}> : () -> tensor<4x3x!quant.uniform<i8:f32:1, {1.000000e-01,2.000000e-01,2.500000e-01}>>
  %2 = stablehlo.dot_general %0, %1, contracting_dims = [1] x [0] : (tensor<2x4x!quant.uniform<i8:f32, 5.000000e-01:-3>>, tensor<4x3x!quant.uniform<i8:f32:1, {1.000000e-01,2.000000e-01,2.500000e-01}>>) -> tensor<2x3x!quant.uniform<i32:f32:1, {5.000000e-02,1.000000e-01,1.250000e-01}>>
  %3 = stablehlo.uniform_dequantize %2 : (tensor<2x3x!quant.uniform<i32:f32:1, {5.000000e-02,1.000000e-01,1.250000e-01}>>) -> tensor<2x3xf32>
  return %3 : tensor<2x3xf32>
}

// -----

// Weight-only (hybrid): the weight is dequantized ((convert(q) - 0) * scale, no zero point
// to subtract) and the float dot runs on it.
// CHECK-LABEL: @main
// CHECK: %[[W:[^ ]+]] = stablehlo.constant dense<[1, -7, 7]> : tensor<3xi4>
// CHECK: %[[WF:[^ ]+]] = stablehlo.convert %[[W]] : (tensor<3xi4>) -> tensor<3xf32>
// CHECK-NOT: subtract
// CHECK: %[[S:[^ ]+]] = stablehlo.constant dense<2.500000e-01> : tensor<f32>
// CHECK: %[[SB:[^ ]+]] = stablehlo.broadcast_in_dim %[[S]], dims = [] : (tensor<f32>) -> tensor<3xf32>
// CHECK: %[[WD:[^ ]+]] = stablehlo.multiply %[[WF]], %[[SB]] : tensor<3xf32>
// CHECK: %[[Y:[^ ]+]] = stablehlo.dot_general %arg0, %[[WD]], contracting_dims = [1] x [0] : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2xf32>
// CHECK: return %[[Y]] : tensor<2xf32>
func.func public @main(%arg0: tensor<2x3xf32>) -> tensor<2xf32> {
  %0 = stablehlo.constant() <{value = dense<[1, -7, 7]> : tensor<3xi4>}> : () -> tensor<3x!quant.uniform<i4:f32, 2.500000e-01>>
  %1 = stablehlo.dot_general %arg0, %0, contracting_dims = [1] x [0] : (tensor<2x3xf32>, tensor<3x!quant.uniform<i4:f32, 2.500000e-01>>) -> tensor<2xf32>
  return %1 : tensor<2xf32>
}

// -----

// Quantized arguments and results become their storage types; a reshape with one set of
// parameters moves storage integers; bitcast_convert to the storage type is the storage.
// CHECK-LABEL: @main
// CHECK-SAME: (%arg0: tensor<4xi8>) -> (tensor<2x2xi8>, tensor<4xi8>)
// CHECK-NEXT: %[[R:[^ ]+]] = stablehlo.reshape %arg0 : (tensor<4xi8>) -> tensor<2x2xi8>
// CHECK-NEXT: return %[[R]], %arg0 : tensor<2x2xi8>, tensor<4xi8>
func.func public @main(%arg0: tensor<4x!quant.uniform<i8:f32, 1.000000e-01:2>>) -> (tensor<2x2x!quant.uniform<i8:f32, 1.000000e-01:2>>, tensor<4xi8>) {
  %0 = stablehlo.reshape %arg0 : (tensor<4x!quant.uniform<i8:f32, 1.000000e-01:2>>) -> tensor<2x2x!quant.uniform<i8:f32, 1.000000e-01:2>>
  %1 = stablehlo.bitcast_convert %arg0 : (tensor<4x!quant.uniform<i8:f32, 1.000000e-01:2>>) -> tensor<4xi8>
  return %0, %1 : tensor<2x2x!quant.uniform<i8:f32, 1.000000e-01:2>>, tensor<4xi8>
}
