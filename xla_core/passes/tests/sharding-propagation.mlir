// RUN: openhlo opt %s --split-input-file --passes=sharding-propagation | filecheck %s

// A dot's batch and free dims carry the operands' splits; the scalar broadcast waits for its
// user and takes its layout; each op records where its sharding came from.
// CHECK-LABEL: sdy.mesh @mesh
// CHECK: %[[DOT:[^ ]+]] = stablehlo.dot_general
// CHECK-SAME: openhlo.sharding_origin = "from operand 0 and operand 1 of dot_general"
// CHECK-SAME: sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>]>
// CHECK: stablehlo.broadcast_in_dim
// CHECK-SAME: "from its user stablehlo.add (operand 1)"
// CHECK-SAME: #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>]>
// CHECK: stablehlo.add %[[DOT]]
// CHECK-SAME: #sdy.sharding_per_value<[<@mesh, [{"x"}, {"y"}]>]>
sdy.mesh @mesh = <["x"=4, "y"=2]>
func.func public @main(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>},
                       %b: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}]>})
    -> tensor<8x32xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] :
      (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %c = stablehlo.constant dense<1.0> : tensor<f32>
  %1 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<8x32xf32>
  %2 = stablehlo.add %0, %1 : tensor<8x32xf32>
  return %2 : tensor<8x32xf32>
}

// -----

// GSPMD spelling: a one-axis mesh is added and mhlo.sharding becomes sdy.sharding.
// CHECK: sdy.mesh @mesh = <["gspmd"=4]>
// CHECK: %arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"gspmd"}, {}]>}
// CHECK: stablehlo.negate
// CHECK-SAME: #sdy.sharding_per_value<[<@mesh, [{"gspmd"}, {}]>]>
// CHECK-NOT: mhlo.sharding
func.func public @main(%a: tensor<8x4xf32> {mhlo.sharding = "{devices=[4,1]<=[4]}"})
    -> tensor<8x4xf32> {
  %0 = stablehlo.negate %a : tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}
