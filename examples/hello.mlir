// A small model layer: relu(x @ w + b), and the sum of each row of the result.
// Run it with random inputs:   openhlo run examples/hello.mlir
// or with your own:            openhlo run examples/hello.mlir --inputs args.npz
module @hello {
  func.func public @main(%x: tensor<2x3xf32>, %w: tensor<3x4xf32>, %b: tensor<4xf32>)
      -> (tensor<2x4xf32>, tensor<2xf32>) {
    %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    %bias = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<4xf32>) -> tensor<2x4xf32>
    %z = stablehlo.add %y, %bias : tensor<2x4xf32>
    %zero = stablehlo.constant dense<0.000000e+00> : tensor<2x4xf32>
    %relu = stablehlo.maximum %z, %zero : tensor<2x4xf32>
    %init = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %sum = stablehlo.reduce(%relu init: %init) applies stablehlo.add across dimensions = [1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<2xf32>
    return %relu, %sum : tensor<2x4xf32>, tensor<2xf32>
  }
}
