// target: run
// found: ValueError (array is too big) from numpy while making the random arguments
func.func @main(%a: tensor<0x3x9223372036854775807xbf16>) -> tensor<f32> {
  %c = stablehlo.constant dense<0.0> : tensor<f32>
  func.return %c : tensor<f32>
}
