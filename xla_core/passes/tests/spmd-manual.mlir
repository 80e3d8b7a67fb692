// RUN: openhlo opt %s --split-input-file --passes=spmd-manual | filecheck %s

// A shard_map body becomes the entry: it takes and returns pieces, each carrying the
// sharding of the global value it is a piece of.
// CHECK: module attributes {openhlo.spmd_partitioned}
// CHECK: @main(%arg0: tensor<2x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>})
// CHECK-SAME: -> (tensor<2x3xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>})
// CHECK-NEXT: %[[N:[^ ]+]] = stablehlo.negate %arg0 : tensor<2x3xf32>
// CHECK-NEXT: return %[[N]]
// CHECK-NOT: sdy.manual_computation
sdy.mesh @mesh = <["x"=4]>
func.func public @main(%arg0: tensor<8x3xf32>) -> tensor<8x3xf32> {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>]
      out_shardings=[<@mesh, [{"x"}, {}]>] manual_axes={"x"} (%p: tensor<2x3xf32>) {
    %n = stablehlo.negate %p : tensor<2x3xf32>
    sdy.return %n : tensor<2x3xf32>
  } : (tensor<8x3xf32>) -> tensor<8x3xf32>
  return %0 : tensor<8x3xf32>
}
