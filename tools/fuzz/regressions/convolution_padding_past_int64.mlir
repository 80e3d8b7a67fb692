// target: text
// found: OverflowError at stablehlo/text/formats_linalg.py:154 in _parse_padding (a padding of 2^63)
func.func @main(%lhs: tensor<1x1x4xf32>, %rhs: tensor<1x1x1xf32>) -> tensor<1x1x4xf32> {
  %0 = stablehlo.convolution(%lhs, %rhs) dim_numbers = [b, f, 0]x[o, i, 0]->[b, f, 0], window = {pad = [[9223372036854775808, 0]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x1x4xf32>, tensor<1x1x1xf32>) -> tensor<1x1x4xf32>
  func.return %0 : tensor<1x1x4xf32>
}
