// RUN: openhlo opt %s --split-input-file --passes=canonicalize | filecheck %s

// canonicalize: constants to the right, free shape ops as reshapes, tuple and
// unit-reduction forwarding (see canonicalize_rules.py).

// A constant (also through broadcast_in_dim) moves to the right of commutative
// ops; two constants, or a non-commutative op, stay as they are.
// CHECK-LABEL: func.func public @constants_right
// CHECK: %[[B:[^ ]+]] = stablehlo.broadcast_in_dim
// CHECK: %[[K:[^ ]+]] = stablehlo.constant dense<[1, 2, 3, 4]>
// CHECK-NEXT: %[[M:[^ ]+]] = stablehlo.multiply %arg0, %[[B]]
// CHECK-NEXT: %[[X:[^ ]+]] = stablehlo.maximum %[[B]], %[[B]]
// CHECK-NEXT: %[[R:[^ ]+]] = stablehlo.xor %arg1, %[[K]]
// CHECK-NEXT: %[[S:[^ ]+]] = stablehlo.subtract %[[B]], %arg0
// CHECK-NEXT: return %[[M]], %[[X]], %[[R]], %[[S]]
func.func public @constants_right(%arg0: tensor<4xf32>, %arg1: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xi32>, tensor<4xf32>) {
  %c = stablehlo.constant dense<2.0> : tensor<f32>
  %b = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<4xf32>
  %k = stablehlo.constant dense<[1, 2, 3, 4]> : tensor<4xi32>
  %0 = stablehlo.multiply %b, %arg0 : tensor<4xf32>
  %1 = stablehlo.maximum %b, %b : tensor<4xf32>
  %2 = stablehlo.xor %k, %arg1 : tensor<4xi32>
  %3 = stablehlo.subtract %b, %arg0 : tensor<4xf32>
  func.return %0, %1, %2, %3 : tensor<4xf32>, tensor<4xf32>, tensor<4xi32>, tensor<4xf32>
}

// -----

// compare(c, x) becomes compare(x, c) with the mirrored direction; the compare
// type stays.
// CHECK-LABEL: func.func public @compare_mirrored
// CHECK: stablehlo.compare GT, %arg0, %{{[^ ]+}}, FLOAT
// CHECK-NEXT: stablehlo.compare LE, %arg0, %{{[^ ]+}}, FLOAT
// CHECK-NEXT: stablehlo.compare NE, %arg0, %{{[^ ]+}}, TOTALORDER
func.func public @compare_mirrored(%arg0: tensor<4xf32>) -> (tensor<4xi1>, tensor<4xi1>, tensor<4xi1>) {
  %c = stablehlo.constant dense<0.5> : tensor<4xf32>
  %0 = stablehlo.compare LT, %c, %arg0, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %1 = stablehlo.compare GE, %c, %arg0, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %2 = stablehlo.compare NE, %c, %arg0, TOTALORDER : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  func.return %0, %1, %2 : tensor<4xi1>, tensor<4xi1>, tensor<4xi1>
}

// -----

// select(not p, a, b) swaps its branches; a select of true/false splats is its
// predicate (or its negation). select(p, t, t) is the algebraic simplifier's.
// CHECK-LABEL: func.func public @selects
// CHECK: %[[T:[^ ]+]] = stablehlo.broadcast_in_dim
// CHECK-NEXT: %[[S:[^ ]+]] = stablehlo.select %arg0, %arg2, %arg1
// CHECK-NEXT: %[[N:[^ ]+]] = stablehlo.not %arg0
// CHECK-NEXT: %[[SAME:[^ ]+]] = stablehlo.select %arg0, %[[T]], %[[T]]
// CHECK-NEXT: return %[[S]], %arg0, %[[N]], %[[SAME]]
func.func public @selects(%p: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>) {
  %t = stablehlo.constant dense<true> : tensor<i1>
  %f = stablehlo.constant dense<false> : tensor<i1>
  %tb = stablehlo.broadcast_in_dim %t, dims = [] : (tensor<i1>) -> tensor<4xi1>
  %fb = stablehlo.broadcast_in_dim %f, dims = [] : (tensor<i1>) -> tensor<4xi1>
  %n = stablehlo.not %p : tensor<4xi1>
  %0 = stablehlo.select %n, %a, %b : tensor<4xi1>, tensor<4xf32>
  %1 = stablehlo.select %p, %tb, %fb : tensor<4xi1>, tensor<4xi1>
  %2 = stablehlo.select %p, %fb, %tb : tensor<4xi1>, tensor<4xi1>
  %3 = stablehlo.select %p, %tb, %tb : tensor<4xi1>, tensor<4xi1>
  func.return %0, %1, %2, %3 : tensor<4xf32>, tensor<4xi1>, tensor<4xi1>, tensor<4xi1>
}

// -----

// A broadcast_in_dim that only adds extent-1 dimensions and a transpose that
// only moves extent-1 dimensions are reshapes; real transposes and broadcasts stay.
// CHECK-LABEL: func.func public @free_shape_ops
// CHECK-NEXT: %[[A:[^ ]+]] = stablehlo.reshape %arg0 : (tensor<2x3xf32>) -> tensor<2x3x1xf32>
// CHECK-NEXT: %[[B:[^ ]+]] = stablehlo.reshape %arg1 : (tensor<1x3xf32>) -> tensor<3x1xf32>
// CHECK-NEXT: %[[C:[^ ]+]] = stablehlo.transpose %arg0, dims = [1, 0]
// CHECK-NEXT: %[[D:[^ ]+]] = stablehlo.reshape %arg2 : (tensor<3xf32>) -> tensor<1x3xf32>
// CHECK-NEXT: %[[E:[^ ]+]] = stablehlo.broadcast_in_dim %arg2, dims = [1]
// CHECK-NEXT: return %[[A]], %[[B]], %[[C]], %[[D]], %[[E]]
func.func public @free_shape_ops(%arg0: tensor<2x3xf32>, %arg1: tensor<1x3xf32>, %arg2: tensor<3xf32>) -> (tensor<2x3x1xf32>, tensor<3x1xf32>, tensor<3x2xf32>, tensor<1x3xf32>, tensor<2x3xf32>) {
  %0 = stablehlo.broadcast_in_dim %arg0, dims = [0, 1] : (tensor<2x3xf32>) -> tensor<2x3x1xf32>
  %1 = stablehlo.transpose %arg1, dims = [1, 0] : (tensor<1x3xf32>) -> tensor<3x1xf32>
  %2 = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %3 = stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<3xf32>) -> tensor<1x3xf32>
  %4 = stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
  func.return %0, %1, %2, %3, %4 : tensor<2x3x1xf32>, tensor<3x1xf32>, tensor<3x2xf32>, tensor<1x3xf32>, tensor<2x3xf32>
}

// -----

// get_tuple_element of a tuple is the element.
// CHECK-LABEL: func.func public @tuples
// CHECK-NEXT: %[[T:[^ ]+]] = stablehlo.tuple %arg0, %arg1
// CHECK-NEXT: return %arg1, %[[T]]
func.func public @tuples(%arg0: tensor<2xf32>, %arg1: tensor<i32>) -> (tensor<i32>, tuple<tensor<2xf32>, tensor<i32>>) {
  %t = stablehlo.tuple %arg0, %arg1 : tuple<tensor<2xf32>, tensor<i32>>
  %0 = stablehlo.get_tuple_element %t[1] : (tuple<tensor<2xf32>, tensor<i32>>) -> tensor<i32>
  func.return %0, %t : tensor<i32>, tuple<tensor<2xf32>, tensor<i32>>
}

// -----

// A reduce over extent-1 dimensions with a one-op body is that op on the
// (reshaped) operand and the (broadcast) init, the init on the right of a
// commutative op; reductions over longer dimensions stay.
// CHECK-LABEL: func.func public @unit_reductions
// CHECK: %[[X:[^ ]+]] = stablehlo.reshape %arg0 : (tensor<1x1x8xf32>) -> tensor<8xf32>
// CHECK-NEXT: %[[I:[^ ]+]] = stablehlo.broadcast_in_dim %{{[^ ]+}}, dims = [] : (tensor<f32>) -> tensor<8xf32>
// CHECK-NEXT: %[[S:[^ ]+]] = stablehlo.add %[[X]], %[[I]] : tensor<8xf32>
// CHECK-NEXT: %[[Y:[^ ]+]] = stablehlo.reshape %arg1 : (tensor<4x1xi32>) -> tensor<4xi32>
// CHECK-NEXT: %[[J:[^ ]+]] = stablehlo.broadcast_in_dim
// CHECK-NEXT: %[[M:[^ ]+]] = stablehlo.maximum %[[Y]], %[[J]] : tensor<4xi32>
// CHECK-NEXT: %[[R:[^ ]+]] = stablehlo.reduce(%arg2
// CHECK-NEXT: %[[Q:[^ ]+]] = stablehlo.reduce(%arg2
// CHECK: return %[[S]], %[[M]], %[[R]], %[[Q]]
func.func public @unit_reductions(%arg0: tensor<1x1x8xf32>, %arg1: tensor<4x1xi32>, %arg2: tensor<4x2xf32>) -> (tensor<8xf32>, tensor<4xi32>, tensor<4xf32>, tensor<4xf32>) {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.constant dense<-2147483648> : tensor<i32>
  %0 = stablehlo.reduce(%arg0 init: %z) applies stablehlo.add across dimensions = [0, 1] : (tensor<1x1x8xf32>, tensor<f32>) -> tensor<8xf32>
  %1 = stablehlo.reduce(%arg1 init: %m) applies stablehlo.maximum across dimensions = [1] : (tensor<4x1xi32>, tensor<i32>) -> tensor<4xi32>
  %2 = stablehlo.reduce(%arg2 init: %z) applies stablehlo.add across dimensions = [1] : (tensor<4x2xf32>, tensor<f32>) -> tensor<4xf32>
  %3 = stablehlo.reduce(%arg2 init: %z) across dimensions = [1] : (tensor<4x2xf32>, tensor<f32>) -> tensor<4xf32>
   reducer(%a: tensor<f32>, %b: tensor<f32>) {
    %s = stablehlo.subtract %a, %b : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }
  func.return %0, %1, %2, %3 : tensor<8xf32>, tensor<4xi32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// A non-commutative body keeps its operand order: subtract(elem, acc).
// CHECK-LABEL: func.func public @subtract_body
// CHECK-NEXT: %[[C:[^ ]+]] = stablehlo.constant dense<1.000000e+00>
// CHECK-NEXT: %[[X:[^ ]+]] = stablehlo.reshape %arg0
// CHECK-NEXT: %[[I:[^ ]+]] = stablehlo.broadcast_in_dim %[[C]]
// CHECK-NEXT: %[[S:[^ ]+]] = stablehlo.subtract %[[X]], %[[I]] : tensor<3xf32>
// CHECK-NEXT: return %[[S]]
func.func public @subtract_body(%arg0: tensor<3x1xf32>) -> tensor<3xf32> {
  %z = stablehlo.constant dense<1.0> : tensor<f32>
  %0 = stablehlo.reduce(%arg0 init: %z) across dimensions = [1] : (tensor<3x1xf32>, tensor<f32>) -> tensor<3xf32>
   reducer(%a: tensor<f32>, %b: tensor<f32>) {
    %s = stablehlo.subtract %b, %a : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }
  func.return %0 : tensor<3xf32>
}

// -----

// Complex multiply keeps its operand order (its parts may be computed with
// fused multiply-adds, whose rounding depends on the order); complex add moves.
// CHECK-LABEL: func.func public @complex_order
// CHECK: stablehlo.multiply %[[C:[^ ,]+]], %arg0
// CHECK-NEXT: stablehlo.add %arg0, %[[C]]
func.func public @complex_order(%arg0: tensor<2xcomplex<f32>>) -> (tensor<2xcomplex<f32>>, tensor<2xcomplex<f32>>) {
  %c = stablehlo.constant dense<(1.5, -2.0)> : tensor<2xcomplex<f32>>
  %0 = stablehlo.multiply %c, %arg0 : tensor<2xcomplex<f32>>
  %1 = stablehlo.add %c, %arg0 : tensor<2xcomplex<f32>>
  func.return %0, %1 : tensor<2xcomplex<f32>>, tensor<2xcomplex<f32>>
}

// -----

// chlo.square is the multiply it is defined as (JAX writes x**2 this way).
// CHECK-LABEL: func.func public @square
// CHECK-NEXT: %[[M:[^ ]+]] = stablehlo.multiply %arg0, %arg0 : tensor<4xf32>
// CHECK-NEXT: return %[[M]]
func.func public @square(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = chlo.square %arg0 : tensor<4xf32> -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
