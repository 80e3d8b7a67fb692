// target: text
// found: roundtrip at reparse (a struct's float field printed as a hex float; held-out upstream program, mutated)
func.func @test_log_highest_error(%arg0: tensor<f32>) -> tensor<f32> {
  %log = "stablehlo.log"(%arg0) {result_accuracy = #stablehlo.result_accuracy<atol = 2147483648, rtol = 0.0, ulps = 4, mode = #stablehlo.result_accuracy_mode<HIGHEST>>} : (tensor<f32>) -> tensor<f32>
  func.return %log: tensor<f32>
}
