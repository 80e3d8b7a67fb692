// RUN: openhlo opt %s --split-input-file --passes=cse | filecheck %s

// Duplicates merge: equal constants, then the ops that became equal through
// them (a whole chain in one walk), multi-result ops, and calls of a pure
// function. Uses of the later op go to the first one.
// CHECK-LABEL: @main
// CHECK-NEXT: %[[C:[^ ]+]] = stablehlo.constant dense<1.000000e+00> : tensor<3xf32>
// CHECK-NEXT: %[[A:[^ ]+]] = stablehlo.add %arg0, %[[C]] : tensor<3xf32>
// CHECK-NEXT: %[[E:[^ ]+]] = stablehlo.exponential %[[A]] : tensor<3xf32>
// CHECK-NEXT: %[[M:[^ ]+]] = stablehlo.multiply %[[E]], %[[E]] : tensor<3xf32>
// CHECK-NEXT: %[[T:[^ ]+]]:2 = stablehlo.optimization_barrier
// CHECK-NEXT: %[[S:[^ ]+]]:2 = "stablehlo.sort"(%[[M]], %arg0)
// CHECK: %[[F:[^ ]+]] = call @pure(%[[M]])
// CHECK-NEXT: return %[[M]], %[[M]], %[[S]]#1, %[[S]]#1, %[[F]], %[[F]] :
func.func public @main(%arg0: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
  %c0 = stablehlo.constant dense<1.0> : tensor<3xf32>
  %a0 = stablehlo.add %arg0, %c0 : tensor<3xf32>
  %c1 = stablehlo.constant dense<1.0> : tensor<3xf32>
  %a1 = stablehlo.add %arg0, %c1 : tensor<3xf32>
  %e0 = stablehlo.exponential %a0 : tensor<3xf32>
  %e1 = stablehlo.exponential %a1 : tensor<3xf32>
  %m0 = stablehlo.multiply %e0, %e1 : tensor<3xf32>
  %m1 = stablehlo.multiply %e1, %e0 : tensor<3xf32>
  %t:2 = stablehlo.optimization_barrier %m0, %m1 : tensor<3xf32>, tensor<3xf32>
  %s0:2 = "stablehlo.sort"(%m0, %arg0) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>, %u: tensor<f32>, %v: tensor<f32>):
    %p = stablehlo.compare LT, %x, %y : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  }) {dimension = 0 : i64} : (tensor<3xf32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  %s1:2 = "stablehlo.sort"(%m1, %arg0) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>, %u: tensor<f32>, %v: tensor<f32>):
    %p = stablehlo.compare LT, %x, %y : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  }) {dimension = 0 : i64} : (tensor<3xf32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  %f0 = func.call @pure(%m0) : (tensor<3xf32>) -> tensor<3xf32>
  %f1 = func.call @pure(%m1) : (tensor<3xf32>) -> tensor<3xf32>
  func.return %m0, %m1, %s0#1, %s1#1, %f0, %f1 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}
func.func private @pure(%arg0: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.negate %arg0 : tensor<3xf32>
  func.return %0 : tensor<3xf32>
}

// -----

// Ops that differ in an attribute, a constant's value (0.0 and -0.0 too, and
// NaNs with other bits), a result type or an operand's order stay apart.
// CHECK-LABEL: @main
// CHECK-NEXT: stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: stablehlo.constant dense<-0.000000e+00> : tensor<f32>
// CHECK-NEXT: stablehlo.constant dense<0x7FC00000> : tensor<f32>
// CHECK-NEXT: stablehlo.constant dense<0x7FC00001> : tensor<f32>
// CHECK-NEXT: stablehlo.constant dense<0.000000e+00> : tensor<f64>
// CHECK-NEXT: stablehlo.compare LT, %arg0, %arg1
// CHECK-NEXT: stablehlo.compare GT, %arg0, %arg1
// CHECK-NEXT: stablehlo.compare LT, %arg0, %arg1, FLOAT
// CHECK-NEXT: stablehlo.convert %arg0 : (tensor<f32>) -> tensor<f64>
// CHECK-NEXT: stablehlo.convert %arg0 : (tensor<f32>) -> tensor<f16>
// CHECK-NEXT: stablehlo.subtract %arg0, %arg1
// CHECK-NEXT: stablehlo.subtract %arg1, %arg0
// CHECK-NEXT: stablehlo.batch_norm_inference
// CHECK-SAME: epsilon = 0.000000e+00
// CHECK-NEXT: stablehlo.batch_norm_inference
// CHECK-SAME: epsilon = -0.000000e+00
// CHECK-NEXT: "test.use"
// CHECK-NEXT: return
func.func public @main(%arg0: tensor<f32>, %arg1: tensor<f32>, %arg2: tensor<2x2xf32>, %arg3: tensor<2xf32>) {
  %c0 = stablehlo.constant dense<0.0> : tensor<f32>
  %c1 = stablehlo.constant dense<-0.0> : tensor<f32>
  %c2 = stablehlo.constant dense<0x7FC00000> : tensor<f32>
  %c3 = stablehlo.constant dense<0x7FC00001> : tensor<f32>
  %c4 = stablehlo.constant dense<0.0> : tensor<f64>
  %p0 = stablehlo.compare LT, %arg0, %arg1 : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %p1 = stablehlo.compare GT, %arg0, %arg1 : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %p2 = stablehlo.compare LT, %arg0, %arg1, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %v0 = stablehlo.convert %arg0 : (tensor<f32>) -> tensor<f64>
  %v1 = stablehlo.convert %arg0 : (tensor<f32>) -> tensor<f16>
  %d0 = stablehlo.subtract %arg0, %arg1 : tensor<f32>
  %d1 = stablehlo.subtract %arg1, %arg0 : tensor<f32>
  %b0 = "stablehlo.batch_norm_inference"(%arg2, %arg3, %arg3, %arg3, %arg3) {epsilon = 0.0 : f32, feature_index = 1 : i64} : (tensor<2x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  %b1 = "stablehlo.batch_norm_inference"(%arg2, %arg3, %arg3, %arg3, %arg3) {epsilon = -0.0 : f32, feature_index = 1 : i64} : (tensor<2x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  "test.use"(%c0, %c1, %c2, %c3, %c4, %p0, %p1, %p2, %v0, %v1, %d0, %d1, %b0, %b1) : (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f64>, tensor<i1>, tensor<i1>, tensor<i1>, tensor<f64>, tensor<f16>, tensor<f32>, tensor<f32>, tensor<2x2xf32>, tensor<2x2xf32>) -> ()
  func.return
}

// -----

// Side effects never merge: custom_calls with has_side_effect = true, rng,
// optimization barriers, infeed, outfeed, collectives, unregistered ops, calls
// of impure functions, and an op whose region holds a side effect. A custom_call
// without the flag is a function of its operands (as in XLA) and merges.
// CHECK-LABEL: @main
// CHECK: stablehlo.custom_call @foo(%arg0)
// CHECK-NOT: stablehlo.custom_call @foo
// CHECK: stablehlo.custom_call @bar(%arg0) {has_side_effect = true}
// CHECK: stablehlo.custom_call @bar(%arg0) {has_side_effect = true}
// CHECK: stablehlo.rng %arg0, %arg0, %{{[^ ]+}}, distribution = UNIFORM
// CHECK: stablehlo.rng %arg0, %arg0, %{{[^ ]+}}, distribution = UNIFORM
// CHECK: stablehlo.optimization_barrier %arg0
// CHECK: stablehlo.optimization_barrier %arg0
// CHECK: stablehlo.infeed
// CHECK: stablehlo.infeed
// CHECK: stablehlo.outfeed
// CHECK: stablehlo.outfeed
// CHECK: stablehlo.replica_id
// CHECK: stablehlo.replica_id
// CHECK: stablehlo.all_reduce
// CHECK: stablehlo.all_reduce
// CHECK: "foo.op"(%arg0)
// CHECK: "foo.op"(%arg0)
// CHECK: call @noisy(%arg0)
// CHECK: call @noisy(%arg0)
// CHECK: stablehlo.while
// CHECK: stablehlo.while
func.func public @main(%arg0: tensor<f32>, %tok: !stablehlo.token) {
  %0 = stablehlo.custom_call @foo(%arg0) : (tensor<f32>) -> tensor<f32>
  %1 = stablehlo.custom_call @foo(%arg0) : (tensor<f32>) -> tensor<f32>
  %2 = stablehlo.custom_call @bar(%arg0) {has_side_effect = true} : (tensor<f32>) -> tensor<f32>
  %3 = stablehlo.custom_call @bar(%arg0) {has_side_effect = true} : (tensor<f32>) -> tensor<f32>
  %shape = stablehlo.constant dense<[]> : tensor<0xi64>
  %4 = stablehlo.rng %arg0, %arg0, %shape, distribution = UNIFORM : (tensor<f32>, tensor<f32>, tensor<0xi64>) -> tensor<f32>
  %5 = stablehlo.rng %arg0, %arg0, %shape, distribution = UNIFORM : (tensor<f32>, tensor<f32>, tensor<0xi64>) -> tensor<f32>
  %6 = stablehlo.optimization_barrier %arg0 : tensor<f32>
  %7 = stablehlo.optimization_barrier %arg0 : tensor<f32>
  %8:2 = "stablehlo.infeed"(%tok) : (!stablehlo.token) -> (tensor<f32>, !stablehlo.token)
  %9:2 = "stablehlo.infeed"(%tok) : (!stablehlo.token) -> (tensor<f32>, !stablehlo.token)
  %10 = "stablehlo.outfeed"(%arg0, %tok) : (tensor<f32>, !stablehlo.token) -> !stablehlo.token
  %11 = "stablehlo.outfeed"(%arg0, %tok) : (tensor<f32>, !stablehlo.token) -> !stablehlo.token
  %12 = stablehlo.replica_id : tensor<ui32>
  %13 = stablehlo.replica_id : tensor<ui32>
  %14 = "stablehlo.all_reduce"(%arg0) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<f32>) -> tensor<f32>
  %15 = "stablehlo.all_reduce"(%arg0) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %s = stablehlo.add %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<f32>) -> tensor<f32>
  %16 = "foo.op"(%arg0) : (tensor<f32>) -> tensor<f32>
  %17 = "foo.op"(%arg0) : (tensor<f32>) -> tensor<f32>
  %18 = func.call @noisy(%arg0) : (tensor<f32>) -> tensor<f32>
  %19 = func.call @noisy(%arg0) : (tensor<f32>) -> tensor<f32>
  %20 = stablehlo.while(%it = %arg0) : tensor<f32>
  cond {
    %p = stablehlo.compare LT, %it, %arg0 : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    stablehlo.custom_call @log(%it) {has_side_effect = true} : (tensor<f32>) -> ()
    stablehlo.return %it : tensor<f32>
  }
  %21 = stablehlo.while(%it = %arg0) : tensor<f32>
  cond {
    %p = stablehlo.compare LT, %it, %arg0 : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    stablehlo.custom_call @log(%it) {has_side_effect = true} : (tensor<f32>) -> ()
    stablehlo.return %it : tensor<f32>
  }
  func.return
}
func.func private @noisy(%arg0: tensor<f32>) -> tensor<f32> {
  stablehlo.custom_call @log(%arg0) {has_side_effect = true} : (tensor<f32>) -> ()
  func.return %arg0 : tensor<f32>
}

// -----

// Ops in a region reuse equal ops of enclosing blocks that come before the
// region's op (a constant, an op on captured values), also two levels deep.
// CHECK-LABEL: @main
// CHECK-NEXT: %[[ONE:[^ ]+]] = stablehlo.constant dense<1> : tensor<i64>
// CHECK-NEXT: %[[N:[^ ]+]] = stablehlo.negate %arg1 : tensor<i64>
// CHECK-NEXT: stablehlo.while
// CHECK-NEXT: cond {
// CHECK-NEXT: %[[P:[^ ]+]] = stablehlo.compare LT, %{{[^,]+}}, %[[N]]
// CHECK-NEXT: stablehlo.return %[[P]]
// CHECK-NEXT: } do {
// CHECK-NEXT: %[[R:[^ ]+]] = "stablehlo.if"
// CHECK-NEXT: %[[S:[^ ]+]] = stablehlo.add %{{[^,]+}}, %[[ONE]] : tensor<i64>
// CHECK-NEXT: stablehlo.return %[[S]]
// CHECK-NEXT: }, {
// CHECK-NEXT: stablehlo.return %[[N]]
// CHECK-NEXT: })
// CHECK-NEXT: stablehlo.return %[[R]]
func.func public @main(%arg0: tensor<i1>, %arg1: tensor<i64>) -> tensor<i64> {
  %one = stablehlo.constant dense<1> : tensor<i64>
  %neg = stablehlo.negate %arg1 : tensor<i64>
  %0 = stablehlo.while(%it = %arg1) : tensor<i64>
  cond {
    %n = stablehlo.negate %arg1 : tensor<i64>
    %p = stablehlo.compare LT, %it, %n : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %r = "stablehlo.if"(%arg0) ({
      %c = stablehlo.constant dense<1> : tensor<i64>
      %s = stablehlo.add %it, %c : tensor<i64>
      stablehlo.return %s : tensor<i64>
    }, {
      %n = stablehlo.negate %arg1 : tensor<i64>
      stablehlo.return %n : tensor<i64>
    }) : (tensor<i1>) -> tensor<i64>
    stablehlo.return %r : tensor<i64>
  }
  func.return %0 : tensor<i64>
}

// -----

// Ops of sibling regions (the two branches of an if) do not merge with each
// other, and an op after a region does not reuse one inside it.
// CHECK-LABEL: @main
// CHECK-NEXT: "stablehlo.if"
// CHECK-NEXT: stablehlo.constant dense<2>
// CHECK-NEXT: stablehlo.multiply
// CHECK-NEXT: stablehlo.return
// CHECK-NEXT: }, {
// CHECK-NEXT: stablehlo.constant dense<2>
// CHECK-NEXT: stablehlo.multiply
// CHECK-NEXT: stablehlo.return
// CHECK-NEXT: })
// CHECK-NEXT: stablehlo.constant dense<2>
// CHECK-NEXT: stablehlo.multiply
// CHECK-NEXT: stablehlo.add
func.func public @main(%arg0: tensor<i1>, %arg1: tensor<i64>) -> tensor<i64> {
  %0 = "stablehlo.if"(%arg0) ({
    %c = stablehlo.constant dense<2> : tensor<i64>
    %m = stablehlo.multiply %arg1, %c : tensor<i64>
    stablehlo.return %m : tensor<i64>
  }, {
    %c = stablehlo.constant dense<2> : tensor<i64>
    %m = stablehlo.multiply %arg1, %c : tensor<i64>
    stablehlo.return %m : tensor<i64>
  }) : (tensor<i1>) -> tensor<i64>
  %c = stablehlo.constant dense<2> : tensor<i64>
  %m = stablehlo.multiply %arg1, %c : tensor<i64>
  %1 = stablehlo.add %0, %m : tensor<i64>
  func.return %1 : tensor<i64>
}

// -----

// Ops with regions merge when the regions are structurally equal (argument
// names do not matter, captured values must be the same); other bodies stay.
// CHECK-LABEL: @main
// CHECK-NEXT: %[[Z:[^ ]+]] = stablehlo.constant dense<0.000000e+00>
// CHECK-NEXT: %[[R:[^ ]+]] = stablehlo.reduce(%arg0 init: %[[Z]])
// CHECK-NEXT: reducer
// CHECK-NEXT: stablehlo.add
// CHECK-NEXT: stablehlo.add
// CHECK-NEXT: stablehlo.return
// CHECK-NEXT: }
// CHECK-NEXT: %[[X:[^ ]+]] = stablehlo.reduce(%arg0 init: %[[Z]]) applies stablehlo.maximum
// CHECK-NEXT: %[[Y:[^ ]+]] = stablehlo.reduce(%arg0 init: %[[Z]])
// CHECK-NEXT: reducer
// CHECK-NEXT: stablehlo.add
// CHECK-NEXT: stablehlo.add %{{[^,]+}}, %arg1
// CHECK-NEXT: stablehlo.return
// CHECK-NEXT: }
// CHECK-NEXT: return %[[R]], %[[R]], %[[X]], %[[Y]]
func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) {
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %r0 = stablehlo.reduce(%arg0 init: %zero) across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
   reducer(%a: tensor<f32>, %b: tensor<f32>) {
    %s = stablehlo.add %a, %b : tensor<f32>
    %t = stablehlo.add %s, %zero : tensor<f32>
    stablehlo.return %t : tensor<f32>
  }
  %r1 = stablehlo.reduce(%arg0 init: %zero) across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
   reducer(%x: tensor<f32>, %y: tensor<f32>) {
    %c = stablehlo.constant dense<0.0> : tensor<f32>
    %s = stablehlo.add %x, %y : tensor<f32>
    %t = stablehlo.add %s, %c : tensor<f32>
    stablehlo.return %t : tensor<f32>
  }
  %r2 = stablehlo.reduce(%arg0 init: %zero) across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
   reducer(%a: tensor<f32>, %b: tensor<f32>) {
    %s = stablehlo.maximum %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }
  %r3 = stablehlo.reduce(%arg0 init: %zero) across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
   reducer(%a: tensor<f32>, %b: tensor<f32>) {
    %s = stablehlo.add %a, %b : tensor<f32>
    %t = stablehlo.add %s, %arg1 : tensor<f32>
    stablehlo.return %t : tensor<f32>
  }
  func.return %r0, %r1, %r2, %r3 : tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
}

// -----

// A copy the remat pass made (openhlo.remat) is not merged with its original: that would
// undo the recomputation.
// CHECK-LABEL: @main
// CHECK: %[[A:[^ ]+]] = stablehlo.exponential %arg0 :
// CHECK: %[[B:[^ ]+]] = stablehlo.exponential %arg0 {openhlo.remat}
// CHECK: stablehlo.add %[[A]], %[[B]]
func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.exponential %arg0 : tensor<4xf32>
  %1 = stablehlo.exponential %arg0 {openhlo.remat} : tensor<4xf32>
  %2 = stablehlo.add %0, %1 : tensor<4xf32>
  return %2 : tensor<4xf32>
}
