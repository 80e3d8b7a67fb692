// target: text
// found: TypeError at stablehlo/ir/types.py:236 in numpy_dtype (no numpy dtype for i3)
func.func @main() {
  %0 = stablehlo.constant dense<[0, 1]> : tensor<2xi3>
  func.return
}
