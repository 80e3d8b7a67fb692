// Every pretty format at least once, written by hand (both spellings where MLIR accepts two).
// The golden test compares our printing of this file with upstream MLIR's, pretty and generic.
module @all_formats attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @elementwise(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>, %p: tensor<2x3xi1>, %i: tensor<2x3xi32>) -> (tensor<2x3xf32> {jax.result_info = "result"}) {
    %0 = stablehlo.add %a, %b : tensor<2x3xf32>
    %1 = stablehlo.exponential %0 {result_accuracy = #stablehlo.result_accuracy<ulps = 2, mode = #stablehlo.result_accuracy_mode<TOLERANCE>>} : tensor<2x3xf32>
    %2 = "stablehlo.clamp"(%a, %1, %b) : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %3 = stablehlo.select %p, %2, %a : tensor<2x3xi1>, tensor<2x3xf32>
    %4 = stablehlo.compare GE, %3, %b, TOTALORDER : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xi1>
    %5 = stablehlo.convert %i : (tensor<2x3xi32>) -> tensor<2x3xf32>
    %6 = stablehlo.bitcast_convert %5 : (tensor<2x3xf32>) -> tensor<2x3xi32>
    %7 = stablehlo.reduce_precision %5, format = e5m10 : tensor<2x3xf32>
    %8 = stablehlo.complex %a, %b : tensor<2x3xcomplex<f32>>
    %9 = stablehlo.real %8 : (tensor<2x3xcomplex<f32>>) -> tensor<2x3xf32>
    %10 = stablehlo.is_finite %9 : (tensor<2x3xf32>) -> tensor<2x3xi1>
    %11 = stablehlo.and %10, %4 : tensor<2x3xi1>
    %12 = stablehlo.shift_left %i, %6 : tensor<2x3xi32>
    %13 = stablehlo.popcnt %12 : tensor<2x3xi32>
    %14 = chlo.erf %7 : tensor<2x3xf32> -> tensor<2x3xf32>
    %15 = chlo.next_after %14, %a : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
    %16 = stablehlo.atan2 %15, %b : tensor<2x3xf32>
    %17 = stablehlo.cbrt %16 {result_accuracy = #stablehlo.result_accuracy<mode = #stablehlo.result_accuracy_mode<DEFAULT>>} : tensor<2x3xf32>
    %18 = stablehlo.not %11 : tensor<2x3xi1>
    %19 = stablehlo.count_leading_zeros %13 : tensor<2x3xi32>
    return %17 : tensor<2x3xf32>
  }
  func.func private @data(%a: tensor<2x3xf32>, %s: tensor<f32>, %i: tensor<i64>, %t: tensor<2xi64>) -> tensor<3x2xf32> {
    %c = stablehlo.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
    %cst = stablehlo.constant dense<0x7FC00000> : tensor<2x3xf32>
    %cst_0 = stablehlo.constant dense<[[1.5, -0.0, 0x7F800000], [1.0E-5, 3.40282347E+38, 1.401300e-45]]> : tensor<2x3xf32>
    %cst_1 = stablehlo.constant dense<> : tensor<0x3xf32>
    %cst_2 = stablehlo.constant dense<[(1.0, -2.5), (0.0, 1.0)]> : tensor<2xcomplex<f64>>
    %cst_3 = stablehlo.constant dense<[1.0, 2.5]> : tensor<2xbf16>
    %c_4 = stablehlo.constant dense<[true, false]> : tensor<2xi1>
    %c_5 = stablehlo.constant dense<[-8, 7]> : tensor<2xi4>
    %c_6 = stablehlo.constant dense<[0, 255]> : tensor<2xui8>
    %c_7 = stablehlo.constant dense<18446744073709551615> : tensor<ui64>
    %0 = stablehlo.iota dim = 1 : tensor<2x3xf32>
    %1 = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<f32>) -> tensor<2x3xf32>
    %2 = stablehlo.transpose %a, dims = [1, 0] : (tensor<2x3xf32>) -> tensor<3x2xf32>
    %3 = stablehlo.reverse %a, dims = [0, 1] : tensor<2x3xf32>
    %4 = stablehlo.concatenate %a, %1, %0, dim = 0 : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<6x3xf32>
    %5 = stablehlo.pad %a, %s, low = [0, 1], high = [1, 0], interior = [1, 1] : (tensor<2x3xf32>, tensor<f32>) -> tensor<4x6xf32>
    %6 = stablehlo.slice %5 [0:4:2, 1:6] : (tensor<4x6xf32>) -> tensor<2x5xf32>
    %7 = stablehlo.dynamic_slice %a, %i, %i, sizes = [1, 2] : (tensor<2x3xf32>, tensor<i64>, tensor<i64>) -> tensor<1x2xf32>
    %8 = stablehlo.dynamic_update_slice %a, %7, %i, %i : (tensor<2x3xf32>, tensor<1x2xf32>, tensor<i64>, tensor<i64>) -> tensor<2x3xf32>
    %9 = stablehlo.reshape %8 : (tensor<2x3xf32>) -> tensor<3x2xf32>
    %10 = stablehlo.broadcast %s, sizes = [4] : (tensor<f32>) -> tensor<4xf32>
    %11 = stablehlo.get_dimension_size %a, dim = 1 : (tensor<2x3xf32>) -> tensor<i32>
    %12 = stablehlo.tuple %a, %s : tuple<tensor<2x3xf32>, tensor<f32>>
    %13 = stablehlo.get_tuple_element %12[1] : (tuple<tensor<2x3xf32>, tensor<f32>>) -> tensor<f32>
    %14 = stablehlo.dynamic_iota %t, dim = 0 : (tensor<2xi64>) -> tensor<?x3xf32>
    %15 = stablehlo.dynamic_broadcast_in_dim %s, %t, dims = [] : (tensor<f32>, tensor<2xi64>) -> tensor<2x3xf32>
    %16 = stablehlo.dynamic_reshape %a, %t : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<3x2xf32>
    %17 = stablehlo.set_dimension_size %a, %11, dim = 1 : (tensor<2x3xf32>, tensor<i32>) -> tensor<2x3xf32>
    %18 = "stablehlo.gather"(%a, %t) <{dimension_numbers = #stablehlo.gather<offset_dims = [0], collapsed_slice_dims = [1], start_index_map = [1], index_vector_dim = 1>, indices_are_sorted = true, slice_sizes = array<i64: 2, 1>}> : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2x2xf32>
    return %9 : tensor<3x2xf32>
  }
  func.func private @linalg(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>, %m: tensor<3x3xf32>, %img: tensor<1x4x9x9xf32>, %k: tensor<6x2x3x3xf32>) -> tensor<2x3x5xf32> {
    %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [DEFAULT, HIGHEST] : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
    %1 = stablehlo.dot_general %m, %m, contracting_dims = [1] x [0], algorithm = <lhs_precision_type = f32, rhs_precision_type = f32, accumulation_type = f32, lhs_component_count = 1, rhs_component_count = 1, num_primitive_operations = 1, allow_imprecise_accumulation = false> : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
    %2 = stablehlo.dot %m, %m, precision = [HIGH, HIGH] : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
    %3 = stablehlo.convolution(%img, %k) dim_numbers = [b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1], window = {stride = [2, 2], pad = [[1, 1], [0, 0]], lhs_dilate = [1, 1], rhs_dilate = [2, 1], reverse = [false, false]} {batch_group_count = 1 : i64, feature_group_count = 2 : i64, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]} : (tensor<1x4x9x9xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x4x4xf32>
    %4 = stablehlo.cholesky %m, lower = true : tensor<3x3xf32>
    %5 = "stablehlo.triangular_solve"(%m, %m) <{left_side = true, lower = true, transpose_a = #stablehlo<transpose NO_TRANSPOSE>, unit_diagonal = false}> : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
    %6 = stablehlo.fft %m, type = RFFT, length = [3] : (tensor<3x3xf32>) -> tensor<3x2xcomplex<f32>>
    %7 = stablehlo.einsum %m, %m, config = "ab,bc->ac" : (tensor<3x3xf32>, tensor<3x3xf32>) -> tensor<3x3xf32>
    %8 = stablehlo.unary_einsum %m, config = "ab->ba" : (tensor<3x3xf32>) -> tensor<3x3xf32>
    %c = stablehlo.constant dense<3> : tensor<1xi64>
    %cst = stablehlo.constant dense<0.0> : tensor<f32>
    %9 = stablehlo.rng %cst, %cst, %c, distribution = UNIFORM : (tensor<f32>, tensor<f32>, tensor<1xi64>) -> tensor<3xf32>
    %c_0 = stablehlo.constant dense<[1, 2]> : tensor<2xui64>
    %output_state, %output = stablehlo.rng_bit_generator %c_0, algorithm = PHILOX : (tensor<2xui64>) -> (tensor<2xui64>, tensor<4xui32>)
    %cst_4 = stablehlo.constant dense<1.0> : tensor<4xf32>
    %10 = "stablehlo.batch_norm_inference"(%img, %cst_4, %cst_4, %cst_4, %cst_4) <{epsilon = 1.000000e-03 : f32, feature_index = 1 : i64}> : (tensor<1x4x9x9xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x9x9xf32>
    %values, %indices = chlo.top_k(%m, k = 2) : tensor<3x3xf32> -> (tensor<3x2xf32>, tensor<3x2xi32>)
    return %0 : tensor<2x3x5xf32>
  }
  func.func private @regions(%a: tensor<3x4xf32>, %n: tensor<i32>, %z: tensor<f32>, %idx: tensor<i32>) -> tensor<3xf32> {
    %0 = stablehlo.reduce(%a init: %z) applies stablehlo.add across dimensions = [1] : (tensor<3x4xf32>, tensor<f32>) -> tensor<3xf32>
    %c = stablehlo.constant dense<0> : tensor<i64>
    %i = stablehlo.iota dim = 1 : tensor<3x4xi64>
    %1:2 = stablehlo.reduce(%a init: %z), (%i init: %c) across dimensions = [1] : (tensor<3x4xf32>, tensor<3x4xi64>, tensor<f32>, tensor<i64>) -> (tensor<3xf32>, tensor<3xi64>)
     reducer(%x: tensor<f32>, %y: tensor<f32>) (%u: tensor<i64>, %v: tensor<i64>)  {
      %g = stablehlo.compare GT, %x, %y, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %m = stablehlo.select %g, %x, %y : tensor<i1>, tensor<f32>
      %w = stablehlo.select %g, %u, %v : tensor<i1>, tensor<i64>
      stablehlo.return %m, %w : tensor<f32>, tensor<i64>
    }
    %2:2 = stablehlo.while(%it = %n, %acc = %z) : tensor<i32>, tensor<f32> attributes {foo = 1 : i64}
    cond {
      %k = stablehlo.constant dense<10> : tensor<i32>
      %lt = stablehlo.compare LT, %it, %k, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %next = stablehlo.add %it, %one : tensor<i32>
      stablehlo.return %next, %acc : tensor<i32>, tensor<f32>
    }
    %3 = "stablehlo.case"(%idx) ({
      stablehlo.return %0 : tensor<3xf32>
    }, {
      %neg = stablehlo.negate %0 : tensor<3xf32>
      stablehlo.return %neg : tensor<3xf32>
    }) : (tensor<i32>) -> tensor<3xf32>
    %4 = "stablehlo.reduce_window"(%a, %z) <{padding = dense<[[1, 0], [0, 1]]> : tensor<2x2xi64>, window_dimensions = array<i64: 2, 2>, window_strides = array<i64: 1, 1>}> ({
    ^bb0(%p: tensor<f32>, %q: tensor<f32>):
      %s = stablehlo.maximum %p, %q : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<3x4xf32>, tensor<f32>) -> tensor<3x4xf32>
    %5:2 = "stablehlo.sort"(%a, %i) <{dimension = 1 : i64, is_stable = true}> ({
    ^bb0(%p: tensor<f32>, %q: tensor<f32>, %r: tensor<i64>, %t: tensor<i64>):
      %s = stablehlo.compare LT, %p, %q, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %s : tensor<i1>
    }) : (tensor<3x4xf32>, tensor<3x4xi64>) -> (tensor<3x4xf32>, tensor<3x4xi64>)
    %6:2 = stablehlo.optimization_barrier %0, %n : tensor<3xf32>, tensor<i32>
    %7 = stablehlo.composite "my.op" %0 {composite_attributes = {n = 2 : i64, s = "x"}, decomposition = @decomposition, version = 1 : i32} : (tensor<3xf32>) -> tensor<3xf32>
    %8 = stablehlo.custom_call @foo(%0, %n) {api_version = 4 : i32, backend_config = {attr = 42 : i32}, called_computations = [@decomposition], has_side_effect = true} : (tensor<3xf32>, tensor<i32>) -> tensor<3xf32>
    stablehlo.custom_call @"weird name"() {backend_config = "a\"b\\c\n"} : () -> ()
    %9:2 = stablehlo.custom_call @lapack(%a) {operand_layouts = [dense<[0, 1]> : tensor<2xindex>], output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [0], operand_index = 0, operand_tuple_indices = []>], result_layouts = [dense<[0, 1]> : tensor<2xindex>, dense<> : tensor<0xindex>]} : (tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<i32>)
    %10 = func.call @decomposition(%0) : (tensor<3xf32>) -> tensor<3xf32>
    %11 = "stablehlo.map"(%0, %0) <{dimensions = array<i64: 0>}> ({
    ^bb0(%p: tensor<f32>, %q: tensor<f32>):
      %s = func.call @scalar_add(%p, %q) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    return %3 : tensor<3xf32>
  }
  func.func private @decomposition(%x: tensor<3xf32>) -> tensor<3xf32> {
    return %x : tensor<3xf32>
  }
  func.func private @scalar_add(%x: tensor<f32>, %y: tensor<f32>) -> tensor<f32> {
    %0 = stablehlo.add %x, %y : tensor<f32>
    return %0 : tensor<f32>
  }
  func.func private @tokens_and_collectives(%x: tensor<4xf32>, %t: !stablehlo.token) -> !stablehlo.token {
    %0 = stablehlo.create_token : !stablehlo.token
    %1 = stablehlo.after_all : !stablehlo.token
    %2 = stablehlo.after_all %0, %1, %t : !stablehlo.token
    %3:2 = "stablehlo.infeed"(%2) <{infeed_config = "cfg", layout = [[0]]}> : (!stablehlo.token) -> (tensor<4xf32>, !stablehlo.token)
    %4 = "stablehlo.outfeed"(%3#0, %3#1) : (tensor<4xf32>, !stablehlo.token) -> !stablehlo.token
    %5 = "stablehlo.send"(%x, %4) <{channel_handle = #stablehlo.channel_handle<handle = 5, type = 2>, is_host_transfer = true}> : (tensor<4xf32>, !stablehlo.token) -> !stablehlo.token
    %6:2 = "stablehlo.recv"(%5) <{channel_handle = #stablehlo.channel_handle<handle = 5, type = 3>, is_host_transfer = true}> : (!stablehlo.token) -> (tensor<4xf32>, !stablehlo.token)
    %7 = "stablehlo.all_gather"(%x) <{all_gather_dim = 0 : i64, channel_handle = #stablehlo.channel_handle<handle = 1, type = 0>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> : (tensor<4xf32>) -> tensor<8xf32>
    %8 = "stablehlo.all_reduce"(%x) <{channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, use_global_device_ids}> ({
    ^bb0(%p: tensor<f32>, %q: tensor<f32>):
      %s = stablehlo.add %p, %q : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    %9 = "stablehlo.collective_permute"(%x) <{source_target_pairs = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>}> : (tensor<4xf32>) -> tensor<4xf32>
    %10 = stablehlo.replica_id : tensor<ui32>
    %11 = stablehlo.partition_id : tensor<ui32>
    %12 = "stablehlo.all_to_all"(%x) <{concat_dimension = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, split_count = 2 : i64, split_dimension = 0 : i64}> : (tensor<4xf32>) -> tensor<4xf32>
    return %6#1 : !stablehlo.token
  }
}
