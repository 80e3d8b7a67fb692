// target: run
// found: the run target's own conversion of a tuple result raised ValueError (held-out upstream program)
func.func @tuple(%arg0: tensor<1xi32>, %arg1: !stablehlo.token, %arg2: tuple<>) -> tuple<tensor<1xi32>, !stablehlo.token, tuple<>> {
  %0 = "stablehlo.tuple"(%arg0, %arg1, %arg2) : (tensor<1xi32>, !stablehlo.token, tuple<>) -> tuple<tensor<1xi32>, !stablehlo.token, tuple<>>
  func.return %0: tuple<tensor<1xi32>, !stablehlo.token, tuple<>>
}
