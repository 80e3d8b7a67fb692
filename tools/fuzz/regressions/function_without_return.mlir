// target: run
// found: AttributeError at pjrt/plugins/cpu/lowering.py:230 in _check_types ('NoneType' object has no attribute 'operations')
func.func @main() {
}
