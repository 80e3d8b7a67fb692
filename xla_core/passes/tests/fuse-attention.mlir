// RUN: openhlo opt %s --split-input-file --passes=fuse-attention,dce | filecheck %s

// jax.nn.dot_product_attention(is_causal=True) with grouped-query heads (4 query heads,
// 2 key/value heads), as JAX lowers it (after inline and canonicalize): q is reshaped to
// [B, T, Hkv, G, D], the mask is an iota comparison, the fill the large finite negative.
// CHECK-LABEL: func.func public @main
// CHECK: %[[Q:[^ ]+]] = stablehlo.transpose %{{.*}}, dims = [0, 2, 3, 1, 4] : (tensor<1x3x2x2x8xf32>) -> tensor<1x2x2x3x8xf32>
// CHECK: %[[K:[^ ]+]] = stablehlo.transpose %arg1, dims = [0, 2, 1, 3] : (tensor<1x5x2x8xf32>) -> tensor<1x2x5x8xf32>
// CHECK: %[[V:[^ ]+]] = stablehlo.transpose %arg2, dims = [0, 2, 1, 3] : (tensor<1x5x2x8xf32>) -> tensor<1x2x5x8xf32>
// CHECK: %[[QC:[^ ]+]] = stablehlo.reshape %[[Q]] : (tensor<1x2x2x3x8xf32>) -> tensor<1x4x3x8xf32>
// CHECK: %[[A:[^ ]+]] = stablehlo.composite "openhlo.attention" %[[QC]], %[[K]], %[[V]] {composite_attributes = {causal = true, fill = -2.381976325057654E+38 : f64, has_bias = false, has_mask = false, scale = 0.35355338454246521 : f64}, decomposition = @[[DEC:attention_[0-9a-f]+]]} : (tensor<1x4x3x8xf32>, tensor<1x2x5x8xf32>, tensor<1x2x5x8xf32>) -> tensor<1x4x3x8xf32>
// CHECK: %[[S:[^ ]+]] = stablehlo.reshape %[[A]] : (tensor<1x4x3x8xf32>) -> tensor<1x2x2x3x8xf32>
// CHECK: %[[O:[^ ]+]] = stablehlo.transpose %[[S]], dims = [0, 1, 4, 2, 3] : (tensor<1x2x2x3x8xf32>) -> tensor<1x2x8x2x3xf32>
// CHECK: stablehlo.transpose %[[O]], dims = [3, 0, 4, 1, 2]
// CHECK-NOT: stablehlo.exponential
// CHECK: return
// The decomposition is the math again, on the composite's layout.
// CHECK: func.func private @[[DEC]]
// CHECK: stablehlo.exponential
func.func public @main(%arg0: tensor<1x3x4x8xf32>, %arg1: tensor<1x5x2x8xf32>, %arg2: tensor<1x5x2x8xf32>) -> tensor<1x3x4x8xf32> {
  %0 = stablehlo.reshape %arg0 : (tensor<1x3x4x8xf32>) -> tensor<1x3x2x2x8xf32>
  %1 = stablehlo.dot_general %0, %arg1, batching_dims = [0, 2] x [0, 2], contracting_dims = [4] x [3] : (tensor<1x3x2x2x8xf32>, tensor<1x5x2x8xf32>) -> tensor<1x2x3x2x5xf32>
  %cst = stablehlo.constant dense<0.353553385> : tensor<f32>
  %2 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<1x2x3x2x5xf32>
  %3 = stablehlo.multiply %1, %2 : tensor<1x2x3x2x5xf32>
  %c = stablehlo.constant dense<true> : tensor<i1>
  %4 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i1>) -> tensor<1x2x3x5xi1>
  %5 = stablehlo.iota dim = 0 : tensor<3x5xi32>
  %c_0 = stablehlo.constant dense<0> : tensor<i32>
  %6 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<i32>) -> tensor<3x5xi32>
  %7 = stablehlo.add %5, %6 : tensor<3x5xi32>
  %8 = stablehlo.iota dim = 1 : tensor<3x5xi32>
  %9 = stablehlo.compare GE, %7, %8, SIGNED : (tensor<3x5xi32>, tensor<3x5xi32>) -> tensor<3x5xi1>
  %10 = stablehlo.reshape %9 : (tensor<3x5xi1>) -> tensor<1x1x3x5xi1>
  %11 = stablehlo.broadcast_in_dim %10, dims = [0, 1, 2, 3] : (tensor<1x1x3x5xi1>) -> tensor<1x2x3x5xi1>
  %12 = stablehlo.and %11, %4 : tensor<1x2x3x5xi1>
  %cst_1 = stablehlo.constant dense<-2.38197633E+38> : tensor<f32>
  %13 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<1x2x3x5xf32>
  %14 = stablehlo.broadcast_in_dim %12, dims = [1, 2, 3, 4] : (tensor<1x2x3x5xi1>) -> tensor<2x1x2x3x5xi1>
  %15 = stablehlo.broadcast_in_dim %13, dims = [1, 2, 3, 4] : (tensor<1x2x3x5xf32>) -> tensor<2x1x2x3x5xf32>
  %16 = stablehlo.transpose %3, dims = [3, 0, 1, 2, 4] : (tensor<1x2x3x2x5xf32>) -> tensor<2x1x2x3x5xf32>
  %17 = stablehlo.select %14, %16, %15 : tensor<2x1x2x3x5xi1>, tensor<2x1x2x3x5xf32>
  %cst_2 = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %18 = stablehlo.reduce(%17 init: %cst_2) applies stablehlo.maximum across dimensions = [4] : (tensor<2x1x2x3x5xf32>, tensor<f32>) -> tensor<2x1x2x3xf32>
  %19 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<2x1x2x3xf32>
  %20 = stablehlo.maximum %18, %19 : tensor<2x1x2x3xf32>
  %21 = stablehlo.reshape %20 : (tensor<2x1x2x3xf32>) -> tensor<2x1x2x3x1xf32>
  %22 = stablehlo.broadcast_in_dim %21, dims = [0, 1, 2, 3, 4] : (tensor<2x1x2x3x1xf32>) -> tensor<2x1x2x3x5xf32>
  %23 = stablehlo.subtract %17, %22 : tensor<2x1x2x3x5xf32>
  %24 = stablehlo.exponential %23 : tensor<2x1x2x3x5xf32>
  %cst_4 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %25 = stablehlo.reduce(%24 init: %cst_4) applies stablehlo.add across dimensions = [4] : (tensor<2x1x2x3x5xf32>, tensor<f32>) -> tensor<2x1x2x3xf32>
  %26 = stablehlo.reshape %25 : (tensor<2x1x2x3xf32>) -> tensor<2x1x2x3x1xf32>
  %27 = stablehlo.broadcast_in_dim %26, dims = [0, 1, 2, 3, 4] : (tensor<2x1x2x3x1xf32>) -> tensor<2x1x2x3x5xf32>
  %28 = stablehlo.divide %24, %27 : tensor<2x1x2x3x5xf32>
  %29 = stablehlo.dot_general %arg2, %28, batching_dims = [0, 2] x [1, 2], contracting_dims = [1] x [4] : (tensor<1x5x2x8xf32>, tensor<2x1x2x3x5xf32>) -> tensor<1x2x8x2x3xf32>
  %30 = stablehlo.transpose %29, dims = [3, 0, 4, 1, 2] : (tensor<1x2x8x2x3xf32>) -> tensor<2x1x3x2x8xf32>
  %31 = stablehlo.transpose %30, dims = [1, 2, 3, 0, 4] : (tensor<2x1x3x2x8xf32>) -> tensor<1x3x2x2x8xf32>
  %32 = stablehlo.reshape %31 : (tensor<1x3x2x2x8xf32>) -> tensor<1x3x4x8xf32>
  func.return %32 : tensor<1x3x4x8xf32>
}

// -----

// The hand-written einsum + softmax (JAX, after constant folding): q k^T / sqrt(d) + bias
// of [L, S], softmax, @ v. The bias keeps its broadcast dims as unit dims.
// CHECK-LABEL: func.func public @main
// CHECK-NEXT: %[[B:[^ ]+]] = stablehlo.reshape %arg3 : (tensor<5x7xf32>) -> tensor<1x1x5x7xf32>
// CHECK-NEXT: %[[A:[^ ]+]] = stablehlo.composite "openhlo.attention" %arg0, %arg1, %arg2, %[[B]] {composite_attributes = {causal = false, fill = 0xFFF0000000000000 : f64, has_bias = true, has_mask = false, scale = 0.35355339664408242 : f64}, decomposition = @{{attention_[0-9a-f]+}}} : (tensor<2x3x5x8xf32>, tensor<2x3x7x8xf32>, tensor<2x3x7x8xf32>, tensor<1x1x5x7xf32>) -> tensor<2x3x5x8xf32>
// CHECK-NEXT: return %[[A]]
func.func public @main(%arg0: tensor<2x3x5x8xf32>, %arg1: tensor<2x3x7x8xf32>, %arg2: tensor<2x3x7x8xf32>, %arg3: tensor<5x7xf32>) -> tensor<2x3x5x8xf32> {
  %0 = stablehlo.dot_general %arg0, %arg1, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [3] : (tensor<2x3x5x8xf32>, tensor<2x3x7x8xf32>) -> tensor<2x3x5x7xf32>
  %cst = stablehlo.constant dense<2.82842708> : tensor<f32>
  %1 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x3x5x7xf32>
  %2 = stablehlo.divide %0, %1 : tensor<2x3x5x7xf32>
  %3 = stablehlo.reshape %arg3 : (tensor<5x7xf32>) -> tensor<1x1x5x7xf32>
  %4 = stablehlo.broadcast_in_dim %3, dims = [0, 1, 2, 3] : (tensor<1x1x5x7xf32>) -> tensor<2x3x5x7xf32>
  %5 = stablehlo.add %2, %4 : tensor<2x3x5x7xf32>
  %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %6 = stablehlo.reduce(%5 init: %cst_0) applies stablehlo.maximum across dimensions = [3] : (tensor<2x3x5x7xf32>, tensor<f32>) -> tensor<2x3x5xf32>
  %9 = stablehlo.reshape %6 : (tensor<2x3x5xf32>) -> tensor<2x3x5x1xf32>
  %10 = stablehlo.broadcast_in_dim %9, dims = [0, 1, 2, 3] : (tensor<2x3x5x1xf32>) -> tensor<2x3x5x7xf32>
  %11 = stablehlo.subtract %5, %10 : tensor<2x3x5x7xf32>
  %12 = stablehlo.exponential %11 : tensor<2x3x5x7xf32>
  %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %13 = stablehlo.reduce(%12 init: %cst_2) applies stablehlo.add across dimensions = [3] : (tensor<2x3x5x7xf32>, tensor<f32>) -> tensor<2x3x5xf32>
  %14 = stablehlo.reshape %13 : (tensor<2x3x5xf32>) -> tensor<2x3x5x1xf32>
  %15 = stablehlo.broadcast_in_dim %14, dims = [0, 1, 2, 3] : (tensor<2x3x5x1xf32>) -> tensor<2x3x5x7xf32>
  %16 = stablehlo.divide %12, %15 : tensor<2x3x5x7xf32>
  %17 = stablehlo.dot_general %16, %arg2, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2] : (tensor<2x3x5x7xf32>, tensor<2x3x7x8xf32>) -> tensor<2x3x5x8xf32>
  func.return %17 : tensor<2x3x5x8xf32>
}

// -----

// A softmax that feeds no second dot stays as it is; so does one whose logits are read
// elsewhere (the scores are needed whole).
// CHECK-LABEL: func.func public @main
// CHECK-NOT: composite
// CHECK: stablehlo.exponential
// CHECK: stablehlo.exponential
// CHECK-NOT: composite
func.func public @main(%arg0: tensor<4x6xf32>, %arg1: tensor<4x8xf32>, %arg2: tensor<6x8xf32>) -> (tensor<4x6xf32>, tensor<4x8xf32>, tensor<4x6xf32>) {
  %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.maximum across dimensions = [1] : (tensor<4x6xf32>, tensor<f32>) -> tensor<4xf32>
  %3 = stablehlo.reshape %0 : (tensor<4xf32>) -> tensor<4x1xf32>
  %4 = stablehlo.broadcast_in_dim %3, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x6xf32>
  %5 = stablehlo.subtract %arg0, %4 : tensor<4x6xf32>
  %6 = stablehlo.exponential %5 : tensor<4x6xf32>
  %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %7 = stablehlo.reduce(%6 init: %cst_1) applies stablehlo.add across dimensions = [1] : (tensor<4x6xf32>, tensor<f32>) -> tensor<4xf32>
  %8 = stablehlo.reshape %7 : (tensor<4xf32>) -> tensor<4x1xf32>
  %9 = stablehlo.broadcast_in_dim %8, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x6xf32>
  %10 = stablehlo.divide %6, %9 : tensor<4x6xf32>
  %s = stablehlo.dot_general %arg1, %arg2, contracting_dims = [1] x [1] : (tensor<4x8xf32>, tensor<6x8xf32>) -> tensor<4x6xf32>
  %m = stablehlo.reduce(%s init: %cst) applies stablehlo.maximum across dimensions = [1] : (tensor<4x6xf32>, tensor<f32>) -> tensor<4xf32>
  %m1 = stablehlo.reshape %m : (tensor<4xf32>) -> tensor<4x1xf32>
  %m2 = stablehlo.broadcast_in_dim %m1, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x6xf32>
  %d = stablehlo.subtract %s, %m2 : tensor<4x6xf32>
  %e = stablehlo.exponential %d : tensor<4x6xf32>
  %z = stablehlo.reduce(%e init: %cst_1) applies stablehlo.add across dimensions = [1] : (tensor<4x6xf32>, tensor<f32>) -> tensor<4xf32>
  %z1 = stablehlo.reshape %z : (tensor<4xf32>) -> tensor<4x1xf32>
  %z2 = stablehlo.broadcast_in_dim %z1, dims = [0, 1] : (tensor<4x1xf32>) -> tensor<4x6xf32>
  %p = stablehlo.divide %e, %z2 : tensor<4x6xf32>
  %o = stablehlo.dot_general %p, %arg2, contracting_dims = [1] x [0] : (tensor<4x6xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
  func.return %10, %o, %s : tensor<4x6xf32>, tensor<4x8xf32>, tensor<4x6xf32>
}

// -----

// PyTorch's spelling (after cpu-opt): 3-D batched matmuls on [B*H, L, D] with reshapes
// around them, `q @ k^T * 0.5 + mask`, softmax, `@ v`. The batch dims split after q.k and
// merged before p.v are the composite's leading dims; q and v are read from before the
// reshapes.
// CHECK-LABEL: func.func public @main
// CHECK: %[[B:[^ ]+]] = stablehlo.reshape %arg3 : (tensor<3x5xf32>) -> tensor<1x1x3x5xf32>
// CHECK: %[[A:[^ ]+]] = stablehlo.composite "openhlo.attention" %arg0, %{{[^ ]+}}, %arg2, %[[B]] {composite_attributes = {causal = false, fill = 0xFFF0000000000000 : f64, has_bias = true, has_mask = false, scale = 5.000000e-01 : f64}, decomposition = @{{attention_[0-9a-f]+}}} : (tensor<1x2x3x4xf32>, tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32>, tensor<1x1x3x5xf32>) -> tensor<1x2x3x4xf32>
// CHECK: %[[M:[^ ]+]] = stablehlo.reshape %[[A]] : (tensor<1x2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK: %[[O:[^ ]+]] = stablehlo.reshape %[[M]] : (tensor<2x3x4xf32>) -> tensor<1x2x3x4xf32>
// CHECK-NEXT: return %[[O]]
func.func public @main(%arg0: tensor<1x2x3x4xf32>, %arg1: tensor<1x2x5x4xf32>, %arg2: tensor<1x2x5x4xf32>, %arg3: tensor<3x5xf32>) -> tensor<1x2x3x4xf32> {
  %0 = stablehlo.transpose %arg1, dims = [0, 1, 3, 2] : (tensor<1x2x5x4xf32>) -> tensor<1x2x4x5xf32>
  %1 = stablehlo.reshape %arg0 : (tensor<1x2x3x4xf32>) -> tensor<2x3x4xf32>
  %2 = stablehlo.reshape %0 : (tensor<1x2x4x5xf32>) -> tensor<2x4x5xf32>
  %3 = stablehlo.dot_general %1, %2, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  %4 = stablehlo.reshape %3 : (tensor<2x3x5xf32>) -> tensor<1x2x3x5xf32>
  %cst = stablehlo.constant dense<5.000000e-01> : tensor<1x2x3x5xf32>
  %5 = stablehlo.multiply %4, %cst : tensor<1x2x3x5xf32>
  %6 = stablehlo.broadcast_in_dim %arg3, dims = [2, 3] : (tensor<3x5xf32>) -> tensor<1x2x3x5xf32>
  %7 = stablehlo.add %5, %6 : tensor<1x2x3x5xf32>
  %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %8 = stablehlo.reduce(%7 init: %cst_0) applies stablehlo.maximum across dimensions = [3] : (tensor<1x2x3x5xf32>, tensor<f32>) -> tensor<1x2x3xf32>
  %9 = stablehlo.reshape %8 : (tensor<1x2x3xf32>) -> tensor<1x2x3x1xf32>
  %10 = stablehlo.broadcast_in_dim %9, dims = [0, 1, 2, 3] : (tensor<1x2x3x1xf32>) -> tensor<1x2x3x5xf32>
  %11 = stablehlo.subtract %7, %10 : tensor<1x2x3x5xf32>
  %12 = stablehlo.exponential %11 : tensor<1x2x3x5xf32>
  %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %13 = stablehlo.reduce(%12 init: %cst_1) applies stablehlo.add across dimensions = [3] : (tensor<1x2x3x5xf32>, tensor<f32>) -> tensor<1x2x3xf32>
  %14 = stablehlo.reshape %13 : (tensor<1x2x3xf32>) -> tensor<1x2x3x1xf32>
  %15 = stablehlo.broadcast_in_dim %14, dims = [0, 1, 2, 3] : (tensor<1x2x3x1xf32>) -> tensor<1x2x3x5xf32>
  %16 = stablehlo.divide %12, %15 : tensor<1x2x3x5xf32>
  %17 = stablehlo.reshape %16 : (tensor<1x2x3x5xf32>) -> tensor<2x3x5xf32>
  %18 = stablehlo.reshape %arg2 : (tensor<1x2x5x4xf32>) -> tensor<2x5x4xf32>
  %19 = stablehlo.dot_general %17, %18, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<2x3x5xf32>, tensor<2x5x4xf32>) -> tensor<2x3x4xf32>
  %20 = stablehlo.reshape %19 : (tensor<2x3x4xf32>) -> tensor<1x2x3x4xf32>
  func.return %20 : tensor<1x2x3x4xf32>
}

// -----

// jax.nn.dot_product_attention at batch 1 without a mask, after cpu-opt: JAX's transposes of
// the size-1 group dim became reshapes, so the softmax's max reads the logits and its
// subtract a reshape of them, and the second dot batches over the unit dims in another order.
// CHECK-LABEL: func.func public @main
// CHECK: stablehlo.composite "openhlo.attention"
// CHECK-SAME: causal = false
// CHECK-SAME: scale = 5.000000e-01
// CHECK-NOT: stablehlo.exponential
// CHECK: return
func.func public @main(%arg0: tensor<1x6x2x4xf32>, %arg1: tensor<1x6x2x4xf32>, %arg2: tensor<1x6x2x4xf32>) -> (tensor<1x6x2x4xf32>) {
  %0 = stablehlo.reshape %arg0 : (tensor<1x6x2x4xf32>) -> tensor<1x6x2x1x4xf32>
  %1 = stablehlo.dot_general %0, %arg1, batching_dims = [0, 2] x [0, 2], contracting_dims = [4] x [3], precision = [DEFAULT, DEFAULT] : (tensor<1x6x2x1x4xf32>, tensor<1x6x2x4xf32>) -> tensor<1x2x6x1x6xf32>
  %cst = stablehlo.constant dense<5.000000e-01> : tensor<1x2x6x1x6xf32>
  %2 = stablehlo.multiply %1, %cst : tensor<1x2x6x1x6xf32>
  %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %3 = stablehlo.reduce(%2 init: %cst_0) applies stablehlo.maximum across dimensions = [4] : (tensor<1x2x6x1x6xf32>, tensor<f32>) -> tensor<1x2x6x1xf32>
  %4 = stablehlo.reshape %3 : (tensor<1x2x6x1xf32>) -> tensor<1x1x2x6x1xf32>
  %5 = stablehlo.reshape %2 : (tensor<1x2x6x1x6xf32>) -> tensor<1x1x2x6x6xf32>
  %6 = stablehlo.broadcast_in_dim %4, dims = [0, 1, 2, 3, 4] : (tensor<1x1x2x6x1xf32>) -> tensor<1x1x2x6x6xf32>
  %7 = stablehlo.subtract %5, %6 : tensor<1x1x2x6x6xf32>
  %8 = stablehlo.exponential %7 : tensor<1x1x2x6x6xf32>
  %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %9 = stablehlo.reduce(%8 init: %cst_1) applies stablehlo.add across dimensions = [4] : (tensor<1x1x2x6x6xf32>, tensor<f32>) -> tensor<1x1x2x6xf32>
  %10 = stablehlo.reshape %9 : (tensor<1x1x2x6xf32>) -> tensor<1x1x2x6x1xf32>
  %11 = stablehlo.broadcast_in_dim %10, dims = [0, 1, 2, 3, 4] : (tensor<1x1x2x6x1xf32>) -> tensor<1x1x2x6x6xf32>
  %12 = stablehlo.divide %8, %11 : tensor<1x1x2x6x6xf32>
  %13 = stablehlo.dot_general %arg2, %12, batching_dims = [0, 2] x [1, 2], contracting_dims = [1] x [4], precision = [DEFAULT, DEFAULT] : (tensor<1x6x2x4xf32>, tensor<1x1x2x6x6xf32>) -> tensor<1x2x4x1x6xf32>
  %14 = stablehlo.transpose %13, dims = [3, 0, 4, 1, 2] : (tensor<1x2x4x1x6xf32>) -> tensor<1x1x6x2x4xf32>
  %15 = stablehlo.reshape %14 : (tensor<1x1x6x2x4xf32>) -> tensor<1x6x2x4xf32>
  return %15 : tensor<1x6x2x4xf32>
}

// -----

// jax.grad of it (with respect to q, k and v), after cpu-opt: the backward reads the
// softmax's exp, row sum and probabilities; both directions become composites, the forward
// with its row logsumexp, which the gradient reads with the forward's output.
// CHECK-LABEL: func.func public @main
// CHECK: %[[F:[^ ]+]]:2 = stablehlo.composite "openhlo.attention"
// CHECK: stablehlo.composite "openhlo.attention_grad" %{{.*}}, %[[F]]#0, %[[F]]#1, %{{[^ ]+}} {composite_attributes = {causal = false
// CHECK-NOT: stablehlo.exponential
// CHECK-NOT: stablehlo.dot_general
// CHECK: return
func.func public @main(%arg0: tensor<1x6x2x4xf32>, %arg1: tensor<1x6x2x4xf32>, %arg2: tensor<1x6x2x4xf32>, %arg3: tensor<1x6x2x4xf32>) -> (tensor<1x6x2x4xf32>, tensor<1x6x2x4xf32>, tensor<1x6x2x4xf32>) {
  %0 = stablehlo.reshape %arg0 : (tensor<1x6x2x4xf32>) -> tensor<1x6x2x1x4xf32>
  %1 = stablehlo.dot_general %0, %arg1, batching_dims = [0, 2] x [0, 2], contracting_dims = [4] x [3], precision = [DEFAULT, DEFAULT] : (tensor<1x6x2x1x4xf32>, tensor<1x6x2x4xf32>) -> tensor<1x2x6x1x6xf32>
  %cst = stablehlo.constant dense<5.000000e-01> : tensor<1x2x6x1x6xf32>
  %2 = stablehlo.multiply %1, %cst : tensor<1x2x6x1x6xf32>
  %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %3 = stablehlo.reduce(%2 init: %cst_0) applies stablehlo.maximum across dimensions = [4] : (tensor<1x2x6x1x6xf32>, tensor<f32>) -> tensor<1x2x6x1xf32>
  %4 = stablehlo.reshape %3 : (tensor<1x2x6x1xf32>) -> tensor<1x1x2x6x1xf32>
  %5 = stablehlo.reshape %2 : (tensor<1x2x6x1x6xf32>) -> tensor<1x1x2x6x6xf32>
  %6 = stablehlo.broadcast_in_dim %4, dims = [0, 1, 2, 3, 4] : (tensor<1x1x2x6x1xf32>) -> tensor<1x1x2x6x6xf32>
  %7 = stablehlo.subtract %5, %6 : tensor<1x1x2x6x6xf32>
  %8 = stablehlo.exponential %7 : tensor<1x1x2x6x6xf32>
  %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %9 = stablehlo.reduce(%8 init: %cst_1) applies stablehlo.add across dimensions = [4] : (tensor<1x1x2x6x6xf32>, tensor<f32>) -> tensor<1x1x2x6xf32>
  %10 = stablehlo.reshape %9 : (tensor<1x1x2x6xf32>) -> tensor<1x1x2x6x1xf32>
  %11 = stablehlo.broadcast_in_dim %10, dims = [0, 1, 2, 3, 4] : (tensor<1x1x2x6x1xf32>) -> tensor<1x1x2x6x6xf32>
  %12 = stablehlo.divide %8, %11 : tensor<1x1x2x6x6xf32>
  %13 = stablehlo.multiply %10, %10 : tensor<1x1x2x6x1xf32>
  %cst_2 = stablehlo.constant dense<1.000000e+00> : tensor<1x1x2x6x1xf32>
  %14 = stablehlo.divide %cst_2, %13 : tensor<1x1x2x6x1xf32>
  %15 = stablehlo.reshape %arg3 : (tensor<1x6x2x4xf32>) -> tensor<1x1x6x2x4xf32>
  %16 = stablehlo.dot_general %15, %arg2, batching_dims = [1, 3] x [0, 2], contracting_dims = [4] x [3], precision = [DEFAULT, DEFAULT] : (tensor<1x1x6x2x4xf32>, tensor<1x6x2x4xf32>) -> tensor<1x2x1x6x6xf32>
  %17 = stablehlo.reshape %16 : (tensor<1x2x1x6x6xf32>) -> tensor<1x1x2x6x6xf32>
  %18 = stablehlo.dot_general %15, %12, batching_dims = [1, 3] x [1, 2], contracting_dims = [0, 2] x [0, 3], precision = [DEFAULT, DEFAULT] : (tensor<1x1x6x2x4xf32>, tensor<1x1x2x6x6xf32>) -> tensor<1x2x4x6xf32>
  %19 = stablehlo.transpose %18, dims = [0, 3, 1, 2] : (tensor<1x2x4x6xf32>) -> tensor<1x6x2x4xf32>
  %20 = stablehlo.broadcast_in_dim %14, dims = [0, 1, 2, 3, 4] : (tensor<1x1x2x6x1xf32>) -> tensor<1x1x2x6x6xf32>
  %21 = stablehlo.multiply %17, %20 : tensor<1x1x2x6x6xf32>
  %22 = stablehlo.multiply %21, %8 : tensor<1x1x2x6x6xf32>
  %23 = stablehlo.reduce(%22 init: %cst_1) applies stablehlo.add across dimensions = [4] : (tensor<1x1x2x6x6xf32>, tensor<f32>) -> tensor<1x1x2x6xf32>
  %24 = stablehlo.reshape %23 : (tensor<1x1x2x6xf32>) -> tensor<1x1x2x6x1xf32>
  %25 = stablehlo.negate %24 : tensor<1x1x2x6x1xf32>
  %26 = stablehlo.divide %17, %11 : tensor<1x1x2x6x6xf32>
  %27 = stablehlo.reshape %25 : (tensor<1x1x2x6x1xf32>) -> tensor<2x6xf32>
  %cst_3 = stablehlo.constant dense<0.000000e+00> : tensor<2x6xf32>
  %28 = stablehlo.add %27, %cst_3 : tensor<2x6xf32>
  %29 = stablehlo.reshape %28 : (tensor<2x6xf32>) -> tensor<1x1x2x6xf32>
  %30 = stablehlo.broadcast_in_dim %29, dims = [0, 1, 2, 3] : (tensor<1x1x2x6xf32>) -> tensor<1x1x2x6x6xf32>
  %31 = stablehlo.add %26, %30 : tensor<1x1x2x6x6xf32>
  %32 = stablehlo.multiply %31, %8 : tensor<1x1x2x6x6xf32>
  %33 = stablehlo.reshape %32 : (tensor<1x1x2x6x6xf32>) -> tensor<1x2x6x1x6xf32>
  %34 = stablehlo.multiply %33, %cst : tensor<1x2x6x1x6xf32>
  %35 = stablehlo.dot_general %34, %0, batching_dims = [0, 1] x [0, 2], contracting_dims = [2, 3] x [1, 3], precision = [DEFAULT, DEFAULT] : (tensor<1x2x6x1x6xf32>, tensor<1x6x2x1x4xf32>) -> tensor<1x2x6x4xf32>
  %36 = stablehlo.transpose %35, dims = [0, 2, 1, 3] : (tensor<1x2x6x4xf32>) -> tensor<1x6x2x4xf32>
  %37 = stablehlo.dot_general %34, %arg1, batching_dims = [0, 1] x [0, 2], contracting_dims = [4] x [1], precision = [DEFAULT, DEFAULT] : (tensor<1x2x6x1x6xf32>, tensor<1x6x2x4xf32>) -> tensor<1x2x6x1x4xf32>
  %38 = stablehlo.transpose %37, dims = [0, 2, 1, 3, 4] : (tensor<1x2x6x1x4xf32>) -> tensor<1x6x2x1x4xf32>
  %39 = stablehlo.reshape %38 : (tensor<1x6x2x1x4xf32>) -> tensor<1x6x2x4xf32>
  return %39, %36, %19 : tensor<1x6x2x4xf32>, tensor<1x6x2x4xf32>, tensor<1x6x2x4xf32>
}
