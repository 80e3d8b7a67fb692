// target: run
// found: dense<> of tensor<f32> accepted, and run as 0.0 (silently wrong data)
func.func @main() -> tensor<f32> {
  %r = stablehlo.constant dense<> : tensor<f32>
  func.return %r : tensor<f32>
}
