// target: run
// found: AttributeError at pjrt/plugins/cpu/lowering.py:230 in _check_types ('NoneType' object has no attribute 'operations')
func.func private @f(%a: tensor<f32>) -> tensor<f32>
func.func @main(%a: tensor<f32>) -> tensor<f32> {
  %0 = func.call @f(%a) : (tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}
