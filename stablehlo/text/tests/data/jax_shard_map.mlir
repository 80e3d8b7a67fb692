// Output of jax 0.10.2 for a shard_map with psum over an 8-device (4x2) mesh:
// sdy.manual_computation holding a stablehlo.all_reduce, with #loc aliases.
#loc1 = loc("a")
#loc4 = loc("shard_map")
#loc6 = loc("psum_invariant")
#loc9 = loc("shard_map:"(#loc4))
#loc11 = loc("psum_invariant:"(#loc6))
module @jit_f4 attributes {mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["data"=4, "model"=2]> {stablehlo.mesh = {axes = [{name = "data", size = 4 : i64}, {name = "model", size = 2 : i64}]}} loc(#loc)
  func.func public @main(%arg0: tensor<16x8xf32> loc("a")) -> (tensor<4x8xf32> {jax.result_info = "result"}) {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"data"}, {}]>] out_shardings=[<@mesh, [{}, {}]>] manual_axes={"data", "model"} (%arg1: tensor<4x8xf32> loc("shard_map:"(#loc4))) {
      %1 = "stablehlo.all_reduce"(%arg1) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 2, 4, 6], [1, 3, 5, 7]]> : tensor<2x4xi64>, use_global_device_ids}> ({
      ^bb0(%arg2: tensor<f32> loc("psum_invariant:"(#loc6)), %arg3: tensor<f32> loc("psum_invariant:"(#loc6))):
        %2 = stablehlo.add %arg2, %arg3 : tensor<f32> loc(#loc17)
        stablehlo.return %2 : tensor<f32> loc(#loc13)
      }) : (tensor<4x8xf32>) -> tensor<4x8xf32> loc(#loc13)
      sdy.return %1 : tensor<4x8xf32> loc(#loc9)
    } : (tensor<16x8xf32>) -> tensor<4x8xf32> loc(#loc16)
    return %0 : tensor<4x8xf32> loc(#loc15)
  } loc(#loc)
} loc(#loc)
#loc = loc(unknown)
#loc2 = loc("model.py":25:11 to :104)
#loc3 = loc("model.py":27:24 to :60)
#loc5 = loc("model.py":25:31 to :54)
#loc7 = loc("f4"(#loc2))
#loc8 = loc("<module>"(#loc3))
#loc10 = loc("f4.<locals>.<lambda>"(#loc5))
#loc12 = loc(callsite(#loc7 at #loc8))
#loc13 = loc("psum_invariant"(#loc10))
#loc14 = loc(callsite(#loc10 at #loc10))
#loc15 = loc("jit(f4)"(#loc8))
#loc16 = loc("jit(f4)/shard_map"(#loc12))
#loc17 = loc("add"(#loc14))
