// target: run
// found: timeout in interpreter execute (a valid 6 GiB iota; the fuzzer's workers now run under a service's limits)
func.func @main() {
  %0 = stablehlo.iota dim = 1 : tensor<1x3x2147483648xi8>
  func.return
}
