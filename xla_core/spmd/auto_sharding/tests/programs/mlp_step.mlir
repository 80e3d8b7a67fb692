module @jit__mlp attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<16x256xf32>, %arg1: tensor<16x256xf32>, %arg2: tensor<256x1024xf32>, %arg3: tensor<1024x256xf32>) -> (tensor<f32> {jax.result_info = "result[0]"}, tensor<256x1024xf32> {jax.result_info = "result[1][0]"}, tensor<1024x256xf32> {jax.result_info = "result[1][1]"}) {
    %0 = stablehlo.dot_general %arg0, %arg2, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<16x256xf32>, tensor<256x1024xf32>) -> tensor<16x1024xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<16x1024xf32>
    %2 = stablehlo.maximum %0, %1 : tensor<16x1024xf32>
    %3 = stablehlo.compare EQ, %0, %2, FLOAT : (tensor<16x1024xf32>, tensor<16x1024xf32>) -> tensor<16x1024xi1>
    %cst_0 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %4 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<16x1024xf32>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %5 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<16x1024xf32>
    %6 = stablehlo.select %3, %4, %5 : tensor<16x1024xi1>, tensor<16x1024xf32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %7 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<16x1024xf32>
    %8 = stablehlo.compare EQ, %7, %2, FLOAT : (tensor<16x1024xf32>, tensor<16x1024xf32>) -> tensor<16x1024xi1>
    %cst_3 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %9 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<16x1024xf32>
    %cst_4 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %10 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<16x1024xf32>
    %11 = stablehlo.select %8, %9, %10 : tensor<16x1024xi1>, tensor<16x1024xf32>
    %12 = stablehlo.divide %6, %11 : tensor<16x1024xf32>
    %13 = stablehlo.dot_general %2, %arg3, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<16x1024xf32>, tensor<1024x256xf32>) -> tensor<16x256xf32>
    %14 = stablehlo.subtract %13, %arg1 : tensor<16x256xf32>
    %15 = stablehlo.multiply %14, %14 : tensor<16x256xf32>
    %cst_5 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %16 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<16x256xf32>
    %17 = stablehlo.multiply %16, %14 : tensor<16x256xf32>
    %cst_6 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %18 = stablehlo.reduce(%15 init: %cst_6) applies stablehlo.add across dimensions = [0, 1] : (tensor<16x256xf32>, tensor<f32>) -> tensor<f32>
    %cst_7 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %19 = stablehlo.multiply %cst_7, %18 : tensor<f32>
    %cst_8 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %cst_9 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %20 = stablehlo.multiply %cst_8, %cst_9 : tensor<f32>
    %21 = stablehlo.broadcast_in_dim %20, dims = [] : (tensor<f32>) -> tensor<16x256xf32>
    %22 = stablehlo.multiply %21, %17 : tensor<16x256xf32>
    %23 = stablehlo.dot_general %22, %2, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<16x256xf32>, tensor<16x1024xf32>) -> tensor<256x1024xf32>
    %24 = stablehlo.transpose %23, dims = [1, 0] : (tensor<256x1024xf32>) -> tensor<1024x256xf32>
    %25 = stablehlo.dot_general %22, %arg3, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<16x256xf32>, tensor<1024x256xf32>) -> tensor<16x1024xf32>
    %26 = stablehlo.multiply %25, %12 : tensor<16x1024xf32>
    %27 = stablehlo.dot_general %26, %arg0, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<16x1024xf32>, tensor<16x256xf32>) -> tensor<1024x256xf32>
    %28 = stablehlo.transpose %27, dims = [1, 0] : (tensor<1024x256xf32>) -> tensor<256x1024xf32>
    return %19, %28, %24 : tensor<f32>, tensor<256x1024xf32>, tensor<1024x256xf32>
  }
}
