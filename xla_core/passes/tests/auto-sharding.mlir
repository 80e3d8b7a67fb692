// RUN: openhlo opt %s --split-input-file --passes=auto-sharding{hardware=generic-cpu} | filecheck %s

// Two layers whose input and output the user pinned whole: the first weight is split on its
// columns, the second on its rows (Megatron), so the hidden activation stays split and one
// all-reduce of the second dot's partial sums (the whole result) is the only collective.
// CHECK: module attributes {mhlo.num_partitions = 4 : i32}
// CHECK: %arg0: tensor<8x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}
// CHECK-SAME: %arg1: tensor<64x512xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>}
// CHECK-SAME: %arg2: tensor<512x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>}
// CHECK-SAME: -> (tensor<8x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>})
// CHECK: stablehlo.dot_general
// CHECK-SAME: #sdy.sharding_per_value<[<@mesh, [{}, {"model"}]>]>
// CHECK: stablehlo.tanh
// CHECK-SAME: #sdy.sharding_per_value<[<@mesh, [{}, {"model"}]>]>
// CHECK: stablehlo.dot_general
// CHECK-SAME: #sdy.sharding_per_value<[<@mesh, [{}, {}]>]>
// CHECK-NOT: sdy.sharding_constraint
sdy.mesh @mesh = <["model"=4]>
func.func public @main(%x: tensor<8x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>},
                       %w1: tensor<64x512xf32>, %w2: tensor<512x64xf32>)
    -> (tensor<8x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
  %h = stablehlo.dot_general %x, %w1, contracting_dims = [1] x [0] :
      (tensor<8x64xf32>, tensor<64x512xf32>) -> tensor<8x512xf32>
  %r = stablehlo.tanh %h : tensor<8x512xf32>
  %y = stablehlo.dot_general %r, %w2, contracting_dims = [1] x [0] :
      (tensor<8x512xf32>, tensor<512x64xf32>) -> tensor<8x64xf32>
  return %y : tensor<8x64xf32>
}

// -----

// A user's sharding constraint is kept (it reshards its operand itself) and its layout
// flows on; an operand the plan uses in another layout than the one it is made in gets a
// constraint in front of its user, where the partitioner reshards it.
// CHECK: sdy.mesh @mesh = <["x"=2]>
// CHECK: %[[C:.*]] = sdy.sharding_constraint %arg0 <@mesh, [{"x"}, {}]>
// CHECK-NEXT: %[[N:.*]] = stablehlo.negate %[[C]]
// CHECK-SAME: #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>
// CHECK-NEXT: %[[W:.*]] = sdy.sharding_constraint %arg0 <@mesh, [{"x"}, {}]>
// CHECK-NEXT: stablehlo.add %[[N]], %[[W]]
// CHECK-SAME: #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>
sdy.mesh @mesh = <["x"=2]>
func.func public @main(%a: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>})
    -> tensor<8x8xf32> {
  %c = sdy.sharding_constraint %a <@mesh, [{"x"}, {}]> : tensor<8x8xf32>
  %n = stablehlo.negate %c : tensor<8x8xf32>
  %s = stablehlo.add %n, %a : tensor<8x8xf32>
  return %s : tensor<8x8xf32>
}
