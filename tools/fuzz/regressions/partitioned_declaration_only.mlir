// target: run
// found: AttributeError at xla_core/spmd/manual.py:52 in run ('NoneType' object has no attribute 'operations')
module attributes {mhlo.num_partitions = 7 : i32} {
  func.func private @inputs() -> tensor<4xf32>
}
