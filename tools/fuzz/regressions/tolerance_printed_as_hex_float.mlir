// target: text
// found: roundtrip at reparse (ParseError: expected a number, found '0x41E0000000000000')
func.func @main() {
  %r = stablehlo.constant dense<1.0> : tensor<f32>
  check.expect_almost_eq %r, %r, tolerance = 2147483648 : tensor<f32>
  func.return
}
