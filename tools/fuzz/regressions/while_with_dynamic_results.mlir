// target: text
// found: roundtrip at reparse (the pretty while form gave its results the operand types; held-out upstream program)
func.func @while_bounds(
  %while_arg_1: tensor<2x?xi32, #stablehlo.bounds<?, 4>>,
  %while_arg_2: tensor<3xf32>) -> tensor<?x?xindex> {
  %1:2 = "stablehlo.while"(%while_arg_1, %while_arg_2) ({
  ^bb0(%arg1: tensor<2x?xi32, #stablehlo.bounds<?, 4>>, %arg2: tensor<3xf32>):
    %2 = stablehlo.constant dense<1> : tensor<i1>
    "stablehlo.return"(%2) : (tensor<i1>) -> ()
  },  {
  ^bb0(%arg1: tensor<2x?xi32, #stablehlo.bounds<?, 4>>, %arg2: tensor<3xf32>):
    "stablehlo.return"(%arg1, %arg2) : (tensor<2x?xi32, #stablehlo.bounds<?, 4>>, tensor<3xf32>) -> ()
  }) : (tensor<2x?xi32, #stablehlo.bounds<?, 4>>, tensor<3xf32>) -> (tensor<?x?xi32>, tensor<?xf32>)
  %3 = "hlo_test_infer.get_return_types"(%1) : (tensor<?x?xi32>) -> tensor<?x?xindex>
  func.return %3 : tensor<?x?xindex>
}
