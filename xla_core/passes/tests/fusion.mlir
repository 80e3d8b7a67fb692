// RUN: openhlo opt %s --split-input-file --passes=fusion{hardware=generic-cpu} | filecheck %s

// An elementwise chain becomes one loop fusion; the scalar constant is pulled in.
// CHECK-LABEL: func.func public @main
// CHECK-NEXT: %[[F:.+]] = stablehlo.composite "openhlo.fusion" %arg0, %arg1 {composite_attributes = {kind = "loop"}, decomposition = @fused_loop_0}
// CHECK-NEXT: return %[[F]]
// CHECK-LABEL: func.func private @fused_loop_0
// CHECK-NEXT: stablehlo.add %arg0, %arg1
// CHECK-NEXT: %[[C:.+]] = stablehlo.constant dense<2.000000e+00> : tensor<f32>
// CHECK-NEXT: stablehlo.broadcast_in_dim %[[C]]
// CHECK-NEXT: stablehlo.multiply
// CHECK-NEXT: stablehlo.exponential
// CHECK-NEXT: return
func.func public @main(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = stablehlo.add %x, %y : tensor<4x8xf32>
  %c = stablehlo.constant dense<2.0> : tensor<f32>
  %1 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
  %2 = stablehlo.multiply %0, %1 : tensor<4x8xf32>
  %3 = stablehlo.exponential %2 : tensor<4x8xf32>
  func.return %3 : tensor<4x8xf32>
}

// -----

// A bias broadcast and relu fuse with their add.
// CHECK-LABEL: func.func public @main
// CHECK-NEXT: stablehlo.composite "openhlo.fusion" %arg1, %arg0 {composite_attributes = {kind = "loop"}
// CHECK-NEXT: return
// CHECK-LABEL: func.func private @fused_loop_0(%arg0: tensor<8xf32>, %arg1: tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: stablehlo.broadcast_in_dim %arg0, dims = [1]
// CHECK-NEXT: stablehlo.add
// CHECK-NEXT: stablehlo.constant dense<0.000000e+00> : tensor<4x8xf32>
// CHECK-NEXT: stablehlo.maximum
// CHECK-NEXT: return
func.func public @main(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>
  %1 = stablehlo.add %x, %0 : tensor<4x8xf32>
  %z = stablehlo.constant dense<0.0> : tensor<4x8xf32>
  %2 = stablehlo.maximum %1, %z : tensor<4x8xf32>
  func.return %2 : tensor<4x8xf32>
}

// -----

// Softmax: both row reductions and the elementwise work around them, one fusion.
// CHECK-LABEL: func.func public @main
// CHECK-NEXT: stablehlo.composite "openhlo.fusion" %arg0 {composite_attributes = {kind = "reduction"}, decomposition = @fused_reduction_0} : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: return
// CHECK-LABEL: func.func private @fused_reduction_0
// CHECK: stablehlo.reduce{{.*}}applies stablehlo.maximum
// CHECK-NEXT: stablehlo.broadcast_in_dim
// CHECK-NEXT: stablehlo.subtract
// CHECK-NEXT: stablehlo.exponential
// CHECK-NEXT: stablehlo.reduce{{.*}}applies stablehlo.add
// CHECK-NEXT: stablehlo.broadcast_in_dim
// CHECK-NEXT: stablehlo.divide
// CHECK-NEXT: return
func.func public @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
  %1 = stablehlo.broadcast_in_dim %0, dims = [0] : (tensor<4xf32>) -> tensor<4x8xf32>
  %2 = stablehlo.subtract %x, %1 : tensor<4x8xf32>
  %3 = stablehlo.exponential %2 : tensor<4x8xf32>
  %4 = stablehlo.reduce(%3 init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
  %5 = stablehlo.broadcast_in_dim %4, dims = [0] : (tensor<4xf32>) -> tensor<4x8xf32>
  %6 = stablehlo.divide %3, %5 : tensor<4x8xf32>
  func.return %6 : tensor<4x8xf32>
}

// -----

// Layer norm whose mean is also returned: one multi-output reduction fusion.
// CHECK-LABEL: func.func public @main
// CHECK-NEXT: %[[F:.+]]:2 = stablehlo.composite "openhlo.fusion" %arg0, %arg1 {composite_attributes = {kind = "reduction"}, decomposition = @fused_reduction_0} : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4xf32>, tensor<4x8xf32>)
// CHECK-NEXT: return %[[F]]#1, %[[F]]#0
// CHECK-LABEL: func.func private @fused_reduction_0
// CHECK: stablehlo.reduce
// CHECK: stablehlo.reduce
// CHECK: stablehlo.rsqrt
// CHECK: return %1, %12 : tensor<4xf32>, tensor<4x8xf32>
func.func public @main(%x: tensor<4x8xf32>, %g: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %n = stablehlo.constant dense<8.0> : tensor<4xf32>
  %eps = stablehlo.constant dense<1.0e-5> : tensor<4xf32>
  %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
  %mean = stablehlo.divide %s, %n : tensor<4xf32>
  %mb = stablehlo.broadcast_in_dim %mean, dims = [0] : (tensor<4xf32>) -> tensor<4x8xf32>
  %c = stablehlo.subtract %x, %mb : tensor<4x8xf32>
  %sq = stablehlo.multiply %c, %c : tensor<4x8xf32>
  %v = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
  %var = stablehlo.divide %v, %n : tensor<4xf32>
  %ve = stablehlo.add %var, %eps : tensor<4xf32>
  %r = stablehlo.rsqrt %ve : tensor<4xf32>
  %rb = stablehlo.broadcast_in_dim %r, dims = [0] : (tensor<4xf32>) -> tensor<4x8xf32>
  %y = stablehlo.multiply %c, %rb : tensor<4x8xf32>
  %gb = stablehlo.broadcast_in_dim %g, dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>
  %out = stablehlo.multiply %y, %gb : tensor<4x8xf32>
  func.return %out, %mean : tensor<4x8xf32>, tensor<4xf32>
}

// -----

// Cross-entropy: log-sum-exp minus the label's logit (one-hot from iota), per row.
// CHECK-LABEL: func.func public @main
// CHECK-NEXT: stablehlo.composite "openhlo.fusion" %arg0, %arg1 {composite_attributes = {kind = "reduction"}{{.*}} -> tensor<4xf32>
// CHECK-NEXT: return
// CHECK-LABEL: func.func private @fused_reduction_0
// CHECK: stablehlo.reduce{{.*}}maximum
// CHECK: stablehlo.reduce{{.*}}add
// CHECK: stablehlo.log
// CHECK: stablehlo.iota
// CHECK: stablehlo.select
// CHECK: stablehlo.reduce{{.*}}add
// CHECK-NEXT: stablehlo.subtract
// CHECK-NEXT: return
func.func public @main(%logits: tensor<4x8xf32>, %labels: tensor<4xi32>) -> tensor<4xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.reduce(%logits init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<4xf32>) -> tensor<4x8xf32>
  %d = stablehlo.subtract %logits, %mb : tensor<4x8xf32>
  %e = stablehlo.exponential %d : tensor<4x8xf32>
  %se = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
  %lse = stablehlo.log %se : tensor<4xf32>
  %iota = stablehlo.iota dim = 1 : tensor<4x8xi32>
  %lb = stablehlo.broadcast_in_dim %labels, dims = [0] : (tensor<4xi32>) -> tensor<4x8xi32>
  %hot = stablehlo.compare EQ, %iota, %lb, SIGNED : (tensor<4x8xi32>, tensor<4x8xi32>) -> tensor<4x8xi1>
  %zb = stablehlo.broadcast_in_dim %zero, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
  %picked = stablehlo.select %hot, %d, %zb : tensor<4x8xi1>, tensor<4x8xf32>
  %p = stablehlo.reduce(%picked init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<4xf32>
  %loss = stablehlo.subtract %lse, %p : tensor<4xf32>
  func.return %loss : tensor<4xf32>
}

// -----

// dot + bias + relu: an output fusion; the dot's operands are parameters.
// CHECK-LABEL: func.func public @main
// CHECK-NEXT: stablehlo.composite "openhlo.fusion" %arg0, %arg1, %arg2 {composite_attributes = {kind = "output"}, decomposition = @fused_output_0}
// CHECK-NEXT: return
// CHECK-LABEL: func.func private @fused_output_0
// CHECK-NEXT: stablehlo.dot_general %arg0, %arg1
// CHECK-NEXT: stablehlo.broadcast_in_dim %arg2
// CHECK-NEXT: stablehlo.add
// CHECK-NEXT: stablehlo.constant
// CHECK-NEXT: stablehlo.broadcast_in_dim
// CHECK-NEXT: stablehlo.maximum
// CHECK-NEXT: return
func.func public @main(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %1 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<8xf32>) -> tensor<4x8xf32>
  %2 = stablehlo.add %0, %1 : tensor<4x8xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %zb = stablehlo.broadcast_in_dim %z, dims = [] : (tensor<f32>) -> tensor<4x8xf32>
  %3 = stablehlo.maximum %2, %zb : tensor<4x8xf32>
  func.return %3 : tensor<4x8xf32>
}

// -----

// Siblings reading the same operand merge into one multi-output loop fusion.
// CHECK-LABEL: func.func public @main
// CHECK-NEXT: %[[F:.+]]:2 = stablehlo.composite "openhlo.fusion" %arg0 {composite_attributes = {kind = "loop"}
// CHECK-NEXT: return %[[F]]#0, %[[F]]#1
// CHECK-LABEL: func.func private @fused_loop_0
// CHECK-NEXT: stablehlo.exponential
// CHECK-NEXT: stablehlo.negate
// CHECK-NEXT: stablehlo.log
// CHECK-NEXT: stablehlo.abs
// CHECK-NEXT: return
func.func public @main(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = stablehlo.exponential %x : tensor<4x8xf32>
  %1 = stablehlo.negate %0 : tensor<4x8xf32>
  %2 = stablehlo.log %x : tensor<4x8xf32>
  %3 = stablehlo.abs %2 : tensor<4x8xf32>
  func.return %1, %3 : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Refusals: exp feeds two dots (not fusible consumers), a prologue never goes
// into a dot, and an expensive row value is not recomputed per broadcast element.
// CHECK-LABEL: func.func public @main
// CHECK-NEXT: %[[LOG:.+]] = stablehlo.log %arg1
// CHECK-NEXT: %[[F:.+]]:2 = stablehlo.composite "openhlo.fusion" %arg0, %[[LOG]] {composite_attributes = {kind = "loop"}
// CHECK-NEXT: stablehlo.dot_general %[[F]]#0, %arg0
// CHECK-NEXT: stablehlo.dot_general %arg0, %[[F]]#0
// CHECK-NEXT: return
// CHECK-LABEL: func.func private @fused_loop_0
// CHECK-NEXT: stablehlo.exponential %arg0
// CHECK-NEXT: stablehlo.broadcast_in_dim %arg1
// CHECK-NEXT: stablehlo.add
// CHECK-NEXT: return
func.func public @main(%x: tensor<4x4xf32>, %v: tensor<4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %0 = stablehlo.exponential %x : tensor<4x4xf32>
  %1 = stablehlo.dot_general %0, %x, contracting_dims = [1] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %2 = stablehlo.dot_general %x, %0, contracting_dims = [1] x [0] : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %3 = stablehlo.log %v : tensor<4xf32>
  %4 = stablehlo.broadcast_in_dim %3, dims = [1] : (tensor<4xf32>) -> tensor<4x4xf32>
  %5 = stablehlo.add %4, %x : tensor<4x4xf32>
  func.return %1, %2, %5 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// Inside a while body ops fuse in place; the loop itself is never fused.
// CHECK-LABEL: func.func public @main
// CHECK: stablehlo.while
// CHECK: cond {
// CHECK-NOT: stablehlo.composite
// CHECK: } do {
// CHECK: stablehlo.subtract
// CHECK-NEXT: %[[F:.+]] = stablehlo.composite "openhlo.fusion" %iterArg_0 {composite_attributes = {kind = "loop"}, decomposition = @fused_loop_0}
// CHECK-NEXT: stablehlo.return %{{.+}}, %[[F]]
// CHECK: stablehlo.negate
// CHECK-LABEL: func.func private @fused_loop_0
// CHECK-NEXT: stablehlo.exponential
// CHECK-NEXT: stablehlo.constant dense<5.000000e-01> : tensor<4xf32>
// CHECK-NEXT: stablehlo.multiply
func.func public @main(%x: tensor<4xf32>, %n: tensor<i32>) -> tensor<4xf32> {
  %r:2 = stablehlo.while(%i = %n, %a = %x) : tensor<i32>, tensor<4xf32>
  cond {
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %p = stablehlo.compare GT, %i, %c0 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %c1 = stablehlo.constant dense<1> : tensor<i32>
    %j = stablehlo.subtract %i, %c1 : tensor<i32>
    %e = stablehlo.exponential %a : tensor<4xf32>
    %h = stablehlo.constant dense<0.5> : tensor<4xf32>
    %b = stablehlo.multiply %e, %h : tensor<4xf32>
    stablehlo.return %j, %b : tensor<i32>, tensor<4xf32>
  }
  %out = stablehlo.negate %r#1 : tensor<4xf32>
  func.return %out : tensor<4xf32>
}
