// target: run
// found: timeout in cpu compile (a constant outside any function escaped the size checks, and pickling the splat for the compile cache wrote out every element; held-out upstream program, mutated)
  %c = stablehlo.constant dense<9.0> : tensor<2147483648xf16>
func.func @main() {
  func.return
}
