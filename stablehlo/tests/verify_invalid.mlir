// Deliberately broken programs: each chunk must be rejected by our verifier and by
// upstream MLIR (jaxlib). `// ERR:` gives a substring our message must contain.

// ERR: operand #1 has type tensor<3xf32>
func.func @add_shape(%a: tensor<2xf32>, %b: tensor<3xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %a, %b : (tensor<2xf32>, tensor<3xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----
// ERR: expected element type f32
func.func @add_element_type(%a: tensor<2xf32>, %b: tensor<2xf64>) -> tensor<2xf32> {
  %0 = stablehlo.add %a, %b : (tensor<2xf32>, tensor<2xf64>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----
// ERR: result #0 has type tensor<3xf32>
func.func @add_result(%a: tensor<2xf32>) -> tensor<3xf32> {
  %0 = stablehlo.add %a, %a : (tensor<2xf32>, tensor<2xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----
// ERR: broadcast_dimensions' has size 2, expected 1
func.func @broadcast_dims_size(%a: tensor<3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.broadcast_in_dim %a, dims = [0, 1] : (tensor<3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----
// ERR: contains 2, expected values in [0, 2)
func.func @broadcast_dims_range(%a: tensor<3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.broadcast_in_dim %a, dims = [2] : (tensor<3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----
// ERR: operand dimension 0 has size 3, expected 1 or 2
func.func @broadcast_size(%a: tensor<3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.broadcast_in_dim %a, dims = [0] : (tensor<3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----
// ERR: with 8 elements, expected 6
func.func @reshape_count(%a: tensor<2x3xf32>) -> tensor<8xf32> {
  %0 = stablehlo.reshape %a : (tensor<2x3xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----
// ERR: 'permutation' contains 0 more than once
func.func @transpose_dup(%a: tensor<2x3xf32>) -> tensor<2x2xf32> {
  %0 = stablehlo.transpose %a, dims = [0, 0] : (tensor<2x3xf32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----
// ERR: result #0 has type tensor<2x3xf32>, expected tensor<3x2xf32>
func.func @transpose_result(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = stablehlo.transpose %a, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----
// ERR: slice of dimension 0 is [0:5]
func.func @slice_limit(%a: tensor<4xf32>) -> tensor<5xf32> {
  %0 = stablehlo.slice %a [0:5] : (tensor<4xf32>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----
// ERR: result #0 has type tensor<3xf32>, expected tensor<2xf32>
func.func @slice_stride(%a: tensor<4xf32>) -> tensor<3xf32> {
  %0 = stablehlo.slice %a [0:4:2] : (tensor<4xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----
// ERR: expected tensor<8xf32>
func.func @pad_result(%a: tensor<4xf32>, %v: tensor<f32>) -> tensor<7xf32> {
  %0 = stablehlo.pad %a, %v, low = [1], high = [0], interior = [1] : (tensor<4xf32>, tensor<f32>) -> tensor<7xf32>
  return %0 : tensor<7xf32>
}

// -----
// ERR: expected size 3 in dimension 1
func.func @concat_dims(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) -> tensor<4x3xf32> {
  %0 = stablehlo.concatenate %a, %b, dim = 0 : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----
// ERR: attribute 'dimension' contains 2
func.func @concat_range(%a: tensor<2x3xf32>) -> tensor<4x3xf32> {
  %0 = stablehlo.concatenate %a, %a, dim = 2 : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----
// ERR: slice_sizes' is [5]
func.func @dynamic_slice_sizes(%a: tensor<4xf32>, %i: tensor<i32>) -> tensor<5xf32> {
  %0 = stablehlo.dynamic_slice %a, %i, sizes = [5] : (tensor<4xf32>, tensor<i32>) -> tensor<5xf32>
  return %0 : tensor<5xf32>
}

// -----
// ERR: 'iota_dimension' contains 1
func.func @iota_dim() -> tensor<4xf32> {
  %0 = stablehlo.iota dim = 1 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----
// ERR: operand #1 has type tensor<2xi32>, expected element type f32
func.func @compare_types(%a: tensor<2xf32>, %b: tensor<2xi32>) -> tensor<2xi1> {
  %0 = "stablehlo.compare"(%a, %b) {comparison_direction = #stablehlo<comparison_direction LT>} : (tensor<2xf32>, tensor<2xi32>) -> tensor<2xi1>
  return %0 : tensor<2xi1>
}

// -----
// ERR: operand #0 (pred) has type tensor<3xi1>
func.func @select_pred(%p: tensor<3xi1>, %a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.select %p, %a, %a : (tensor<3xi1>, tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----
// ERR: convert keeps the shape
func.func @convert_shape(%a: tensor<2xf32>) -> tensor<3xf64> {
  %0 = stablehlo.convert %a : (tensor<2xf32>) -> tensor<3xf64>
  return %0 : tensor<3xf64>
}

// -----
// ERR: lhs contracting dimension 1 has size 3 but rhs contracting dimension 0 has size 4
func.func @dot_contracting(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) -> tensor<2x5xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----
// ERR: result #0 has type tensor<2x4xf32>, expected tensor<2x5xf32>
func.func @dot_result(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>) -> tensor<2x4xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<2x3xf32>, tensor<3x5xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----
// ERR: rhs_batching_dimensions has size 0, expected 1
func.func @dot_batching(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>) -> tensor<2x3x5xf32> {
  %0 = "stablehlo.dot_general"(%a, %b) {dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]>} : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  return %0 : tensor<2x3x5xf32>
}

// -----
// ERR: result #0 has type tensor<1x6x4x4xf32>
func.func @conv_result(%a: tensor<1x4x9x9xf32>, %w: tensor<6x4x3x3xf32>) -> tensor<1x6x4x4xf32> {
  %0 = stablehlo.convolution(%a, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [1, 1]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64} : (tensor<1x4x9x9xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x4x4xf32>
  return %0 : tensor<1x6x4x4xf32>
}

// -----
// ERR: kernel input feature dimension has size 4, expected 2
func.func @conv_groups(%a: tensor<1x4x9x9xf32>, %w: tensor<6x4x3x3xf32>) -> tensor<1x6x7x7xf32> {
  %0 = stablehlo.convolution(%a, %w) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {} {batch_group_count = 1 : i64, feature_group_count = 2 : i64} : (tensor<1x4x9x9xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x7x7xf32>
  return %0 : tensor<1x6x7x7xf32>
}

// -----
// ERR: result #0 has type tensor<4xf32>, expected tensor<3xf32>
func.func @reduce_result(%a: tensor<3x4xf32>, %z: tensor<f32>) -> tensor<4xf32> {
  %0 = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [1] : (tensor<3x4xf32>, tensor<f32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----
// ERR: body must take 2 arguments, got 3
func.func @reduce_body(%a: tensor<3x4xf32>, %z: tensor<f32>) -> tensor<3xf32> {
  %0 = "stablehlo.reduce"(%a, %z) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>, %w: tensor<f32>):
    %1 = stablehlo.add %x, %y : tensor<f32>
    stablehlo.return %1 : tensor<f32>
  }) {dimensions = array<i64: 1>} : (tensor<3x4xf32>, tensor<f32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----
// ERR: 'dimensions' contains 2, expected values in [0, 2)
func.func @reduce_dims(%a: tensor<3x4xf32>, %z: tensor<f32>) -> tensor<3xf32> {
  %0 = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [2] : (tensor<3x4xf32>, tensor<f32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----
// ERR: result #0 has type tensor<2x4xf32>, expected tensor<2x3xf32>
func.func @reduce_window_result(%a: tensor<3x4xf32>, %z: tensor<f32>) -> tensor<2x4xf32> {
  %0 = "stablehlo.reduce_window"(%a, %z) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %1 = stablehlo.add %x, %y : tensor<f32>
    stablehlo.return %1 : tensor<f32>
  }) {window_dimensions = array<i64: 2, 2>} : (tensor<3x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----
// ERR: result #0 has type tensor<2x3xf32>, expected tensor<2x4xf32>
func.func @gather_result(%a: tensor<3x4xf32>, %i: tensor<2x1xi32>) -> tensor<2x3xf32> {
  %0 = "stablehlo.gather"(%a, %i) {dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 4>, indices_are_sorted = false} : (tensor<3x4xf32>, tensor<2x1xi32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----
// ERR: slice_sizes is [1, 5]
func.func @gather_sizes(%a: tensor<3x4xf32>, %i: tensor<2x1xi32>) -> tensor<2x5xf32> {
  %0 = "stablehlo.gather"(%a, %i) {dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 5>, indices_are_sorted = false} : (tensor<3x4xf32>, tensor<2x1xi32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----
// ERR: scatter dimension 0 has size 2, expected 3
func.func @scatter_updates(%a: tensor<5x3xf32>, %i: tensor<3x1xi32>, %u: tensor<2x3xf32>) -> tensor<5x3xf32> {
  %0 = "stablehlo.scatter"(%a, %i, %u) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %1 = stablehlo.add %x, %y : tensor<f32>
    stablehlo.return %1 : tensor<f32>
  }) {scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false} : (tensor<5x3xf32>, tensor<3x1xi32>, tensor<2x3xf32>) -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}

// -----
// ERR: comparator result #0 has type tensor<i32>, expected tensor<i1>
func.func @sort_comparator(%a: tensor<3xi32>) -> tensor<3xi32> {
  %0 = "stablehlo.sort"(%a) ({
  ^bb0(%x: tensor<i32>, %y: tensor<i32>):
    stablehlo.return %x : tensor<i32>
  }) {dimension = 0 : i64, is_stable = true} : (tensor<3xi32>) -> tensor<3xi32>
  return %0 : tensor<3xi32>
}

// -----
// ERR: body result #0 has type tensor<i64>, expected tensor<i32>
func.func @while_body(%a: tensor<i32>) -> tensor<i32> {
  %0 = "stablehlo.while"(%a) ({
  ^bb0(%x: tensor<i32>):
    %c = stablehlo.constant dense<true> : tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%x: tensor<i32>):
    %y = stablehlo.convert %x : (tensor<i32>) -> tensor<i64>
    stablehlo.return %y : tensor<i64>
  }) : (tensor<i32>) -> tensor<i32>
  return %0 : tensor<i32>
}

// -----
// ERR: branch #1 result #0 has type tensor<3xf32>, expected tensor<2xf32>
func.func @if_branches(%p: tensor<i1>, %a: tensor<2xf32>, %b: tensor<3xf32>) -> tensor<2xf32> {
  %0 = "stablehlo.if"(%p) ({
    stablehlo.return %a : tensor<2xf32>
  }, {
    stablehlo.return %b : tensor<3xf32>
  }) : (tensor<i1>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----
// ERR: operand #0 (index) has type tensor<i64>, expected tensor<i32>
func.func @case_index(%i: tensor<i64>, %a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = "stablehlo.case"(%i) ({
    stablehlo.return %a : tensor<2xf32>
  }) : (tensor<i64>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----
// ERR: attribute 'index' contains 2, expected values in [0, 2)
func.func @get_tuple_element_index(%t: tuple<tensor<f32>, tensor<i32>>) -> tensor<f32> {
  %0 = stablehlo.get_tuple_element %t[2] : (tuple<tensor<f32>, tensor<i32>>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----
// ERR: returns (tensor<2xf32>), expected (tensor<3xf32>)
func.func @return_type(%a: tensor<2xf32>) -> tensor<3xf32> {
  return %a : tensor<2xf32>
}

// -----
// ERR: do not match the inputs (tensor<3xf32>) of callee @callee
func.func @callee(%a: tensor<3xf32>) -> tensor<3xf32> {
  return %a : tensor<3xf32>
}
func.func @call_types(%a: tensor<2xf32>) -> tensor<3xf32> {
  %0 = call @callee(%a) : (tensor<2xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----
// ERR: refers to @missing, which is not defined
func.func @call_missing(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = call @missing(%a) : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----
// ERR: unknown op 'stablehlo.frobnicate'
func.func @unknown_op(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = "stablehlo.frobnicate"(%a) : (tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----
// ERR: expected f32 or f64 elements for RFFT
func.func @fft_type(%a: tensor<8xi32>) -> tensor<5xcomplex<f32>> {
  %0 = stablehlo.fft %a, type = RFFT, length = [8] : (tensor<8xi32>) -> tensor<5xcomplex<f32>>
  return %0 : tensor<5xcomplex<f32>>
}

// -----
// ERR: expected square matrices
func.func @triangular_solve_shape(%a: tensor<3x4xf32>, %b: tensor<3x2xf32>) -> tensor<3x2xf32> {
  %0 = "stablehlo.triangular_solve"(%a, %b) {left_side = true, lower = true, unit_diagonal = false, transpose_a = #stablehlo<transpose NO_TRANSPOSE>} : (tensor<3x4xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----
// ERR: expected a batch of square matrices
func.func @cholesky_square(%a: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %0 = stablehlo.cholesky %a, lower = true : tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----
// ERR: attribute 'all_gather_dim' contains 2, expected values in [0, 2)
func.func @all_gather_dim(%a: tensor<4x4xf32>) -> tensor<4x8xf32> {
  %0 = "stablehlo.all_gather"(%a) {all_gather_dim = 2 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<4x4xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----
// ERR: expected a float, complex or quantized type
func.func @sqrt_int(%a: tensor<2xi32>) -> tensor<2xi32> {
  %0 = stablehlo.sqrt %a : tensor<2xi32>
  return %0 : tensor<2xi32>
}

// -----
// ERR: expected a boolean or integer type
func.func @and_float(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.and %a, %a : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----
// ERR: operand #0 has type tensor<3xf32>, expected a 0-d tensor or the shape
func.func @clamp_min(%lo: tensor<3xf32>, %a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.clamp %lo, %a, %a : (tensor<3xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----
// ERR: the shapes do not correspond
func.func @bitcast_shape(%a: tensor<2xf32>) -> tensor<2xi16> {
  %0 = stablehlo.bitcast_convert %a : (tensor<2xf32>) -> tensor<2xi16>
  return %0 : tensor<2xi16>
}

// -----
// ERR: do not match the inputs (tensor<f32>) of decomposition @impl
func.func @impl(%a: tensor<f32>) -> tensor<f32> {
  return %a : tensor<f32>
}
func.func @composite_types(%a: tensor<i64>) -> tensor<f32> {
  %0 = stablehlo.composite "my.op" %a {decomposition = @impl} : (tensor<i64>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----
// ERR: body argument #1 has type tensor<i32>, expected tensor<f32>
func.func @reduce_body_types(%a: tensor<3x4xf32>, %z: tensor<f32>) -> tensor<3xf32> {
  %0 = "stablehlo.reduce"(%a, %z) ({
  ^bb0(%x: tensor<f32>, %y: tensor<i32>):
    %1 = stablehlo.convert %y : (tensor<i32>) -> tensor<f32>
    stablehlo.return %1 : tensor<f32>
  }) {dimensions = array<i64: 1>} : (tensor<3x4xf32>, tensor<f32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----
// ERR: expected 1 or 2 (result dimension 0
func.func @dynamic_broadcast_size(%a: tensor<3xf32>, %s: tensor<1xindex>) -> tensor<2xf32> {
  %0 = stablehlo.dynamic_broadcast_in_dim %a, %s, dims = [0] : (tensor<3xf32>, tensor<1xindex>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----
// ERR: select argument #0 has type tensor<i32>, expected tensor<f32>
func.func @select_and_scatter_select(%a: tensor<4xf32>, %s: tensor<2xf32>, %z: tensor<f32>) -> tensor<4xf32> {
  %0 = "stablehlo.select_and_scatter"(%a, %s, %z) ({
  ^bb0(%x: tensor<i32>, %y: tensor<i32>):
    %c = stablehlo.compare GE, %x, %y : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %1 = stablehlo.add %x, %y : tensor<f32>
    stablehlo.return %1 : tensor<f32>
  }) {window_dimensions = array<i64: 2>, window_strides = array<i64: 2>} : (tensor<4xf32>, tensor<2xf32>, tensor<f32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----
// ERR: source) has type tensor<3xf32>, expected shape [2]
func.func @select_and_scatter_source(%a: tensor<4xf32>, %s: tensor<3xf32>, %z: tensor<f32>) -> tensor<4xf32> {
  %0 = "stablehlo.select_and_scatter"(%a, %s, %z) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %c = stablehlo.compare GE, %x, %y : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  }, {
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %1 = stablehlo.add %x, %y : tensor<f32>
    stablehlo.return %1 : tensor<f32>
  }) {window_dimensions = array<i64: 2>, window_strides = array<i64: 2>} : (tensor<4xf32>, tensor<3xf32>, tensor<f32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----
// ERR: exponent_bits is 0, expected >= 1
func.func @reduce_precision_bits(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.reduce_precision %a, format = e0m10 : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----
// ERR: update_computation accumulates in i8
func.func @scatter_promotion(%a: tensor<5xi32>, %i: tensor<1x1xi32>, %u: tensor<1xi32>) -> tensor<5xi8> {
  %0 = "stablehlo.scatter"(%a, %i, %u) ({
  ^bb0(%x: tensor<i8>, %y: tensor<i8>):
    %1 = stablehlo.add %x, %y : tensor<i8>
    stablehlo.return %1 : tensor<i8>
  }) {scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false} : (tensor<5xi32>, tensor<1x1xi32>, tensor<1xi32>) -> tensor<5xi8>
  return %0 : tensor<5xi8>
}

// -----
// ERR: is not known to be supported on any hardware
func.func @dot_algorithm(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0], algorithm = <lhs_precision_type = f32, rhs_precision_type = f32, accumulation_type = f16, lhs_component_count = 1, rhs_component_count = 1, num_primitive_operations = 1, allow_imprecise_accumulation = false> : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

