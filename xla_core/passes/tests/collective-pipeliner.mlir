// RUN: openhlo opt %s --split-input-file --passes=collective-pipeliner | filecheck %s

// Forward mode: the gather of layer i's piece of the stacked weights. A prologue gathers
// layer 0's; the body starts layer i+1's at its top and carries it; the loop runs 2 trips of
// 3 and a copy of the body runs the last one on the carried gather.
// CHECK: %[[FIRST:[^ ]+]] = "stablehlo.all_gather"
// CHECK-SAME: openhlo.pipelined
// CHECK: stablehlo.while({{.*}}, %[[CARRIED:[^ ]+]] = %[[FIRST]])
// CHECK: stablehlo.compare LT
// CHECK-SAME: %[[LIMIT:[^ ]+]],
// CHECK: do {
// CHECK: %[[NEXT:[^ ]+]] = stablehlo.add
// CHECK: stablehlo.dynamic_slice %{{[^,]+}}, %[[NEXT]],
// CHECK: %[[GATHER:[^ ]+]] = "stablehlo.all_gather"
// CHECK-SAME: openhlo.pipelined
// CHECK: stablehlo.dot_general %{{[^,]+}}, %[[CARRIED]],
// CHECK: stablehlo.return {{.*}}, %[[GATHER]] :
// CHECK: }
// CHECK-NOT: all_gather
// CHECK: stablehlo.dot_general
// CHECK-NOT: all_gather
// CHECK: return
func.func @main(%w: tensor<3x2x16xf32>, %h: tensor<3x16xf32>) -> tensor<3x16xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:3 = stablehlo.while(%i = %c0, %x = %h, %ws = %w)
      : tensor<i32>, tensor<3x16xf32>, tensor<3x2x16xf32>
  cond {
    %n = stablehlo.constant dense<3> : tensor<i32>
    %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %z = stablehlo.constant dense<0> : tensor<i32>
    %s = stablehlo.dynamic_slice %ws, %i, %z, %z, sizes = [1, 2, 16]
        : (tensor<3x2x16xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x16xf32>
    %piece = stablehlo.reshape %s : (tensor<1x2x16xf32>) -> tensor<2x16xf32>
    %g = "stablehlo.all_gather"(%piece) {all_gather_dim = 0 : i64,
        replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>}
        : (tensor<2x16xf32>) -> tensor<16x16xf32>
    %y = stablehlo.dot_general %x, %g, contracting_dims = [1] x [0]
        : (tensor<3x16xf32>, tensor<16x16xf32>) -> tensor<3x16xf32>
    %t = stablehlo.tanh %y : tensor<3x16xf32>
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %next, %t, %ws : tensor<i32>, tensor<3x16xf32>, tensor<3x2x16xf32>
  }
  return %r#1 : tensor<3x16xf32>
}

// -----

// Backward mode: the reduced gradient written into the carried accumulator. The first trip
// runs before the loop without the reduction; the body reduces the previous trip's carried
// value at its top and writes it at its bottom (at the carried index); the epilogue reduces
// and writes the last.
// CHECK: %[[G0:[^ ]+]] = stablehlo.dot_general
// CHECK-NOT: all_reduce
// CHECK: stablehlo.while
// CHECK-SAME: %[[PENDING:[^ ]+]] = %[[G0]],
// CHECK: do {
// CHECK-NEXT: %[[RED:[^ ]+]] = "stablehlo.all_reduce"(%[[PENDING]])
// CHECK: openhlo.pipelined
// CHECK: stablehlo.dot_general
// CHECK: stablehlo.dynamic_update_slice
// CHECK-NEXT: stablehlo.return
// CHECK: }
// CHECK: %[[LAST:[^ ]+]] = "stablehlo.all_reduce"
// CHECK: openhlo.pipelined
// CHECK: stablehlo.transpose %[[LAST]]
// CHECK: stablehlo.dynamic_update_slice
func.func @main(%x0: tensor<3x8xf32>, %acc0: tensor<3x8x8xf32>) -> tensor<3x8x8xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:3 = stablehlo.while(%i = %c0, %acc = %acc0, %x = %x0)
      : tensor<i32>, tensor<3x8x8xf32>, tensor<3x8xf32>
  cond {
    %n = stablehlo.constant dense<3> : tensor<i32>
    %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %g = stablehlo.dot_general %x, %x, contracting_dims = [0] x [0]
        : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<8x8xf32>
    %red = "stablehlo.all_reduce"(%g) ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %sum = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %sum : tensor<f32>
    }) {replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>}
        : (tensor<8x8xf32>) -> tensor<8x8xf32>
    %tr = stablehlo.transpose %red, dims = [1, 0] : (tensor<8x8xf32>) -> tensor<8x8xf32>
    %back = stablehlo.reshape %tr : (tensor<8x8xf32>) -> tensor<1x8x8xf32>
    %tx = stablehlo.tanh %x : tensor<3x8xf32>
    %z = stablehlo.constant dense<0> : tensor<i32>
    %upd = stablehlo.dynamic_update_slice %acc, %back, %i, %z, %z
        : (tensor<3x8x8xf32>, tensor<1x8x8xf32>, tensor<i32>, tensor<i32>, tensor<i32>)
        -> tensor<3x8x8xf32>
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %next, %upd, %tx : tensor<i32>, tensor<3x8x8xf32>, tensor<3x8xf32>
  }
  return %r#1 : tensor<3x8x8xf32>
}
