// target: text
// found: MemoryError at stablehlo/text/parse_dense.py:212 in _array_from_elements (a splat of 2^63-1 elements is materialized)
func.func @main() -> tensor<9223372036854775807xi8> {
  %0 = stablehlo.constant dense<0> : tensor<9223372036854775807xi8>
  func.return %0 : tensor<9223372036854775807xi8>
}
