// target: text
// found: roundtrip at reparse (ParseError: expected quantization scale, found '0x41E0000000000000')
func.func @main(%x: tensor<2xf32>) -> tensor<2x!quant.uniform<i8:f32:0, {0.1:1,2147483648:2}>> {
  %r = "stablehlo.uniform_quantize"(%x) : (tensor<2xf32>) -> tensor<2x!quant.uniform<i8:f32:0, {0.1:1,2147483648:2}>>
  func.return %r : tensor<2x!quant.uniform<i8:f32:0, {0.1:1,2147483648:2}>>
}
