// target: run
// found: the run target's own comparison raised TypeError on two token results (the fuzzing engine exited)
func.func @main() -> !stablehlo.token {
  %0 = "stablehlo.create_token"() : () -> !stablehlo.token
  func.return %0 : !stablehlo.token
}
