// RUN: openhlo opt %s --split-input-file --passes=prune-argreduce-index,dce | filecheck %s

// PyTorch's max_pool2d_with_indices (k3 s2 p1) whose indices nobody reads: a reduce_window of
// the values alone, keeping the first of equal values (GE) and the first NaN; dce removes
// the index operand.
// CHECK-LABEL: func.func public @dead_index
// CHECK-NEXT: %[[I:[^ ]+]] = stablehlo.constant dense<0xFF800000> : tensor<f32>
// CHECK-NEXT: %[[P:[^ ]+]] = "stablehlo.reduce_window"(%arg0, %[[I]])
// CHECK-NEXT: ^bb0(%[[A:[^:]+]]: tensor<f32>, %[[B:[^:]+]]: tensor<f32>):
// CHECK-NEXT: %[[GE:[^ ]+]] = stablehlo.compare GE, %[[A]], %[[B]], FLOAT
// CHECK-NEXT: %[[NAN:[^ ]+]] = stablehlo.compare NE, %[[A]], %[[A]], FLOAT
// CHECK-NEXT: %[[OR:[^ ]+]] = stablehlo.or %[[GE]], %[[NAN]]
// CHECK-NEXT: %[[S:[^ ]+]] = stablehlo.select %[[OR]], %[[A]], %[[B]]
// CHECK-NEXT: stablehlo.return %[[S]] : tensor<f32>
// CHECK: (tensor<2x3x8x8xf32>, tensor<f32>) -> tensor<2x3x4x4xf32>
// CHECK-NEXT: return %[[P]] : tensor<2x3x4x4xf32>
func.func public @dead_index(%x: tensor<2x3x8x8xf32>) -> (tensor<2x3x4x4xf32>) {
  %flat = stablehlo.iota dim = 0 : tensor<64xi64>
  %plane = stablehlo.reshape %flat : (tensor<64xi64>) -> tensor<8x8xi64>
  %idx = stablehlo.broadcast_in_dim %plane, dims = [2, 3] : (tensor<8x8xi64>) -> tensor<2x3x8x8xi64>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m1 = stablehlo.constant dense<-1> : tensor<i64>
  %p:2 = "stablehlo.reduce_window"(%x, %idx, %ninf, %m1) ({
    ^bb0(%a: tensor<f32>, %i: tensor<i64>, %b: tensor<f32>, %j: tensor<i64>):
      %a_nan = stablehlo.compare NE, %a, %a : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %gt = stablehlo.compare GT, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %eq = stablehlo.compare EQ, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %lt = stablehlo.compare LT, %i, %j : (tensor<i64>, tensor<i64>) -> tensor<i1>
      %tie = stablehlo.and %eq, %lt : tensor<i1>
      %p0 = stablehlo.or %gt, %a_nan : tensor<i1>
      %pick = stablehlo.or %p0, %tie : tensor<i1>
      %v = stablehlo.select %pick, %a, %b : tensor<i1>, tensor<f32>
      %k = stablehlo.select %pick, %i, %j : tensor<i1>, tensor<i64>
      stablehlo.return %v, %k : tensor<f32>, tensor<i64>
  }) {window_dimensions = array<i64: 1, 1, 3, 3>, window_strides = array<i64: 1, 1, 2, 2>,
      padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1]]> : tensor<4x2xi64>}
    : (tensor<2x3x8x8xf32>, tensor<2x3x8x8xi64>, tensor<f32>, tensor<i64>)
    -> (tensor<2x3x4x4xf32>, tensor<2x3x4x4xi64>)
  func.return %p#0 : tensor<2x3x4x4xf32>
}

// -----

// The indices are used: nothing changes.
// CHECK-LABEL: func.func public @live_index
// CHECK: "stablehlo.reduce_window"(%arg0, %{{[^,]+}}, %{{[^,]+}}, %{{[^)]+}})
func.func public @live_index(%x: tensor<2x3x8x8xf32>) -> (tensor<2x3x4x4xf32>, tensor<2x3x4x4xi64>) {
  %flat = stablehlo.iota dim = 0 : tensor<64xi64>
  %plane = stablehlo.reshape %flat : (tensor<64xi64>) -> tensor<8x8xi64>
  %idx = stablehlo.broadcast_in_dim %plane, dims = [2, 3] : (tensor<8x8xi64>) -> tensor<2x3x8x8xi64>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m1 = stablehlo.constant dense<-1> : tensor<i64>
  %p:2 = "stablehlo.reduce_window"(%x, %idx, %ninf, %m1) ({
    ^bb0(%a: tensor<f32>, %i: tensor<i64>, %b: tensor<f32>, %j: tensor<i64>):
      %a_nan = stablehlo.compare NE, %a, %a : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %gt = stablehlo.compare GT, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %eq = stablehlo.compare EQ, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %lt = stablehlo.compare LT, %i, %j : (tensor<i64>, tensor<i64>) -> tensor<i1>
      %tie = stablehlo.and %eq, %lt : tensor<i1>
      %p0 = stablehlo.or %gt, %a_nan : tensor<i1>
      %pick = stablehlo.or %p0, %tie : tensor<i1>
      %v = stablehlo.select %pick, %a, %b : tensor<i1>, tensor<f32>
      %k = stablehlo.select %pick, %i, %j : tensor<i1>, tensor<i64>
      stablehlo.return %v, %k : tensor<f32>, tensor<i64>
  }) {window_dimensions = array<i64: 1, 1, 3, 3>, window_strides = array<i64: 1, 1, 2, 2>,
      padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1]]> : tensor<4x2xi64>}
    : (tensor<2x3x8x8xf32>, tensor<2x3x8x8xi64>, tensor<f32>, tensor<i64>)
    -> (tensor<2x3x4x4xf32>, tensor<2x3x4x4xi64>)
  func.return %p#0, %p#1 : tensor<2x3x4x4xf32>, tensor<2x3x4x4xi64>
}

// -----

// Indices falling along a window's taps would make the later of +0.0 and -0.0 win: kept.
// CHECK-LABEL: func.func public @falling_index
// CHECK: stablehlo.reverse
// CHECK: "stablehlo.reduce_window"(%arg0, %{{[^,]+}}, %{{[^,]+}}, %{{[^)]+}})
func.func public @falling_index(%x: tensor<2x3x8x8xf32>) -> (tensor<2x3x4x4xf32>) {
  %flat = stablehlo.iota dim = 0 : tensor<64xi64>
  %plane = stablehlo.reshape %flat : (tensor<64xi64>) -> tensor<8x8xi64>
  %rev = stablehlo.reverse %plane, dims = [1] : tensor<8x8xi64>
  %idx = stablehlo.broadcast_in_dim %rev, dims = [2, 3] : (tensor<8x8xi64>) -> tensor<2x3x8x8xi64>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m1 = stablehlo.constant dense<-1> : tensor<i64>
  %p:2 = "stablehlo.reduce_window"(%x, %idx, %ninf, %m1) ({
    ^bb0(%a: tensor<f32>, %i: tensor<i64>, %b: tensor<f32>, %j: tensor<i64>):
      %a_nan = stablehlo.compare NE, %a, %a : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %gt = stablehlo.compare GT, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %eq = stablehlo.compare EQ, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %lt = stablehlo.compare LT, %i, %j : (tensor<i64>, tensor<i64>) -> tensor<i1>
      %tie = stablehlo.and %eq, %lt : tensor<i1>
      %p0 = stablehlo.or %gt, %a_nan : tensor<i1>
      %pick = stablehlo.or %p0, %tie : tensor<i1>
      %v = stablehlo.select %pick, %a, %b : tensor<i1>, tensor<f32>
      %k = stablehlo.select %pick, %i, %j : tensor<i1>, tensor<i64>
      stablehlo.return %v, %k : tensor<f32>, tensor<i64>
  }) {window_dimensions = array<i64: 1, 1, 3, 3>, window_strides = array<i64: 1, 1, 2, 2>,
      padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1]]> : tensor<4x2xi64>}
    : (tensor<2x3x8x8xf32>, tensor<2x3x8x8xi64>, tensor<f32>, tensor<i64>)
    -> (tensor<2x3x4x4xf32>, tensor<2x3x4x4xi64>)
  func.return %p#0 : tensor<2x3x4x4xf32>
}

// -----

// An init value of zero could tie with -0.0 in padding: kept.
// CHECK-LABEL: func.func public @zero_init
// CHECK: "stablehlo.reduce_window"(%arg0, %{{[^,]+}}, %{{[^,]+}}, %{{[^)]+}})
func.func public @zero_init(%x: tensor<2x3x8x8xf32>) -> (tensor<2x3x4x4xf32>) {
  %flat = stablehlo.iota dim = 0 : tensor<64xi64>
  %plane = stablehlo.reshape %flat : (tensor<64xi64>) -> tensor<8x8xi64>
  %idx = stablehlo.broadcast_in_dim %plane, dims = [2, 3] : (tensor<8x8xi64>) -> tensor<2x3x8x8xi64>
  %ninf = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %m1 = stablehlo.constant dense<-1> : tensor<i64>
  %p:2 = "stablehlo.reduce_window"(%x, %idx, %ninf, %m1) ({
    ^bb0(%a: tensor<f32>, %i: tensor<i64>, %b: tensor<f32>, %j: tensor<i64>):
      %a_nan = stablehlo.compare NE, %a, %a : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %gt = stablehlo.compare GT, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %eq = stablehlo.compare EQ, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %lt = stablehlo.compare LT, %i, %j : (tensor<i64>, tensor<i64>) -> tensor<i1>
      %tie = stablehlo.and %eq, %lt : tensor<i1>
      %p0 = stablehlo.or %gt, %a_nan : tensor<i1>
      %pick = stablehlo.or %p0, %tie : tensor<i1>
      %v = stablehlo.select %pick, %a, %b : tensor<i1>, tensor<f32>
      %k = stablehlo.select %pick, %i, %j : tensor<i1>, tensor<i64>
      stablehlo.return %v, %k : tensor<f32>, tensor<i64>
  }) {window_dimensions = array<i64: 1, 1, 3, 3>, window_strides = array<i64: 1, 1, 2, 2>,
      padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1]]> : tensor<4x2xi64>}
    : (tensor<2x3x8x8xf32>, tensor<2x3x8x8xi64>, tensor<f32>, tensor<i64>)
    -> (tensor<2x3x4x4xf32>, tensor<2x3x4x4xi64>)
  func.return %p#0 : tensor<2x3x4x4xf32>
}

// -----

// An iota along the rows rises along the window only if the window spans rows alone: a
// 3 x 3 window also spans columns, where the indices are equal: kept.
// CHECK-LABEL: func.func public @row_iota
// CHECK: "stablehlo.reduce_window"(%arg0, %{{[^,]+}}, %{{[^,]+}}, %{{[^)]+}})
func.func public @row_iota(%x: tensor<2x3x8x8xf32>) -> (tensor<2x3x4x4xf32>) {
  %idx = stablehlo.iota dim = 2 : tensor<2x3x8x8xi64>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m1 = stablehlo.constant dense<-1> : tensor<i64>
  %p:2 = "stablehlo.reduce_window"(%x, %idx, %ninf, %m1) ({
    ^bb0(%a: tensor<f32>, %i: tensor<i64>, %b: tensor<f32>, %j: tensor<i64>):
      %a_nan = stablehlo.compare NE, %a, %a : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %gt = stablehlo.compare GT, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %eq = stablehlo.compare EQ, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %lt = stablehlo.compare LT, %i, %j : (tensor<i64>, tensor<i64>) -> tensor<i1>
      %tie = stablehlo.and %eq, %lt : tensor<i1>
      %p0 = stablehlo.or %gt, %a_nan : tensor<i1>
      %pick = stablehlo.or %p0, %tie : tensor<i1>
      %v = stablehlo.select %pick, %a, %b : tensor<i1>, tensor<f32>
      %k = stablehlo.select %pick, %i, %j : tensor<i1>, tensor<i64>
      stablehlo.return %v, %k : tensor<f32>, tensor<i64>
  }) {window_dimensions = array<i64: 1, 1, 3, 3>, window_strides = array<i64: 1, 1, 2, 2>,
      padding = dense<[[0, 0], [0, 0], [1, 1], [1, 1]]> : tensor<4x2xi64>}
    : (tensor<2x3x8x8xf32>, tensor<2x3x8x8xi64>, tensor<f32>, tensor<i64>)
    -> (tensor<2x3x4x4xf32>, tensor<2x3x4x4xi64>)
  func.return %p#0 : tensor<2x3x4x4xf32>
}
