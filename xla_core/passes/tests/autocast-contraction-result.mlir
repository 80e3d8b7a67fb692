// RUN: openhlo opt %s --split-input-file --passes=autocast{contraction-result=bf16} | filecheck %s

// Products rounded to bf16, as PyTorch's bf16 matmuls return them: the bias
// add and the relu meet a bf16 value and adapt their parameter and constant
// operands (the bias is converted before its broadcast, the constant is
// converted here), so the chain stays bf16 up to the function's result.
// CHECK-LABEL: func.func public @mlp
// CHECK: %[[D1:[^ ]+]] = stablehlo.dot_general {{.*}} -> tensor<4x16xbf16>
// CHECK: %[[BL:[^ ]+]] = stablehlo.convert %arg2 : (tensor<16xf32>) -> tensor<16xbf16>
// CHECK-NEXT: %[[B:[^ ]+]] = stablehlo.broadcast_in_dim %[[BL]], dims = [1] : (tensor<16xbf16>) -> tensor<4x16xbf16>
// CHECK-NEXT: %[[A:[^ ]+]] = stablehlo.add %[[D1]], %[[B]] : tensor<4x16xbf16>
// CHECK: %[[Z:[^ ]+]] = stablehlo.constant dense<0.000000e+00> : tensor<4x16xbf16>
// CHECK-NEXT: %[[R:[^ ]+]] = stablehlo.maximum %[[A]], %[[Z]] : tensor<4x16xbf16>
// CHECK-NEXT: %[[W2:[^ ]+]] = stablehlo.convert %arg3 : (tensor<16x2xf32>) -> tensor<16x2xbf16>
// CHECK-NEXT: %[[D2:[^ ]+]] = stablehlo.dot_general %[[R]], %[[W2]], {{.*}} -> tensor<4x2xbf16>
// CHECK-NEXT: %[[F:[^ ]+]] = stablehlo.convert %[[D2]] : (tensor<4x2xbf16>) -> tensor<4x2xf32>
// CHECK-NEXT: return %[[F]] : tensor<4x2xf32>
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

// Softmax stays f32: the reductions take the scores widened once (one convert
// shared by the max and the subtraction), and the subtraction meets the f32
// maximum (a computed value does not adapt), so exp, the sum and the division
// are f32 too.
// CHECK-LABEL: func.func public @softmax
// CHECK: %[[S:[^ ]+]] = stablehlo.dot_general {{.*}} -> tensor<4x4xbf16>
// CHECK: %[[SF:[^ ]+]] = stablehlo.convert %[[S]] : (tensor<4x4xbf16>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[M:[^ ]+]] = stablehlo.reduce(%[[SF]] init: {{.*}}) applies stablehlo.maximum across dimensions = [1] : (tensor<4x4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT: %[[MB:[^ ]+]] = stablehlo.broadcast_in_dim %[[M]], dims = [0] : (tensor<4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[D:[^ ]+]] = stablehlo.subtract %[[SF]], %[[MB]] : tensor<4x4xf32>
// CHECK-NEXT: %[[E:[^ ]+]] = stablehlo.exponential %[[D]] : tensor<4x4xf32>
// CHECK: stablehlo.reduce(%[[E]] init: {{.*}}) applies stablehlo.add across dimensions = [1] : (tensor<4x4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK: stablehlo.divide %[[E]], {{.*}} : tensor<4x4xf32>
// CHECK-NOT: bf16
func.func public @softmax(%q: tensor<4x8xf32>, %k: tensor<8x4xf32>) -> tensor<4x4xf32> {
  %s = stablehlo.dot_general %q, %k, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %m = stablehlo.reduce(%s init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<4x4xf32>, tensor<f32>) -> tensor<4xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<4xf32>) -> tensor<4x4xf32>
  %d = stablehlo.subtract %s, %mb : tensor<4x4xf32>
  %e = stablehlo.exponential %d : tensor<4x4xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %sum = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<4x4xf32>, tensor<f32>) -> tensor<4xf32>
  %sb = stablehlo.broadcast_in_dim %sum, dims = [0] : (tensor<4xf32>) -> tensor<4x4xf32>
  %p = stablehlo.divide %e, %sb : tensor<4x4xf32>
  func.return %p : tensor<4x4xf32>
}

// -----

// No convert ping-pong: the product reads the bf16 argument behind
// convert(bf16 -> f32), and the program's convert to bf16 of the tanh (already
// bf16) disappears.
// CHECK-LABEL: func.func public @no_ping_pong
// CHECK-NEXT: stablehlo.convert %arg0
// CHECK-NEXT: %[[W:[^ ]+]] = stablehlo.convert %arg1 : (tensor<8x4xf32>) -> tensor<8x4xbf16>
// CHECK-NEXT: %[[D:[^ ]+]] = stablehlo.dot_general %arg0, %[[W]], {{.*}} -> tensor<4x4xbf16>
// CHECK-NEXT: %[[T:[^ ]+]] = stablehlo.tanh %[[D]] : tensor<4x4xbf16>
// CHECK-NEXT: return %[[T]] : tensor<4x4xbf16>
func.func public @no_ping_pong(%a: tensor<4x8xbf16>, %b: tensor<8x4xf32>) -> tensor<4x4xbf16> {
  %0 = stablehlo.convert %a : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  %1 = stablehlo.dot_general %0, %b, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %2 = stablehlo.tanh %1 : tensor<4x4xf32>
  %3 = stablehlo.convert %2 : (tensor<4x4xf32>) -> tensor<4x4xbf16>
  func.return %3 : tensor<4x4xbf16>
}

// -----

// Inside a loop body: the carried f32 value is converted there, the bf16
// product computed outside is used as it is, and the body returns what the
// loop carries (f32).
// CHECK-LABEL: func.func public @loop
// CHECK: %[[H:[^ ]+]] = stablehlo.dot_general {{.*}} -> tensor<4x4xbf16>
// CHECK: } do {
// CHECK-NEXT: %[[A:[^ ]+]] = stablehlo.convert %iterArg_0 : (tensor<4x4xf32>) -> tensor<4x4xbf16>
// CHECK-NEXT: %[[Y:[^ ]+]] = stablehlo.dot_general %[[A]], %[[H]], {{.*}} -> tensor<4x4xbf16>
// CHECK-NEXT: %[[Z:[^ ]+]] = stablehlo.add %[[Y]], %[[H]] : tensor<4x4xbf16>
// CHECK: %[[ZF:[^ ]+]] = stablehlo.convert %[[Z]] : (tensor<4x4xbf16>) -> tensor<4x4xf32>
// CHECK-NEXT: stablehlo.return %{{[^ ]+}}, %[[ZF]] : tensor<i32>, tensor<4x4xf32>
func.func public @loop(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %h = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %i0 = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %i0, %a = %x) : tensor<i32>, tensor<4x4xf32>
  cond {
    %n = stablehlo.constant dense<3> : tensor<i32>
    %p = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %y = stablehlo.dot_general %a, %h, contracting_dims = [1] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %z = stablehlo.add %y, %h : tensor<4x4xf32>
    %one = stablehlo.constant dense<1> : tensor<i32>
    %j = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %j, %z : tensor<i32>, tensor<4x4xf32>
  }
  func.return %r#1 : tensor<4x4xf32>
}
