// target: run
// found: timeout (the interpreter's recv waited for the collective timeout; the cpu backend raised ArgumentMismatch for the token argument)
func.func @main(%t: !stablehlo.token) -> tensor<2xi64> {
  %r, %t2 = "stablehlo.recv"(%t) {
    channel_handle = #stablehlo.channel_handle<handle = 1, type = 3>,
    is_host_transfer = true
  } : (!stablehlo.token) -> (tensor<2xi64>, !stablehlo.token)
  return %r : tensor<2xi64>
}
