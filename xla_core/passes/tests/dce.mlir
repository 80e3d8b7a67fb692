// RUN: openhlo opt %s --split-input-file --passes=dce | filecheck %s

// Unused pure ops go, whole dead chains at once; used ones stay.
// CHECK-LABEL: @main
// CHECK-NEXT: %[[S:[^ ]+]] = stablehlo.add %arg0, %arg0 : tensor<3xf32>
// CHECK-NEXT: return %[[S]] : tensor<3xf32>
func.func public @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.add %arg0, %arg0 : tensor<3xf32>
  %1 = stablehlo.multiply %arg0, %arg0 : tensor<3xf32>
  %2 = stablehlo.exponential %1 : tensor<3xf32>
  %3 = stablehlo.constant dense<1.0> : tensor<3xf32>
  %4 = stablehlo.subtract %2, %3 : tensor<3xf32>
  func.return %0 : tensor<3xf32>
}

// -----

// Side effects stay even when their results are unused: a side-effecting
// custom_call, a check op, and a custom_call without results.
// CHECK-LABEL: @main
// CHECK-NEXT: %[[C:[^ ]+]] = stablehlo.constant dense<2> : tensor<i32>
// CHECK-NEXT: stablehlo.custom_call @foo(%[[C]]) {has_side_effect = true} : (tensor<i32>) -> tensor<i32>
// CHECK-NEXT: check.expect_eq_const %[[C]], dense<2> : tensor<i32>
// CHECK-NEXT: return
func.func public @main() {
  %0 = stablehlo.constant dense<2> : tensor<i32>
  %1 = stablehlo.custom_call @foo(%0) {has_side_effect = true} : (tensor<i32>) -> tensor<i32>
  check.expect_eq_const %0, dense<2> : tensor<i32>
  %2 = stablehlo.negate %0 : tensor<i32>
  func.return
}

// -----

// An unused op with a region goes when its body is pure; an unused op inside
// a region goes too, while outer values used inside a region stay alive.
// CHECK-LABEL: @main
// CHECK-NOT: stablehlo.while
// CHECK: %[[ONE:[^ ]+]] = stablehlo.constant dense<1.000000e+00> : tensor<f32>
// CHECK: stablehlo.reduce
// CHECK-NOT: stablehlo.multiply
// CHECK: stablehlo.add %{{[^,]+}}, %[[ONE]] : tensor<f32>
// CHECK-NOT: stablehlo.multiply
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<i64>) -> tensor<f32> {
  %0 = stablehlo.while(%iterArg = %arg1) : tensor<i64>
  cond {
    %c = stablehlo.constant dense<10> : tensor<i64>
    %p = stablehlo.compare LT, %iterArg, %c : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %c1 = stablehlo.constant dense<1> : tensor<i64>
    %n = stablehlo.add %iterArg, %c1 : tensor<i64>
    stablehlo.return %n : tensor<i64>
  }
  %one = stablehlo.constant dense<1.0> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %1 = stablehlo.reduce(%arg0 init: %zero) across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
   reducer(%a: tensor<f32>, %b: tensor<f32>) {
    %unused = stablehlo.multiply %a, %b : tensor<f32>
    %s = stablehlo.add %a, %b : tensor<f32>
    %t = stablehlo.add %s, %one : tensor<f32>
    stablehlo.return %t : tensor<f32>
  }
  func.return %1 : tensor<f32>
}

// -----

// Private functions nothing refers to go (also after their last call went);
// public ones and private ones still called stay. A call of a pure function
// whose result is unused goes; a call of an impure one stays.
// CHECK-LABEL: @main
// CHECK-NEXT: call @noisy
// CHECK-NEXT: %[[R:[^ ]+]] = call @used
// CHECK-NEXT: return %[[R]]
// CHECK-NOT: @unreferenced
// CHECK-NOT: @pure_unused_result
// CHECK-DAG: func.func private @noisy
// CHECK-DAG: func.func private @used
// CHECK-DAG: @exported(
func.func public @main(%arg0: tensor<i32>) -> tensor<i32> {
  %0 = func.call @pure_unused_result(%arg0) : (tensor<i32>) -> tensor<i32>
  %1 = func.call @noisy(%arg0) : (tensor<i32>) -> tensor<i32>
  %2 = func.call @used(%arg0) : (tensor<i32>) -> tensor<i32>
  func.return %2 : tensor<i32>
}
func.func private @pure_unused_result(%arg0: tensor<i32>) -> tensor<i32> {
  %0 = stablehlo.negate %arg0 : tensor<i32>
  func.return %0 : tensor<i32>
}
func.func private @noisy(%arg0: tensor<i32>) -> tensor<i32> {
  stablehlo.custom_call @log(%arg0) {has_side_effect = true} : (tensor<i32>) -> ()
  func.return %arg0 : tensor<i32>
}
func.func private @used(%arg0: tensor<i32>) -> tensor<i32> {
  func.return %arg0 : tensor<i32>
}
func.func private @unreferenced(%arg0: tensor<i32>) -> tensor<i32> {
  func.return %arg0 : tensor<i32>
}
func.func public @exported(%arg0: tensor<i32>) -> tensor<i32> {
  func.return %arg0 : tensor<i32>
}
