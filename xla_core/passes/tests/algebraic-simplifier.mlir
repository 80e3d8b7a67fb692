// RUN: openhlo opt %s --split-input-file --passes=algebraic-simplifier | filecheck %s

// Float add: -0.0 is the identity (either side, also through a broadcast of a
// scalar constant); +0.0 is not (-0.0 + +0.0 is +0.0), so x + 0.0 stays.
// Subtract: x - (+0.0) is x; x - (-0.0) stays (unused here: left for dce).
// The replaced ops and the constants only they used are erased.
// CHECK-LABEL: func.func public @float_add_sub
// CHECK-NEXT: %[[NZ:[^ ]+]] = stablehlo.constant dense<-0.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[NZB:[^ ]+]] = stablehlo.broadcast_in_dim %[[NZ]], dims = [] : (tensor<f32>) -> tensor<3xf32>
// CHECK-NEXT: %[[PZ:[^ ]+]] = stablehlo.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK-NEXT: %[[A:[^ ]+]] = stablehlo.add %arg0, %[[PZ]] : tensor<3xf32>
// CHECK-NEXT: %[[B:[^ ]+]] = stablehlo.add %[[PZ]], %arg0 : tensor<3xf32>
// CHECK-NEXT: stablehlo.subtract %arg0, %[[NZB]] : tensor<3xf32>
// CHECK-NEXT: return %arg0, %[[A]], %[[B]], %arg0 :
func.func public @float_add_sub(%arg0: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
  %nz = stablehlo.constant dense<-0.0> : tensor<f32>
  %nzb = stablehlo.broadcast_in_dim %nz, dims = [] : (tensor<f32>) -> tensor<3xf32>
  %pz = stablehlo.constant dense<0.0> : tensor<3xf32>
  %0 = stablehlo.add %arg0, %nzb : tensor<3xf32>
  %1 = stablehlo.add %nzb, %0 : tensor<3xf32>
  %2 = stablehlo.add %arg0, %pz : tensor<3xf32>
  %3 = stablehlo.add %pz, %arg0 : tensor<3xf32>
  %4 = stablehlo.subtract %arg0, %pz : tensor<3xf32>
  %5 = stablehlo.subtract %arg0, %nzb : tensor<3xf32>
  func.return %1, %2, %3, %4 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}

// -----

// Complex add is componentwise: (-0.0, -0.0) is the identity, (0.0, 0.0) is
// not. Complex multiply by (1, 0) is not an identity (b * 0 is NaN for
// infinite b), so it stays.
// CHECK-LABEL: func.func public @complex_add_mul
// CHECK-NEXT: %[[PZ:[^ ]+]] = stablehlo.constant dense<(0.000000e+00,0.000000e+00)>
// CHECK-NEXT: %[[ONE:[^ ]+]] = stablehlo.constant dense<(1.000000e+00,0.000000e+00)>
// CHECK-NEXT: %[[A:[^ ]+]] = stablehlo.add %arg0, %[[PZ]]
// CHECK-NEXT: %[[M:[^ ]+]] = stablehlo.multiply %arg0, %[[ONE]]
// CHECK-NEXT: return %arg0, %[[A]], %[[M]] :
func.func public @complex_add_mul(%arg0: tensor<2xcomplex<f32>>) -> (tensor<2xcomplex<f32>>, tensor<2xcomplex<f32>>, tensor<2xcomplex<f32>>) {
  %nz = stablehlo.constant dense<(-0.0, -0.0)> : tensor<2xcomplex<f32>>
  %pz = stablehlo.constant dense<(0.0, 0.0)> : tensor<2xcomplex<f32>>
  %one = stablehlo.constant dense<(1.0, 0.0)> : tensor<2xcomplex<f32>>
  %0 = stablehlo.add %arg0, %nz : tensor<2xcomplex<f32>>
  %1 = stablehlo.add %0, %pz : tensor<2xcomplex<f32>>
  %2 = stablehlo.multiply %0, %one : tensor<2xcomplex<f32>>
  func.return %0, %1, %2 : tensor<2xcomplex<f32>>, tensor<2xcomplex<f32>>, tensor<2xcomplex<f32>>
}

// -----

// Integers: 0 is the identity of add and subtract (either sign question is
// moot), 1 of multiply and divide; a constant that is not a splat stays.
// CHECK-LABEL: func.func public @int_identities
// CHECK-NEXT: %[[C:[^ ]+]] = stablehlo.constant dense<[1, 2]> : tensor<2xi32>
// CHECK-NEXT: %[[M:[^ ]+]] = stablehlo.multiply %arg0, %[[C]] : tensor<2xi32>
// CHECK-NEXT: return %arg0, %[[M]] :
func.func public @int_identities(%arg0: tensor<2xi32>) -> (tensor<2xi32>, tensor<2xi32>) {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %z = stablehlo.broadcast_in_dim %zero, dims = [] : (tensor<i32>) -> tensor<2xi32>
  %one = stablehlo.constant dense<1> : tensor<2xi32>
  %mixed = stablehlo.constant dense<[1, 2]> : tensor<2xi32>
  %0 = stablehlo.add %z, %arg0 : tensor<2xi32>
  %1 = stablehlo.subtract %0, %z : tensor<2xi32>
  %2 = stablehlo.multiply %one, %1 : tensor<2xi32>
  %3 = stablehlo.divide %2, %one : tensor<2xi32>
  %4 = stablehlo.multiply %3, %mixed : tensor<2xi32>
  func.return %3, %4 : tensor<2xi32>, tensor<2xi32>
}

// -----

// Float multiply and divide by 1.0 are exact (NaN, inf, -0.0 included);
// divide with 1.0 on the left is not an identity and stays.
// CHECK-LABEL: func.func public @float_mul_div
// CHECK-NEXT: %[[ONE:[^ ]+]] = stablehlo.constant dense<1.000000e+00> : tensor<4xbf16>
// CHECK-NEXT: %[[D:[^ ]+]] = stablehlo.divide %[[ONE]], %arg0 : tensor<4xbf16>
// CHECK-NEXT: return %arg0, %[[D]] :
func.func public @float_mul_div(%arg0: tensor<4xbf16>) -> (tensor<4xbf16>, tensor<4xbf16>) {
  %one = stablehlo.constant dense<1.0> : tensor<4xbf16>
  %0 = stablehlo.multiply %arg0, %one : tensor<4xbf16>
  %1 = stablehlo.multiply %one, %0 : tensor<4xbf16>
  %2 = stablehlo.divide %1, %one : tensor<4xbf16>
  %3 = stablehlo.divide %one, %arg0 : tensor<4xbf16>
  func.return %2, %3 : tensor<4xbf16>, tensor<4xbf16>
}

// -----

// and with true / all ones, or with false / zero; i1 add (or) with false and
// multiply (and) with true. and with 1 on i32 is not an identity and stays.
// CHECK-LABEL: func.func public @logic
// CHECK-NEXT: %[[ONE:[^ ]+]] = stablehlo.constant dense<1> : tensor<2xi32>
// CHECK-NEXT: %[[A:[^ ]+]] = stablehlo.and %arg1, %[[ONE]] : tensor<2xi32>
// CHECK-NEXT: return %arg0, %arg1, %arg2, %[[A]] :
func.func public @logic(%arg0: tensor<2xi1>, %arg1: tensor<2xi32>, %arg2: tensor<2xui8>) -> (tensor<2xi1>, tensor<2xi32>, tensor<2xui8>, tensor<2xi32>) {
  %t = stablehlo.constant dense<true> : tensor<2xi1>
  %f = stablehlo.constant dense<false> : tensor<2xi1>
  %0 = stablehlo.and %arg0, %t : tensor<2xi1>
  %1 = stablehlo.or %f, %0 : tensor<2xi1>
  %2 = stablehlo.add %1, %f : tensor<2xi1>
  %3 = stablehlo.multiply %t, %2 : tensor<2xi1>
  %m1 = stablehlo.constant dense<-1> : tensor<2xi32>
  %z = stablehlo.constant dense<0> : tensor<2xi32>
  %one = stablehlo.constant dense<1> : tensor<2xi32>
  %4 = stablehlo.and %m1, %arg1 : tensor<2xi32>
  %5 = stablehlo.or %4, %z : tensor<2xi32>
  %6 = stablehlo.and %arg1, %one : tensor<2xi32>
  %max = stablehlo.constant dense<255> : tensor<2xui8>
  %7 = stablehlo.and %arg2, %max : tensor<2xui8>
  func.return %3, %5, %7, %6 : tensor<2xi1>, tensor<2xi32>, tensor<2xui8>, tensor<2xi32>
}

// -----

// select with a constant predicate (a scalar one, and a splat tensor one)
// picks a branch; select(p, a, a) is a. A predicate that is not a constant
// splat keeps the select.
// CHECK-LABEL: func.func public @select
// CHECK-NEXT: %[[P:[^ ]+]] = stablehlo.constant dense<[true, false]> : tensor<2xi1>
// CHECK-NEXT: %[[S:[^ ]+]] = stablehlo.select %[[P]], %arg0, %arg1 : tensor<2xi1>, tensor<2xf32>
// CHECK-NEXT: return %arg0, %arg1, %arg1, %[[S]] :
func.func public @select(%arg0: tensor<2xf32>, %arg1: tensor<2xf32>, %arg2: tensor<2xi1>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  %t = stablehlo.constant dense<true> : tensor<i1>
  %f = stablehlo.constant dense<false> : tensor<2xi1>
  %p = stablehlo.constant dense<[true, false]> : tensor<2xi1>
  %0 = stablehlo.select %t, %arg0, %arg1 : tensor<i1>, tensor<2xf32>
  %1 = stablehlo.select %f, %arg0, %arg1 : tensor<2xi1>, tensor<2xf32>
  %2 = stablehlo.select %arg2, %arg1, %arg1 : tensor<2xi1>, tensor<2xf32>
  %3 = stablehlo.select %p, %arg0, %arg1 : tensor<2xi1>, tensor<2xf32>
  func.return %0, %1, %2, %3 : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}

// -----

// negate(negate(x)) and not(not(x)) are x (a chain of four goes in one
// sweep); abs(abs(x)) is abs(x), also for complex x; negate(abs(x)) stays.
// CHECK-LABEL: func.func public @unary
// CHECK-NEXT: %[[ABS:[^ ]+]] = stablehlo.abs %arg0 : tensor<3xf32>
// CHECK-NEXT: %[[NEG:[^ ]+]] = stablehlo.negate %[[ABS]] : tensor<3xf32>
// CHECK-NEXT: %[[CABS:[^ ]+]] = stablehlo.abs %arg2 : (tensor<3xcomplex<f32>>) -> tensor<3xf32>
// CHECK-NEXT: return %arg0, %arg1, %[[ABS]], %[[NEG]], %[[CABS]] :
func.func public @unary(%arg0: tensor<3xf32>, %arg1: tensor<3xi8>, %arg2: tensor<3xcomplex<f32>>) -> (tensor<3xf32>, tensor<3xi8>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
  %0 = stablehlo.negate %arg0 : tensor<3xf32>
  %1 = stablehlo.negate %0 : tensor<3xf32>
  %2 = stablehlo.negate %1 : tensor<3xf32>
  %3 = stablehlo.negate %2 : tensor<3xf32>
  %4 = stablehlo.not %arg1 : tensor<3xi8>
  %5 = stablehlo.not %4 : tensor<3xi8>
  %6 = stablehlo.abs %arg0 : tensor<3xf32>
  %7 = stablehlo.abs %6 : tensor<3xf32>
  %8 = stablehlo.negate %7 : tensor<3xf32>
  %9 = stablehlo.abs %arg2 : (tensor<3xcomplex<f32>>) -> tensor<3xf32>
  %10 = stablehlo.abs %9 : tensor<3xf32>
  func.return %3, %5, %7, %8, %10 : tensor<3xf32>, tensor<3xi8>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}

// -----

// reshape to the same type is x; reshape(reshape(x)) is one reshape, or x
// when it comes back to x's type. An inner reshape with another use stays.
// CHECK-LABEL: func.func public @reshape
// CHECK-NEXT: %[[R1:[^ ]+]] = stablehlo.reshape %arg0 : (tensor<2x3xf32>) -> tensor<6xf32>
// CHECK-NEXT: %[[R2:[^ ]+]] = stablehlo.reshape %arg0 : (tensor<2x3xf32>) -> tensor<3x2xf32>
// CHECK-NEXT: return %arg0, %[[R2]], %[[R1]] :
func.func public @reshape(%arg0: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<3x2xf32>, tensor<6xf32>) {
  %0 = stablehlo.reshape %arg0 : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = stablehlo.reshape %0 : (tensor<2x3xf32>) -> tensor<6xf32>
  %2 = stablehlo.reshape %1 : (tensor<6xf32>) -> tensor<2x3xf32>
  %3 = stablehlo.reshape %1 : (tensor<6xf32>) -> tensor<3x2xf32>
  func.return %2, %3, %1 : tensor<2x3xf32>, tensor<3x2xf32>, tensor<6xf32>
}

// -----

// transpose by the identity is x; two transposes compose into one
// (result dim i is x's dim p[q[i]]), or into x when they cancel.
// CHECK-LABEL: func.func public @transpose
// CHECK-NEXT: %[[T:[^ ]+]] = stablehlo.transpose %arg0, dims = [2, 0, 1] : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
// CHECK-NEXT: return %arg0, %[[T]], %arg0 :
func.func public @transpose(%arg0: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<4x2x3xf32>, tensor<2x3x4xf32>) {
  %0 = stablehlo.transpose %arg0, dims = [0, 1, 2] : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %1 = stablehlo.transpose %0, dims = [1, 0, 2] : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  %2 = stablehlo.transpose %1, dims = [2, 1, 0] : (tensor<3x2x4xf32>) -> tensor<4x2x3xf32>
  %3 = stablehlo.transpose %arg0, dims = [1, 2, 0] : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
  %4 = stablehlo.transpose %3, dims = [2, 0, 1] : (tensor<3x4x2xf32>) -> tensor<2x3x4xf32>
  func.return %0, %2, %4 : tensor<2x3x4xf32>, tensor<4x2x3xf32>, tensor<2x3x4xf32>
}

// -----

// broadcast_in_dim with identity dims and the same shape is x; with identity
// dims that expand a size-1 dim it stays; two compose into one.
// CHECK-LABEL: func.func public @broadcast
// CHECK-NEXT: %[[E:[^ ]+]] = stablehlo.broadcast_in_dim %arg1, dims = [0, 1] : (tensor<1x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[B:[^ ]+]] = stablehlo.broadcast_in_dim %arg0, dims = [2] : (tensor<3xf32>) -> tensor<4x2x3xf32>
// CHECK-NEXT: return %arg0, %[[E]], %[[B]] :
func.func public @broadcast(%arg0: tensor<3xf32>, %arg1: tensor<1x3xf32>) -> (tensor<3xf32>, tensor<2x3xf32>, tensor<4x2x3xf32>) {
  %0 = stablehlo.broadcast_in_dim %arg0, dims = [0] : (tensor<3xf32>) -> tensor<3xf32>
  %1 = stablehlo.broadcast_in_dim %arg1, dims = [0, 1] : (tensor<1x3xf32>) -> tensor<2x3xf32>
  %2 = stablehlo.broadcast_in_dim %0, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
  %3 = stablehlo.broadcast_in_dim %2, dims = [1, 2] : (tensor<2x3xf32>) -> tensor<4x2x3xf32>
  func.return %0, %1, %3 : tensor<3xf32>, tensor<2x3xf32>, tensor<4x2x3xf32>
}

// -----

// convert to the same type is x. A convert pair folds when the middle type
// holds every source value exactly: f32 -> f64 -> f32 is x, i8 -> i32 -> i64
// and bf16 -> f32 -> f16 are one convert. f32 -> f16 -> f32 rounds and stays;
// i32 -> f64 -> i8 saturates where i32 -> i8 wraps, and stays.
// CHECK-LABEL: func.func public @convert
// CHECK-NEXT: %[[I64:[^ ]+]] = stablehlo.convert %arg1 : (tensor<2xi8>) -> tensor<2xi64>
// CHECK-NEXT: %[[H:[^ ]+]] = stablehlo.convert %arg0 : (tensor<2xf32>) -> tensor<2xf16>
// CHECK-NEXT: %[[F:[^ ]+]] = stablehlo.convert %[[H]] : (tensor<2xf16>) -> tensor<2xf32>
// CHECK-NEXT: %[[D:[^ ]+]] = stablehlo.convert %arg2 : (tensor<2xi32>) -> tensor<2xf64>
// CHECK-NEXT: %[[S:[^ ]+]] = stablehlo.convert %[[D]] : (tensor<2xf64>) -> tensor<2xi8>
// CHECK-NEXT: %[[BH:[^ ]+]] = stablehlo.convert %arg3 : (tensor<2xbf16>) -> tensor<2xf16>
// CHECK-NEXT: return %arg0, %[[I64]], %[[F]], %[[S]], %[[BH]] :
func.func public @convert(%arg0: tensor<2xf32>, %arg1: tensor<2xi8>, %arg2: tensor<2xi32>, %arg3: tensor<2xbf16>) -> (tensor<2xf32>, tensor<2xi64>, tensor<2xf32>, tensor<2xi8>, tensor<2xf16>) {
  %0 = stablehlo.convert %arg0 : tensor<2xf32>
  %1 = stablehlo.convert %0 : (tensor<2xf32>) -> tensor<2xf64>
  %2 = stablehlo.convert %1 : (tensor<2xf64>) -> tensor<2xf32>
  %3 = stablehlo.convert %arg1 : (tensor<2xi8>) -> tensor<2xi32>
  %4 = stablehlo.convert %3 : (tensor<2xi32>) -> tensor<2xi64>
  %5 = stablehlo.convert %arg0 : (tensor<2xf32>) -> tensor<2xf16>
  %6 = stablehlo.convert %5 : (tensor<2xf16>) -> tensor<2xf32>
  %7 = stablehlo.convert %arg2 : (tensor<2xi32>) -> tensor<2xf64>
  %8 = stablehlo.convert %7 : (tensor<2xf64>) -> tensor<2xi8>
  %9 = stablehlo.convert %arg3 : (tensor<2xbf16>) -> tensor<2xf32>
  %10 = stablehlo.convert %9 : (tensor<2xf32>) -> tensor<2xf16>
  func.return %2, %4, %6, %8, %10 : tensor<2xf32>, tensor<2xi64>, tensor<2xf32>, tensor<2xi8>, tensor<2xf16>
}

// -----

// A slice keeping the whole operand is x; a strided or partial slice stays.
// concatenate of one operand is x. pad by nothing is x; real padding stays.
// CHECK-LABEL: func.func public @slice_concat_pad
// CHECK-NEXT: %[[S:[^ ]+]] = stablehlo.slice %arg0 [0:4:2, 0:3]
// CHECK-NEXT: %[[Z:[^ ]+]] = stablehlo.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[P:[^ ]+]] = stablehlo.pad %arg0, %[[Z]], low = [1, 0], high = [0, 0], interior = [0, 0]
// CHECK-NEXT: return %arg0, %[[S]], %[[P]] :
func.func public @slice_concat_pad(%arg0: tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<2x3xf32>, tensor<5x3xf32>) {
  %0 = stablehlo.slice %arg0 [0:4, 0:3] : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %1 = stablehlo.slice %0 [0:4:2, 0:3] : (tensor<4x3xf32>) -> tensor<2x3xf32>
  %2 = stablehlo.concatenate %0, dim = 0 : (tensor<4x3xf32>) -> tensor<4x3xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %3 = stablehlo.pad %2, %z, low = [0, 0], high = [0, 0], interior = [0, 0] : (tensor<4x3xf32>, tensor<f32>) -> tensor<4x3xf32>
  %4 = stablehlo.pad %arg0, %z, low = [1, 0], high = [0, 0], interior = [0, 0] : (tensor<4x3xf32>, tensor<f32>) -> tensor<5x3xf32>
  func.return %3, %1, %4 : tensor<4x3xf32>, tensor<2x3xf32>, tensor<5x3xf32>
}

// -----

// reverse of no dims, or of dims of extent 1, is x; reverse(reverse(x)) of
// the same dims is x; of other dims it is one reverse of the dims reversed
// an odd number of times.
// CHECK-LABEL: func.func public @reverse
// CHECK-NEXT: %[[R:[^ ]+]] = stablehlo.reverse %arg0, dims = [0, 2] : tensor<2x1x3xf32>
// CHECK-NEXT: return %arg0, %arg0, %arg0, %[[R]] :
func.func public @reverse(%arg0: tensor<2x1x3xf32>) -> (tensor<2x1x3xf32>, tensor<2x1x3xf32>, tensor<2x1x3xf32>, tensor<2x1x3xf32>) {
  %0 = stablehlo.reverse %arg0, dims = [] : tensor<2x1x3xf32>
  %1 = stablehlo.reverse %arg0, dims = [1] : tensor<2x1x3xf32>
  %2 = stablehlo.reverse %arg0, dims = [0, 2] : tensor<2x1x3xf32>
  %3 = stablehlo.reverse %2, dims = [2, 0] : tensor<2x1x3xf32>
  %4 = stablehlo.reverse %arg0, dims = [0] : tensor<2x1x3xf32>
  %5 = stablehlo.reverse %4, dims = [2] : tensor<2x1x3xf32>
  func.return %0, %1, %3, %5 : tensor<2x1x3xf32>, tensor<2x1x3xf32>, tensor<2x1x3xf32>, tensor<2x1x3xf32>
}

// -----

// Rules apply inside regions too, with constants from outside; what becomes
// dead inside the region goes, the constant still used outside stays.
// CHECK-LABEL: func.func public @region
// CHECK-NEXT: %[[Z:[^ ]+]] = stablehlo.constant dense<-0.000000e+00> : tensor<f32>
// (The printer shows a body that is one binary op of the block arguments
// in the short `applies` form.)
// CHECK-NEXT: %[[R:[^ ]+]] = stablehlo.reduce(%arg0 init: %[[Z]]) applies stablehlo.add across dimensions = [0]
// CHECK-NEXT: return %[[R]] : tensor<f32>
func.func public @region(%arg0: tensor<4xf32>) -> tensor<f32> {
  %z = stablehlo.constant dense<-0.0> : tensor<f32>
  %0 = stablehlo.reduce(%arg0 init: %z) across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
   reducer(%a: tensor<f32>, %b: tensor<f32>) {
    %n = stablehlo.negate %a : tensor<f32>
    %nn = stablehlo.negate %n : tensor<f32>
    %s = stablehlo.add %nn, %b : tensor<f32>
    %t = stablehlo.add %s, %z : tensor<f32>
    stablehlo.return %t : tensor<f32>
  }
  func.return %0 : tensor<f32>
}

// -----

// maximum(x, -inf) and minimum(x, +inf) are x (NaN propagates with its payload,
// -0.0 stays), on either side; integers use the type's extreme values; other
// bounds stay.
// CHECK-LABEL: func.func public @max_min_bounds
// CHECK: %[[K:[^ ]+]] = stablehlo.maximum %arg0, %{{[^ ]+}} : tensor<3xf32>
// CHECK-NEXT: return %arg0, %arg0, %arg1, %arg1, %[[K]]
func.func public @max_min_bounds(%arg0: tensor<3xf32>, %arg1: tensor<3xi8>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xi8>, tensor<3xi8>, tensor<3xf32>) {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<3xf32>
  %pinf = stablehlo.constant dense<0x7F800000> : tensor<3xf32>
  %lo = stablehlo.constant dense<-128> : tensor<3xi8>
  %hi = stablehlo.constant dense<127> : tensor<3xi8>
  %big = stablehlo.constant dense<-3.0e38> : tensor<3xf32>
  %0 = stablehlo.maximum %ninf, %arg0 : tensor<3xf32>
  %1 = stablehlo.minimum %arg0, %pinf : tensor<3xf32>
  %2 = stablehlo.maximum %arg1, %lo : tensor<3xi8>
  %3 = stablehlo.minimum %hi, %arg1 : tensor<3xi8>
  %4 = stablehlo.maximum %arg0, %big : tensor<3xf32>
  func.return %0, %1, %2, %3, %4 : tensor<3xf32>, tensor<3xf32>, tensor<3xi8>, tensor<3xi8>, tensor<3xf32>
}
