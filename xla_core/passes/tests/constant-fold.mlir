// RUN: openhlo opt %s --split-input-file --passes=constant-fold | filecheck %s

// A chain of adds and multiplies on constants folds to one constant; the
// constants it consumed go with it.
// CHECK-LABEL: @main
// CHECK-NEXT: %[[C:[^ ]+]] = stablehlo.constant dense<[1.500000e+00, 1.000000e+01, 3.150000e+01]> : tensor<3xf32>
// CHECK-NEXT: return %[[C]] : tensor<3xf32>
func.func public @main() -> tensor<3xf32> {
  %0 = stablehlo.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %1 = stablehlo.constant dense<0.5> : tensor<3xf32>
  %2 = stablehlo.add %0, %1 : tensor<3xf32>
  %3 = stablehlo.multiply %2, %0 : tensor<3xf32>
  %4 = stablehlo.multiply %3, %0 : tensor<3xf32>
  %5 = stablehlo.add %4, %1 : tensor<3xf32>
  %6 = stablehlo.subtract %5, %1 : tensor<3xf32>
  %7 = stablehlo.add %6, %1 : tensor<3xf32>
  %8 = stablehlo.add %7, %2 : tensor<3xf32>
  %9 = stablehlo.subtract %8, %2 : tensor<3xf32>
  %10 = stablehlo.subtract %9, %1 : tensor<3xf32>
  %11 = stablehlo.multiply %10, %1 : tensor<3xf32>
  %12 = stablehlo.multiply %11, %1 : tensor<3xf32>
  %13 = stablehlo.multiply %12, %1 : tensor<3xf32>
  %14 = stablehlo.multiply %13, %1 : tensor<3xf32>
  %15 = stablehlo.multiply %14, %1 : tensor<3xf32>
  %16 = stablehlo.multiply %15, %1 : tensor<3xf32>
  %17 = stablehlo.multiply %16, %1 : tensor<3xf32>
  %18 = stablehlo.multiply %17, %1 : tensor<3xf32>
  %19 = stablehlo.constant dense<256.0> : tensor<3xf32>
  %20 = stablehlo.multiply %18, %19 : tensor<3xf32>
  func.return %20 : tensor<3xf32>
}

// -----

// An op with one non-constant operand stays, with its constant operand; the
// constant part of the chain before it still folds.
// CHECK-LABEL: @main
// CHECK-NEXT: %[[C:[^ ]+]] = stablehlo.constant dense<[2, 4]> : tensor<2xi32>
// CHECK-NEXT: %[[S:[^ ]+]] = stablehlo.add %[[C]], %arg0 : tensor<2xi32>
// CHECK-NEXT: %[[M:[^ ]+]] = stablehlo.multiply %[[S]], %[[C]] : tensor<2xi32>
// CHECK-NEXT: return %[[M]] : tensor<2xi32>
func.func public @main(%arg0: tensor<2xi32>) -> tensor<2xi32> {
  %0 = stablehlo.constant dense<[1, 2]> : tensor<2xi32>
  %1 = stablehlo.add %0, %0 : tensor<2xi32>
  %2 = stablehlo.add %1, %arg0 : tensor<2xi32>
  %3 = stablehlo.multiply %2, %1 : tensor<2xi32>
  func.return %3 : tensor<2xi32>
}

// -----

// A broadcast of a scalar folds when the result holds at most max-elements
// (65536) elements, splat or not, and stays above the limit; so does iota.
// CHECK-LABEL: @main
// CHECK-NEXT: %[[S:[^ ]+]] = stablehlo.constant dense<1.500000e+00> : tensor<f32>
// CHECK-NEXT: %[[AT:[^ ]+]] = stablehlo.constant dense<1.500000e+00> : tensor<256x256xf32>
// CHECK-NEXT: %[[ABOVE:[^ ]+]] = stablehlo.broadcast_in_dim %[[S]], dims = [] : (tensor<f32>) -> tensor<256x257xf32>
// CHECK-NEXT: %[[IOTA:[^ ]+]] = stablehlo.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
// CHECK-NEXT: %[[BIG:[^ ]+]] = stablehlo.iota dim = 0 : tensor<65537xi64>
// CHECK-NEXT: return %[[AT]], %[[ABOVE]], %[[IOTA]], %[[BIG]]
func.func public @main() -> (tensor<256x256xf32>, tensor<256x257xf32>, tensor<4xi64>, tensor<65537xi64>) {
  %0 = stablehlo.constant dense<1.5> : tensor<f32>
  %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<256x256xf32>
  %2 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f32>) -> tensor<256x257xf32>
  %3 = stablehlo.iota dim = 0 : tensor<4xi64>
  %4 = stablehlo.iota dim = 0 : tensor<65537xi64>
  func.return %1, %2, %3, %4 : tensor<256x256xf32>, tensor<256x257xf32>, tensor<4xi64>, tensor<65537xi64>
}

// -----

// Side effects, collectives, randomness, custom calls and barriers stay even
// when every operand is a constant.
// CHECK-LABEL: @main
// CHECK-NEXT: %[[A:[^ ]+]] = stablehlo.constant dense<0> : tensor<i32>
// CHECK-NEXT: %[[B:[^ ]+]] = stablehlo.constant dense<10> : tensor<i32>
// CHECK-NEXT: stablehlo.custom_call @foo(%[[A]])
// CHECK-NEXT: stablehlo.custom_call @bar(%[[A]])
// CHECK-NEXT: %[[N:[^ ]+]] = stablehlo.constant dense<3> : tensor<1xi64>
// CHECK-NEXT: stablehlo.rng %[[A]], %[[B]], %[[N]], distribution = UNIFORM
// CHECK-NEXT: stablehlo.replica_id
// CHECK-NEXT: stablehlo.optimization_barrier %[[A]]
// CHECK-NEXT: %[[S:[^ ]+]] = stablehlo.create_token
// CHECK-NEXT: "stablehlo.outfeed"(%[[A]], %[[S]])
// CHECK-NEXT: "stablehlo.all_reduce"(%[[B]])
// CHECK: check.expect_eq_const %[[B]], dense<10> : tensor<i32>
// CHECK-NEXT: return
func.func public @main() -> (tensor<i32>, tensor<i32>, tensor<3xi32>, tensor<ui32>, tensor<i32>, tensor<i32>) {
  %0 = stablehlo.constant dense<0> : tensor<i32>
  %1 = stablehlo.constant dense<10> : tensor<i32>
  %2 = stablehlo.custom_call @foo(%0) {has_side_effect = true} : (tensor<i32>) -> tensor<i32>
  %3 = stablehlo.custom_call @bar(%0) : (tensor<i32>) -> tensor<i32>
  %4 = stablehlo.constant dense<3> : tensor<1xi64>
  %5 = stablehlo.rng %0, %1, %4, distribution = UNIFORM : (tensor<i32>, tensor<i32>, tensor<1xi64>) -> tensor<3xi32>
  %6 = stablehlo.replica_id : tensor<ui32>
  %7 = stablehlo.optimization_barrier %0 : tensor<i32>
  %8 = stablehlo.create_token : !stablehlo.token
  %9 = "stablehlo.outfeed"(%0, %8) : (tensor<i32>, !stablehlo.token) -> !stablehlo.token
  %10 = "stablehlo.all_reduce"(%1) ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    %s = stablehlo.add %a, %b : tensor<i32>
    stablehlo.return %s : tensor<i32>
  }) {replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<i32>) -> tensor<i32>
  check.expect_eq_const %1, dense<10> : tensor<i32>
  func.return %2, %3, %5, %6, %7, %10 : tensor<i32>, tensor<i32>, tensor<3xi32>, tensor<ui32>, tensor<i32>, tensor<i32>
}

// -----

// A reduce of a constant folds, its body reading a constant from outside it;
// so does a multi-result op (a two-operand sort), one constant per result.
// CHECK-LABEL: @main
// CHECK-NEXT: %[[R:[^ ]+]] = stablehlo.constant dense<1.000000e+01> : tensor<f32>
// CHECK-NEXT: %[[K:[^ ]+]] = stablehlo.constant dense<[3, 2, 1]> : tensor<3xi32>
// CHECK-NEXT: %[[V:[^ ]+]] = stablehlo.constant dense<[4.000000e+00, 2.000000e+00, 1.000000e+00]> : tensor<3xf32>
// CHECK-NEXT: return %[[R]], %[[K]], %[[V]]
func.func public @main() -> (tensor<f32>, tensor<3xi32>, tensor<3xf32>) {
  %0 = stablehlo.constant dense<[2.0, 4.0, 1.0]> : tensor<3xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %one = stablehlo.constant dense<1.0> : tensor<f32>
  %1 = stablehlo.reduce(%0 init: %zero) across dimensions = [0] : (tensor<3xf32>, tensor<f32>) -> tensor<f32>
   reducer(%a: tensor<f32>, %b: tensor<f32>) {
    %s = stablehlo.add %a, %b : tensor<f32>
    %t = stablehlo.add %s, %one : tensor<f32>
    stablehlo.return %t : tensor<f32>
  }
  %2 = stablehlo.constant dense<[2, 3, 1]> : tensor<3xi32>
  %3:2 = "stablehlo.sort"(%2, %0) ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>, %c: tensor<f32>, %d: tensor<f32>):
    %p = stablehlo.compare GT, %a, %b : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  }) {dimension = 0 : i64} : (tensor<3xi32>, tensor<3xf32>) -> (tensor<3xi32>, tensor<3xf32>)
  func.return %1, %3#0, %3#1 : tensor<f32>, tensor<3xi32>, tensor<3xf32>
}

// -----

// A while loop stays (its trip count is unknown until it runs), but constant
// ops inside its body fold; ops on the loop's values stay.
// CHECK-LABEL: @main
// CHECK: stablehlo.while
// CHECK: cond
// CHECK-NEXT: %[[TEN:[^ ]+]] = stablehlo.constant dense<10> : tensor<i64>
// CHECK-NEXT: stablehlo.compare LT, %{{[^,]+}}, %[[TEN]]
// CHECK: do
// CHECK-NEXT: %[[TWO:[^ ]+]] = stablehlo.constant dense<2> : tensor<i64>
// CHECK-NEXT: stablehlo.add %{{[^,]+}}, %[[TWO]] : tensor<i64>
func.func public @main(%arg0: tensor<i64>) -> tensor<i64> {
  %0 = stablehlo.while(%iterArg = %arg0) : tensor<i64>
  cond {
    %c = stablehlo.constant dense<10> : tensor<i64>
    %p = stablehlo.compare LT, %iterArg, %c : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %c1 = stablehlo.constant dense<1> : tensor<i64>
    %c2 = stablehlo.add %c1, %c1 : tensor<i64>
    %n = stablehlo.add %iterArg, %c2 : tensor<i64>
    stablehlo.return %n : tensor<i64>
  }
  func.return %0 : tensor<i64>
}

// -----

// Quantized types stay; so does a region op whose body reads a non-constant
// value from outside, and a call (inline first). Exact dtypes survive folding:
// a comparison gives i1; bf16 sums round to bf16 (1 + 3/256 is a tie: to even).
// CHECK-LABEL: @main
// CHECK: stablehlo.uniform_quantize
// CHECK: stablehlo.reduce
// CHECK: stablehlo.add %{{[^,]+}}, %arg0
// CHECK: stablehlo.constant dense<[true, false]> : tensor<2xi1>
// CHECK-NEXT: stablehlo.constant dense<[1.015630e+00, 2.015630e+00]> : tensor<2xbf16>
// CHECK-NEXT: call @id
func.func public @main(%arg0: tensor<f32>) -> (tensor<2x!quant.uniform<i8:f32, 0.5>>, tensor<f32>, tensor<2xi1>, tensor<2xbf16>, tensor<f32>) {
  %0 = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %1 = stablehlo.uniform_quantize %0 : (tensor<2xf32>) -> tensor<2x!quant.uniform<i8:f32, 0.5>>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %2 = stablehlo.reduce(%0 init: %zero) across dimensions = [0] : (tensor<2xf32>, tensor<f32>) -> tensor<f32>
   reducer(%a: tensor<f32>, %b: tensor<f32>) {
    %s = stablehlo.add %a, %b : tensor<f32>
    %t = stablehlo.add %s, %arg0 : tensor<f32>
    stablehlo.return %t : tensor<f32>
  }
  %3 = stablehlo.constant dense<[1.5, 0.5]> : tensor<2xf32>
  %4 = stablehlo.compare LT, %0, %3 : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xi1>
  %5 = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xbf16>
  %6 = stablehlo.constant dense<[0.01171875, 0.01171875]> : tensor<2xbf16>
  %7 = stablehlo.add %5, %6 : tensor<2xbf16>
  %8 = func.call @id(%zero) : (tensor<f32>) -> tensor<f32>
  func.return %1, %2, %4, %7, %8 : tensor<2x!quant.uniform<i8:f32, 0.5>>, tensor<f32>, tensor<2xi1>, tensor<2xbf16>, tensor<f32>
}
func.func private @id(%arg0: tensor<f32>) -> tensor<f32> {
  func.return %arg0 : tensor<f32>
}

// -----

// Dynamic-shaped results, tuples and tokens stay.
// CHECK-LABEL: @main
// CHECK-NEXT: %[[S:[^ ]+]] = stablehlo.constant dense<2> : tensor<1xi64>
// CHECK-NEXT: stablehlo.dynamic_iota %[[S]], dim = 0 : (tensor<1xi64>) -> tensor<?xi32>
// CHECK-NEXT: %[[A:[^ ]+]] = stablehlo.constant dense<[1, 2]> : tensor<2xi32>
// CHECK-NEXT: %[[T:[^ ]+]] = stablehlo.tuple %[[A]], %[[A]]
// CHECK-NEXT: stablehlo.get_tuple_element %[[T]][0]
// CHECK-NEXT: stablehlo.after_all
// CHECK-NEXT: return
func.func public @main() -> (tensor<?xi32>, tensor<2xi32>, !stablehlo.token) {
  %s = stablehlo.constant dense<2> : tensor<1xi64>
  %d = stablehlo.dynamic_iota %s, dim = 0 : (tensor<1xi64>) -> tensor<?xi32>
  %a = stablehlo.constant dense<[1, 2]> : tensor<2xi32>
  %t = stablehlo.tuple %a, %a : tuple<tensor<2xi32>, tensor<2xi32>>
  %g = stablehlo.get_tuple_element %t[0] : (tuple<tensor<2xi32>, tensor<2xi32>>) -> tensor<2xi32>
  %k = stablehlo.after_all : !stablehlo.token
  func.return %d, %g, %k : tensor<?xi32>, tensor<2xi32>, !stablehlo.token
}
