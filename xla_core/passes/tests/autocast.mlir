// RUN: openhlo opt %s --split-input-file --passes=autocast | filecheck %s

// A matrix product's f32 operands are converted to bf16 and it accumulates into
// f32; the bias add and relu (promote ops) meet an f32 value and stay f32; the
// second product converts the relu's result once. The originals left unused
// are dce's.
// CHECK-LABEL: func.func public @mlp
// CHECK-NEXT: %[[X:[^ ]+]] = stablehlo.convert %arg0 : (tensor<4x8xf32>) -> tensor<4x8xbf16>
// CHECK-NEXT: %[[W1:[^ ]+]] = stablehlo.convert %arg1 : (tensor<8x16xf32>) -> tensor<8x16xbf16>
// CHECK-NEXT: %[[D1:[^ ]+]] = stablehlo.dot_general %[[X]], %[[W1]], contracting_dims = [1] x [0] : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xf32>
// CHECK-NEXT: %[[B:[^ ]+]] = stablehlo.broadcast_in_dim %arg2
// CHECK-NEXT: %[[A:[^ ]+]] = stablehlo.add %[[D1]], %[[B]] : tensor<4x16xf32>
// CHECK-NEXT: %[[Z:[^ ]+]] = stablehlo.constant dense<0.000000e+00> : tensor<4x16xf32>
// CHECK-NEXT: %[[R:[^ ]+]] = stablehlo.maximum %[[A]], %[[Z]] : tensor<4x16xf32>
// CHECK-NEXT: %[[RL:[^ ]+]] = stablehlo.convert %[[R]] : (tensor<4x16xf32>) -> tensor<4x16xbf16>
// CHECK-NEXT: %[[W2:[^ ]+]] = stablehlo.convert %arg3 : (tensor<16x2xf32>) -> tensor<16x2xbf16>
// CHECK-NEXT: %[[D2:[^ ]+]] = stablehlo.dot_general %[[RL]], %[[W2]], contracting_dims = [1] x [0] : (tensor<4x16xbf16>, tensor<16x2xbf16>) -> tensor<4x2xf32>
// CHECK-NEXT: return %[[D2]] : tensor<4x2xf32>
func.func public @mlp(%x: tensor<4x8xf32>, %w1: tensor<8x16xf32>, %b1: tensor<16xf32>, %w2: tensor<16x2xf32>) -> tensor<4x2xf32> {
  %0 = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %1 = stablehlo.broadcast_in_dim %b1, dims = [1] : (tensor<16xf32>) -> tensor<4x16xf32>
  %2 = stablehlo.add %0, %1 : tensor<4x16xf32>
  %c = stablehlo.constant dense<0.0> : tensor<4x16xf32>
  %3 = stablehlo.maximum %2, %c : tensor<4x16xf32>
  %4 = stablehlo.dot_general %3, %w2, contracting_dims = [1] x [0] : (tensor<4x16xf32>, tensor<16x2xf32>) -> tensor<4x2xf32>
  func.return %4 : tensor<4x2xf32>
}

// -----

// A product that asks for HIGHEST precision keeps f32; f64 is never autocast;
// a convolution is a contraction too.
// CHECK-LABEL: func.func public @kept
// CHECK-NEXT: stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [HIGHEST, HIGHEST] : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: stablehlo.dot_general %arg2, %arg3, contracting_dims = [1] x [0] : (tensor<4x8xf64>, tensor<8x4xf64>) -> tensor<4x4xf64>
// CHECK-NEXT: %[[I:[^ ]+]] = stablehlo.convert %arg4 : (tensor<1x6x6x2xf32>) -> tensor<1x6x6x2xbf16>
// CHECK-NEXT: %[[K:[^ ]+]] = stablehlo.convert %arg5 : (tensor<3x3x2x4xf32>) -> tensor<3x3x2x4xbf16>
// CHECK-NEXT: stablehlo.convolution(%[[I]], %[[K]])
// CHECK-SAME: (tensor<1x6x6x2xbf16>, tensor<3x3x2x4xbf16>) -> tensor<1x4x4x4xf32>
func.func public @kept(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>, %c: tensor<4x8xf64>, %d: tensor<8x4xf64>, %img: tensor<1x6x6x2xf32>, %ker: tensor<3x3x2x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf64>, tensor<1x4x4x4xf32>) {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0], precision = [HIGHEST, HIGHEST] : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %1 = stablehlo.dot_general %c, %d, contracting_dims = [1] x [0] : (tensor<4x8xf64>, tensor<8x4xf64>) -> tensor<4x4xf64>
  %2 = stablehlo.convolution(%img, %ker) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x6x6x2xf32>, tensor<3x3x2x4xf32>) -> tensor<1x4x4x4xf32>
  func.return %0, %1, %2 : tensor<4x4xf32>, tensor<4x4xf64>, tensor<1x4x4x4xf32>
}
