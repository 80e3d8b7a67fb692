// RUN: openhlo opt %s --split-input-file --passes=sharding-propagation,spmd-partition | filecheck %s

// Contracting dims split alike on both sides: a local dot on the pieces, then the partial
// sums added over the axis (XLA's replica groups, channel handle and global device ids).
// CHECK: module attributes {mhlo.num_partitions = 4 : i32, openhlo.spmd_partitioned}
// CHECK: @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}
// CHECK-SAME: %arg1: tensor<4x8xf32>
// CHECK: %[[DOT:[^ ]+]] = stablehlo.dot_general %arg0, %arg1
// CHECK-SAME: (tensor<8x4xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: "stablehlo.all_reduce"(%[[DOT]])
// CHECK-SAME: channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>
// CHECK-SAME: replica_groups = dense<{{\[\[}}0, 1, 2, 3]]> : tensor<1x4xi64>, use_global_device_ids
module attributes {mhlo.num_partitions = 4 : i32} {
sdy.mesh @mesh = <["x"=4]>
func.func public @main(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>},
                       %b: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>})
    -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>}) {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] :
      (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
}

// -----

// A split moving from dim 0 to dim 1 is one all-to-all; replicated -> split is a local
// dynamic_slice at an offset looked up by partition id.
// CHECK: "stablehlo.all_to_all"
// CHECK-SAME: concat_dimension = 0 : i64
// CHECK-SAME: split_count = 4 : i64, split_dimension = 1 : i64
// CHECK-SAME: (tensor<2x8xf32>) -> tensor<8x2xf32>
// CHECK: stablehlo.partition_id
// CHECK: stablehlo.constant dense<[0, 2, 4, 6]> : tensor<4xi32>
// CHECK: stablehlo.dynamic_slice %arg1
// CHECK-SAME: sizes = [8, 2]
sdy.mesh @mesh = <["x"=4]>
func.func public @main(%a: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>},
                       %b: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}]>})
    -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) {
  %0 = stablehlo.add %a, %b : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
