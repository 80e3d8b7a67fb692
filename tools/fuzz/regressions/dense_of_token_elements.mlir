// target: text
// found: TypeError at stablehlo/ir/types.py:236 in numpy_dtype (no numpy dtype for !stablehlo.token)
func.func @main() {
  %0 = stablehlo.constant dense<0.0> : tensor<1xf32>
  check.expect_almost_eq_const %0, dense<[]> : tensor<!stablehlo.token>
  func.return
}
