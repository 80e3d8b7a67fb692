// target: text
// found: roundtrip at reparse (array<i64> took 2^63 unwrapped; held-out upstream program, mutated)
func.func @slice_dynamic_dim(%arg0: tensor<3x?xi32>) -> tensor<1x?xi32> {
  %0 = "stablehlo.slice"(%arg0) {
    start_indices = array<i64: 1, 1>,
    limit_indices = array<i64: 2, 9223372036854775808>,
    strides = array<i64: 1, 1>
  } : (tensor<3x?xi32>) -> tensor<1x?xi32>
  func.return %0 : tensor<1x?xi32>
}
