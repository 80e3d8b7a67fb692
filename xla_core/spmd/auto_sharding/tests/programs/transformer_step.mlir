module @jit__transformer attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<16x128xf32>, %arg1: tensor<16x128xf32>, %arg2: tensor<128x8x16xf32>, %arg3: tensor<128x8x16xf32>, %arg4: tensor<128x8x16xf32>, %arg5: tensor<8x16x128xf32>, %arg6: tensor<128x512xf32>, %arg7: tensor<512x128xf32>) -> (tensor<f32> {jax.result_info = "result[0]"}, tensor<128x8x16xf32> {jax.result_info = "result[1][0]"}, tensor<128x8x16xf32> {jax.result_info = "result[1][1]"}, tensor<128x8x16xf32> {jax.result_info = "result[1][2]"}, tensor<8x16x128xf32> {jax.result_info = "result[1][3]"}, tensor<128x512xf32> {jax.result_info = "result[1][4]"}, tensor<512x128xf32> {jax.result_info = "result[1][5]"}) {
    %0 = stablehlo.dot_general %arg2, %arg0, contracting_dims = [0] x [1], precision = [DEFAULT, DEFAULT] : (tensor<128x8x16xf32>, tensor<16x128xf32>) -> tensor<8x16x16xf32>
    %1 = stablehlo.transpose %0, dims = [0, 2, 1] : (tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
    %2 = stablehlo.dot_general %arg3, %arg0, contracting_dims = [0] x [1], precision = [DEFAULT, DEFAULT] : (tensor<128x8x16xf32>, tensor<16x128xf32>) -> tensor<8x16x16xf32>
    %3 = stablehlo.transpose %2, dims = [0, 2, 1] : (tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
    %4 = stablehlo.dot_general %arg4, %arg0, contracting_dims = [0] x [1], precision = [DEFAULT, DEFAULT] : (tensor<128x8x16xf32>, tensor<16x128xf32>) -> tensor<8x16x16xf32>
    %5 = stablehlo.transpose %4, dims = [0, 2, 1] : (tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
    %6 = stablehlo.dot_general %1, %3, batching_dims = [0] x [0], contracting_dims = [2] x [2], precision = [DEFAULT, DEFAULT] : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
    %cst = stablehlo.constant dense<4.000000e+00> : tensor<f32>
    %7 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<8x16x16xf32>
    %8 = stablehlo.divide %6, %7 : tensor<8x16x16xf32>
    %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %9 = stablehlo.reduce(%8 init: %cst_0) applies stablehlo.maximum across dimensions = [2] : (tensor<8x16x16xf32>, tensor<f32>) -> tensor<8x16xf32>
    %cst_1 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %10 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<8x16xf32>
    %11 = stablehlo.maximum %10, %9 : tensor<8x16xf32>
    %12 = stablehlo.broadcast_in_dim %11, dims = [0, 1] : (tensor<8x16xf32>) -> tensor<8x16x1xf32>
    %13 = stablehlo.broadcast_in_dim %12, dims = [0, 1, 2] : (tensor<8x16x1xf32>) -> tensor<8x16x16xf32>
    %14 = stablehlo.subtract %8, %13 : tensor<8x16x16xf32>
    %15 = stablehlo.exponential %14 : tensor<8x16x16xf32>
    %cst_2 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %16 = stablehlo.reduce(%15 init: %cst_2) applies stablehlo.add across dimensions = [2] : (tensor<8x16x16xf32>, tensor<f32>) -> tensor<8x16xf32>
    %17 = stablehlo.broadcast_in_dim %16, dims = [0, 1] : (tensor<8x16xf32>) -> tensor<8x16x1xf32>
    %18 = stablehlo.broadcast_in_dim %17, dims = [0, 1, 2] : (tensor<8x16x1xf32>) -> tensor<8x16x16xf32>
    %19 = stablehlo.divide %15, %18 : tensor<8x16x16xf32>
    %20 = stablehlo.multiply %17, %17 : tensor<8x16x1xf32>
    %cst_3 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %21 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<8x16x1xf32>
    %22 = stablehlo.divide %21, %20 : tensor<8x16x1xf32>
    %23 = stablehlo.dot_general %5, %19, batching_dims = [0] x [0], contracting_dims = [1] x [2], precision = [DEFAULT, DEFAULT] : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
    %24 = stablehlo.dot_general %23, %arg5, contracting_dims = [0, 1] x [0, 1], precision = [DEFAULT, DEFAULT] : (tensor<8x16x16xf32>, tensor<8x16x128xf32>) -> tensor<16x128xf32>
    %25 = stablehlo.add %24, %arg0 : tensor<16x128xf32>
    %26 = stablehlo.dot_general %25, %arg6, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<16x128xf32>, tensor<128x512xf32>) -> tensor<16x512xf32>
    %cst_4 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %27 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<16x512xf32>
    %28 = stablehlo.maximum %26, %27 : tensor<16x512xf32>
    %29 = stablehlo.compare EQ, %26, %28, FLOAT : (tensor<16x512xf32>, tensor<16x512xf32>) -> tensor<16x512xi1>
    %cst_5 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %30 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<16x512xf32>
    %cst_6 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %31 = stablehlo.broadcast_in_dim %cst_6, dims = [] : (tensor<f32>) -> tensor<16x512xf32>
    %32 = stablehlo.select %29, %30, %31 : tensor<16x512xi1>, tensor<16x512xf32>
    %cst_7 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %33 = stablehlo.broadcast_in_dim %cst_7, dims = [] : (tensor<f32>) -> tensor<16x512xf32>
    %34 = stablehlo.compare EQ, %33, %28, FLOAT : (tensor<16x512xf32>, tensor<16x512xf32>) -> tensor<16x512xi1>
    %cst_8 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %35 = stablehlo.broadcast_in_dim %cst_8, dims = [] : (tensor<f32>) -> tensor<16x512xf32>
    %cst_9 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %36 = stablehlo.broadcast_in_dim %cst_9, dims = [] : (tensor<f32>) -> tensor<16x512xf32>
    %37 = stablehlo.select %34, %35, %36 : tensor<16x512xi1>, tensor<16x512xf32>
    %38 = stablehlo.divide %32, %37 : tensor<16x512xf32>
    %39 = stablehlo.dot_general %28, %arg7, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<16x512xf32>, tensor<512x128xf32>) -> tensor<16x128xf32>
    %40 = stablehlo.add %39, %25 : tensor<16x128xf32>
    %41 = stablehlo.subtract %40, %arg1 : tensor<16x128xf32>
    %42 = stablehlo.multiply %41, %41 : tensor<16x128xf32>
    %cst_10 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %43 = stablehlo.broadcast_in_dim %cst_10, dims = [] : (tensor<f32>) -> tensor<16x128xf32>
    %44 = stablehlo.multiply %43, %41 : tensor<16x128xf32>
    %cst_11 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %45 = stablehlo.reduce(%42 init: %cst_11) applies stablehlo.add across dimensions = [0, 1] : (tensor<16x128xf32>, tensor<f32>) -> tensor<f32>
    %cst_12 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %46 = stablehlo.multiply %cst_12, %45 : tensor<f32>
    %cst_13 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %cst_14 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %47 = stablehlo.multiply %cst_13, %cst_14 : tensor<f32>
    %48 = stablehlo.broadcast_in_dim %47, dims = [] : (tensor<f32>) -> tensor<16x128xf32>
    %49 = stablehlo.multiply %48, %44 : tensor<16x128xf32>
    %50 = stablehlo.dot_general %49, %28, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<16x128xf32>, tensor<16x512xf32>) -> tensor<128x512xf32>
    %51 = stablehlo.transpose %50, dims = [1, 0] : (tensor<128x512xf32>) -> tensor<512x128xf32>
    %52 = stablehlo.dot_general %49, %arg7, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<16x128xf32>, tensor<512x128xf32>) -> tensor<16x512xf32>
    %53 = stablehlo.multiply %52, %38 : tensor<16x512xf32>
    %54 = stablehlo.dot_general %53, %25, contracting_dims = [0] x [0], precision = [DEFAULT, DEFAULT] : (tensor<16x512xf32>, tensor<16x128xf32>) -> tensor<512x128xf32>
    %55 = stablehlo.transpose %54, dims = [1, 0] : (tensor<512x128xf32>) -> tensor<128x512xf32>
    %56 = stablehlo.dot_general %53, %arg6, contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<16x512xf32>, tensor<128x512xf32>) -> tensor<16x128xf32>
    %57 = stablehlo.add %49, %56 : tensor<16x128xf32>
    %58 = stablehlo.dot_general %57, %23, contracting_dims = [0] x [2], precision = [DEFAULT, DEFAULT] : (tensor<16x128xf32>, tensor<8x16x16xf32>) -> tensor<128x8x16xf32>
    %59 = stablehlo.transpose %58, dims = [1, 2, 0] : (tensor<128x8x16xf32>) -> tensor<8x16x128xf32>
    %60 = stablehlo.dot_general %57, %arg5, contracting_dims = [1] x [2], precision = [DEFAULT, DEFAULT] : (tensor<16x128xf32>, tensor<8x16x128xf32>) -> tensor<16x8x16xf32>
    %61 = stablehlo.transpose %60, dims = [1, 2, 0] : (tensor<16x8x16xf32>) -> tensor<8x16x16xf32>
    %62 = stablehlo.dot_general %61, %5, batching_dims = [0] x [0], contracting_dims = [1] x [2], precision = [DEFAULT, DEFAULT] : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
    %63 = stablehlo.dot_general %61, %19, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
    %64 = stablehlo.transpose %63, dims = [0, 2, 1] : (tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
    %65 = stablehlo.broadcast_in_dim %22, dims = [0, 1, 2] : (tensor<8x16x1xf32>) -> tensor<8x16x16xf32>
    %66 = stablehlo.multiply %62, %65 : tensor<8x16x16xf32>
    %67 = stablehlo.multiply %66, %15 : tensor<8x16x16xf32>
    %cst_15 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %68 = stablehlo.reduce(%67 init: %cst_15) applies stablehlo.add across dimensions = [2] : (tensor<8x16x16xf32>, tensor<f32>) -> tensor<8x16xf32>
    %69 = stablehlo.reshape %68 : (tensor<8x16xf32>) -> tensor<8x16x1xf32>
    %70 = stablehlo.negate %69 : tensor<8x16x1xf32>
    %71 = stablehlo.broadcast_in_dim %17, dims = [0, 1, 2] : (tensor<8x16x1xf32>) -> tensor<8x16x16xf32>
    %72 = stablehlo.divide %62, %71 : tensor<8x16x16xf32>
    %cst_16 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %73 = stablehlo.reduce(%70 init: %cst_16) applies stablehlo.add across dimensions = [2] : (tensor<8x16x1xf32>, tensor<f32>) -> tensor<8x16xf32>
    %74 = stablehlo.broadcast_in_dim %73, dims = [0, 1] : (tensor<8x16xf32>) -> tensor<8x16x16xf32>
    %75 = stablehlo.add %72, %74 : tensor<8x16x16xf32>
    %76 = stablehlo.multiply %75, %15 : tensor<8x16x16xf32>
    %cst_17 = stablehlo.constant dense<4.000000e+00> : tensor<f32>
    %77 = stablehlo.broadcast_in_dim %cst_17, dims = [] : (tensor<f32>) -> tensor<8x16x16xf32>
    %78 = stablehlo.divide %76, %77 : tensor<8x16x16xf32>
    %79 = stablehlo.dot_general %78, %1, batching_dims = [0] x [0], contracting_dims = [1] x [1], precision = [DEFAULT, DEFAULT] : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
    %80 = stablehlo.dot_general %78, %3, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<8x16x16xf32>, tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
    %81 = stablehlo.transpose %64, dims = [0, 2, 1] : (tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
    %82 = stablehlo.dot_general %81, %arg0, contracting_dims = [2] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x16x16xf32>, tensor<16x128xf32>) -> tensor<8x16x128xf32>
    %83 = stablehlo.transpose %82, dims = [2, 0, 1] : (tensor<8x16x128xf32>) -> tensor<128x8x16xf32>
    %84 = stablehlo.transpose %79, dims = [0, 2, 1] : (tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
    %85 = stablehlo.dot_general %84, %arg0, contracting_dims = [2] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x16x16xf32>, tensor<16x128xf32>) -> tensor<8x16x128xf32>
    %86 = stablehlo.transpose %85, dims = [2, 0, 1] : (tensor<8x16x128xf32>) -> tensor<128x8x16xf32>
    %87 = stablehlo.transpose %80, dims = [0, 2, 1] : (tensor<8x16x16xf32>) -> tensor<8x16x16xf32>
    %88 = stablehlo.dot_general %87, %arg0, contracting_dims = [2] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x16x16xf32>, tensor<16x128xf32>) -> tensor<8x16x128xf32>
    %89 = stablehlo.transpose %88, dims = [2, 0, 1] : (tensor<8x16x128xf32>) -> tensor<128x8x16xf32>
    return %46, %89, %86, %83, %59, %55, %51 : tensor<f32>, tensor<128x8x16xf32>, tensor<128x8x16xf32>, tensor<128x8x16xf32>, tensor<8x16x128xf32>, tensor<128x512xf32>, tensor<512x128xf32>
  }
}
