module @jit__cnn attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<1024x8x8x4xf32>, %arg1: tensor<1024x32xf32>, %arg2: tensor<3x3x4x8xf32>, %arg3: tensor<8x32xf32>) -> (tensor<f32> {jax.result_info = "result[0]"}, tensor<3x3x4x8xf32> {jax.result_info = "result[1][0]"}, tensor<8x32xf32> {jax.result_info = "result[1][1]"}) {
    %0 = stablehlo.convolution(%arg0, %arg2) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1], reverse = [false, false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<1024x8x8x4xf32>, tensor<3x3x4x8xf32>) -> tensor<1024x8x8x8xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<1024x8x8x8xf32>
    %2 = stablehlo.maximum %0, %1 : tensor<1024x8x8x8xf32>
    %3 = stablehlo.compare EQ, %0, %2, FLOAT : (tensor<1024x8x8x8xf32>, tensor<1024x8x8x8xf32>) -> tensor<1024x8x8x8xi1>
    %cst_0 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %4 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<1024x8x8x8xf32>
    %cst_1 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %5 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<1024x8x8x8xf32>
    %6 = stablehlo.select %3, %4, %5 : tensor<1024x8x8x8xi1>, tensor<1024x8x8x8xf32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %7 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<1024x8x8x8xf32>
    %8 = stablehlo.compare EQ, %7, %2, FLOAT : (tensor<1024x8x8x8xf32>, tensor<1024x8x8x8xf32>) -> tensor<1024x8x8x8xi1>
    %cst_3 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %9 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<1024x8x8x8xf32>
    %cst_4 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %10 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<1024x8x8x8xf32>
    %11 = stablehlo.select %8, %9, %10 : tensor<1024x8x8x8xi1>, tensor<1024x8x8x8xf32>
    %12 = stablehlo.divide %6, %11 : tensor<1024x8x8x8xf32>
    %cst_5 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %13 = stablehlo.reduce(%2 init: %cst_5) applies stablehlo.add across dimensions = [1, 2] : (tensor<1024x8x8x8xf32>, tensor<f32>) -> tensor<1024x8xf32>
    %cst_6 = stablehlo.constant dense<6.400000e+01> : tensor<f32>
    %14 = stablehlo.broadcast_in_dim %cst_6, dims = [] : (tensor<f32>) -> tensor<1024x8xf32>
    %15 = stablehlo.divide %13, %14 : tensor<1024x8xf32>
    %16 = stablehlo.dot_general %15, %arg3, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<1024x8xf32>, tensor<8x32xf32>) -> tensor<1024x32xf32>
    %17 = stablehlo.subtract %16, %arg1 : tensor<1024x32xf32>
    %18 = stablehlo.multiply %17, %17 : tensor<1024x32xf32>
    %cst_7 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %19 = stablehlo.broadcast_in_dim %cst_7, dims = [] : (tensor<f32>) -> tensor<1024x32xf32>
    %20 = stablehlo.multiply %19, %17 : tensor<1024x32xf32>
    %cst_8 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %21 = stablehlo.reduce(%18 init: %cst_8) applies stablehlo.add across dimensions = [0, 1] : (tensor<1024x32xf32>, tensor<f32>) -> tensor<f32>
    %cst_9 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %22 = stablehlo.multiply %cst_9, %21 : tensor<f32>
    %cst_10 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %cst_11 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %23 = stablehlo.multiply %cst_10, %cst_11 : tensor<f32>
    %24 = stablehlo.broadcast_in_dim %23, dims = [] : (tensor<f32>) -> tensor<1024x32xf32>
    %25 = stablehlo.multiply %24, %20 : tensor<1024x32xf32>
    %26 = stablehlo.dot_general %25, %15, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<1024x32xf32>, tensor<1024x8xf32>) -> tensor<32x8xf32>
    %27 = stablehlo.transpose %26, dims = [1, 0] : (tensor<32x8xf32>) -> tensor<8x32xf32>
    %28 = stablehlo.dot_general %25, %arg3, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<1024x32xf32>, tensor<8x32xf32>) -> tensor<1024x8xf32>
    %cst_12 = stablehlo.constant dense<6.400000e+01> : tensor<f32>
    %29 = stablehlo.broadcast_in_dim %cst_12, dims = [] : (tensor<f32>) -> tensor<1024x8xf32>
    %30 = stablehlo.divide %28, %29 : tensor<1024x8xf32>
    %31 = stablehlo.broadcast_in_dim %30, dims = [0, 3] : (tensor<1024x8xf32>) -> tensor<1024x8x8x8xf32>
    %32 = stablehlo.multiply %31, %12 : tensor<1024x8x8x8xf32>
    %33 = stablehlo.convolution(%arg0, %32) dim_numbers = [f, 0, 1, b]x[i, 0, 1, o]->[0, 1, b, f], window = {stride = [1, 1], pad = [[1, 1], [1, 1]], lhs_dilate = [1, 1], rhs_dilate = [1, 1], reverse = [false, false]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<1024x8x8x4xf32>, tensor<1024x8x8x8xf32>) -> tensor<3x3x4x8xf32>
    return %22, %33, %27 : tensor<f32>, tensor<3x3x4x8xf32>, tensor<8x32xf32>
  }
}
