// target: run
// found: timeout in cpu compile (the backend materialized a 4 GiB splat constant; no limit applied)
func.func @main() {
  %c = stablehlo.constant dense<9.0> : tensor<2147483648xf16>
  func.return
}
