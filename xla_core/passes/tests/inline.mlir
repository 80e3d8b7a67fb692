// RUN: openhlo opt %s --split-input-file --passes=inline | filecheck %s

// A private callee is inlined with its arguments mapped to the call operands,
// and then erased because nothing refers to it any more.
// CHECK-LABEL: @main
// CHECK-NEXT: %[[X:[^ ]+]] = stablehlo.constant dense<1> : tensor<i64>
// CHECK-NEXT: %[[TWO:[^ ]+]] = stablehlo.constant dense<2> : tensor<i64>
// CHECK-NEXT: %[[SUM:[^ ]+]] = stablehlo.add %[[X]], %[[TWO]] : tensor<i64>
// CHECK-NEXT: return %[[SUM]] : tensor<i64>
// CHECK-NOT: @add_2
func.func public @main() -> tensor<i64> {
  %0 = stablehlo.constant dense<1> : tensor<i64>
  %1 = func.call @add_2(%0) : (tensor<i64>) -> tensor<i64>
  func.return %1 : tensor<i64>
}
func.func private @add_2(%arg0: tensor<i64>) -> tensor<i64> {
  %0 = stablehlo.constant dense<2> : tensor<i64>
  %1 = stablehlo.add %arg0, %0 : tensor<i64>
  func.return %1 : tensor<i64>
}

// -----

// Calls to public functions stay, and so does the callee.
// CHECK-LABEL: @main
// CHECK: call @twice
// CHECK: func.func public @twice
func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
  %0 = func.call @twice(%arg0) : (tensor<2xf32>) -> tensor<2xf32>
  func.return %0 : tensor<2xf32>
}
func.func public @twice(%arg0: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %arg0, %arg0 : tensor<2xf32>
  func.return %0 : tensor<2xf32>
}

// -----

// A call inside a region (a reduce_window body) is inlined into that body;
// a chain main -> outer -> inner is inlined all the way down.
// CHECK-LABEL: @main
// CHECK: ^bb0(%[[A:[^:]+]]: tensor<f32>, %[[B:[^:]+]]: tensor<f32>):
// CHECK-NEXT: %[[M:[^ ]+]] = stablehlo.maximum %[[A]], %[[B]] : tensor<f32>
// CHECK-NEXT: stablehlo.return %[[M]] : tensor<f32>
// CHECK: %[[N:[^ ]+]] = stablehlo.negate %arg0 : tensor<4xf32>
// CHECK-NEXT: %[[E:[^ ]+]] = stablehlo.exponential %[[N]] : tensor<4xf32>
// CHECK-NEXT: return %{{[^ ]+}}, %[[E]] : tensor<3xf32>, tensor<4xf32>
// CHECK-NOT: func.func private
func.func public @main(%arg0: tensor<4xf32>) -> (tensor<3xf32>, tensor<4xf32>) {
  %init = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %0 = "stablehlo.reduce_window"(%arg0, %init) <{window_dimensions = array<i64: 2>}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %m = func.call @max(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) : (tensor<4xf32>, tensor<f32>) -> tensor<3xf32>
  %1 = func.call @outer(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %0, %1 : tensor<3xf32>, tensor<4xf32>
}
func.func private @max(%arg0: tensor<f32>, %arg1: tensor<f32>) -> tensor<f32> {
  %0 = stablehlo.maximum %arg0, %arg1 : tensor<f32>
  func.return %0 : tensor<f32>
}
func.func private @outer(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.negate %arg0 : tensor<4xf32>
  %1 = func.call @inner(%0) : (tensor<4xf32>) -> tensor<4xf32>
  func.return %1 : tensor<4xf32>
}
func.func private @inner(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.exponential %arg0 : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}

// -----

// A callee that returns its arguments (swapped) and has two results: uses of
// the call's results become uses of the call's operands.
// CHECK-LABEL: @main
// CHECK-NEXT: %[[D:[^ ]+]] = stablehlo.subtract %arg1, %arg0 : tensor<i32>
// CHECK-NEXT: return %[[D]] : tensor<i32>
func.func public @main(%arg0: tensor<i32>, %arg1: tensor<i32>) -> tensor<i32> {
  %0:2 = func.call @swap(%arg0, %arg1) : (tensor<i32>, tensor<i32>) -> (tensor<i32>, tensor<i32>)
  %1 = stablehlo.subtract %0#0, %0#1 : tensor<i32>
  func.return %1 : tensor<i32>
}
func.func private @swap(%arg0: tensor<i32>, %arg1: tensor<i32>) -> (tensor<i32>, tensor<i32>) {
  func.return %arg1, %arg0 : tensor<i32>, tensor<i32>
}

// -----

// A recursive private function is never inlined (that would not terminate).
// CHECK-LABEL: @main
// CHECK: call @loop
// CHECK: func.func private @loop
// CHECK: call @loop
func.func public @main(%arg0: tensor<i32>) -> tensor<i32> {
  %0 = func.call @loop(%arg0) : (tensor<i32>) -> tensor<i32>
  func.return %0 : tensor<i32>
}
func.func private @loop(%arg0: tensor<i32>) -> tensor<i32> {
  %0 = func.call @loop(%arg0) : (tensor<i32>) -> tensor<i32>
  func.return %0 : tensor<i32>
}

// -----

// A callee still named elsewhere (a composite's decomposition) is inlined at
// the call but kept for the composite.
// CHECK-LABEL: @main
// CHECK: stablehlo.add
// CHECK: stablehlo.composite "my.double" %{{[^ ]+}} {decomposition = @double}
// CHECK: func.func private @double
func.func public @main(%arg0: tensor<f32>) -> tensor<f32> {
  %0 = func.call @double(%arg0) : (tensor<f32>) -> tensor<f32>
  %1 = stablehlo.composite "my.double" %0 {decomposition = @double} : (tensor<f32>) -> tensor<f32>
  func.return %1 : tensor<f32>
}
func.func private @double(%arg0: tensor<f32>) -> tensor<f32> {
  %0 = stablehlo.add %arg0, %arg0 : tensor<f32>
  func.return %0 : tensor<f32>
}
