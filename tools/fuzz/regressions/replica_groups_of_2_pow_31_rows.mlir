// target: text
// found: MemoryError at stablehlo/ir/attr_readers.py in int_matrix (a splat replica_groups of 2^32 entries; held-out upstream program, mutated)
func.func @all_to_all_empty_replica_groups(%data: tensor<4x16xf32>) -> tensor<16x4xf32> {
  %0 = "stablehlo.all_to_all"(%data) {
    split_dimension = 1 : i64,
    concat_dimension = 0 : i64,
    split_count = 4 : i64,
    replica_groups = dense<0> : tensor<2147483648x2xi64>
  } : (tensor<4x16xf32>) -> tensor<16x4xf32>
  func.return %0 : tensor<16x4xf32>
}
