"""Programs the cuda AOT tests compile (test_aot.py, test_aot_numerics.py)."""
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[4]

ELEMENTWISE = """
module @m {
  func.func public @main(%x: tensor<64x128xf32>, %y: tensor<64x128xbf16>)
      -> (tensor<64x128xf32>, tensor<64x128xbf16>) {
    %a = stablehlo.exponential %x : tensor<64x128xf32>
    %b = stablehlo.tanh %a : tensor<64x128xf32>
    %c = stablehlo.logistic %b : tensor<64x128xf32>
    %d = stablehlo.convert %y : (tensor<64x128xbf16>) -> tensor<64x128xf32>
    %e = stablehlo.multiply %c, %d : tensor<64x128xf32>
    %f = stablehlo.convert %e : (tensor<64x128xf32>) -> tensor<64x128xbf16>
    %g = stablehlo.maximum %f, %y : tensor<64x128xbf16>
    return %e, %g : tensor<64x128xf32>, tensor<64x128xbf16>
  }
}
"""

SOFTMAX = """
module @m {
  func.func public @main(%x: tensor<32x16xf32>) -> tensor<32x16xf32> {
    %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1]
        : (tensor<32x16xf32>, tensor<f32>) -> tensor<32xf32>
    %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<32xf32>) -> tensor<32x16xf32>
    %s = stablehlo.subtract %x, %mb : tensor<32x16xf32>
    %e = stablehlo.exponential %s : tensor<32x16xf32>
    %sum = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1]
        : (tensor<32x16xf32>, tensor<f32>) -> tensor<32xf32>
    %sb = stablehlo.broadcast_in_dim %sum, dims = [0] : (tensor<32xf32>) -> tensor<32x16xf32>
    %p = stablehlo.divide %e, %sb : tensor<32x16xf32>
    return %p : tensor<32x16xf32>
  }
}
"""

# A batched dot, a reshape, a transpose alone, a column reduction, a parameter returned as
# it is: every kind of step.
MIXED = """
module @m {
  func.func public @main(%a: tensor<4x8x16xf32>, %b: tensor<4x16x32xf32>, %c: tensor<24x5xf32>)
      -> (tensor<4x8x32xf32>, tensor<1024xf32>, tensor<5x24xf32>, tensor<5xf32>, tensor<24x5xf32>) {
    %d = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1]
        : (tensor<4x8x16xf32>, tensor<4x16x32xf32>) -> tensor<4x8x32xf32>
    %r = stablehlo.reshape %d : (tensor<4x8x32xf32>) -> tensor<1024xf32>
    %t = stablehlo.transpose %c, dims = [1, 0] : (tensor<24x5xf32>) -> tensor<5x24xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %s = stablehlo.reduce(%c init: %zero) applies stablehlo.add across dimensions = [0]
        : (tensor<24x5xf32>, tensor<f32>) -> tensor<5xf32>
    return %d, %r, %t, %s, %c
        : tensor<4x8x32xf32>, tensor<1024xf32>, tensor<5x24xf32>, tensor<5xf32>, tensor<24x5xf32>
  }
}
"""

SORT = """module @m {
  func.func public @main(%x: tensor<16xf32>) -> tensor<16xf32> {
    %s = "stablehlo.sort"(%x) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %c = stablehlo.compare LT, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    }) {dimension = 0 : i64, is_stable = false} : (tensor<16xf32>) -> tensor<16xf32>
    return %s : tensor<16xf32>
  }
}
"""

# Rows of 200: a warp per row (codegen/target.py's WARP_ROWS_FROM).
SOFTMAX_LONG_ROWS = SOFTMAX.replace("32x16", "32x200")

# Rows of 4099 (odd, past codegen/target.py's BLOCK_ROWS_FROM): a thread block per row, the
# exp kept in each thread's share of a row buffer.
SOFTMAX_BLOCK_ROWS = SOFTMAX.replace("32x16", "3x4099").replace("32xf32", "3xf32")
# Rows of 70001: each thread's share of the exp (274 floats) is past its 1 KiB of local
# memory, so the division's loop recomputes it.
SOFTMAX_RECOMPUTED = SOFTMAX.replace("32x16", "2x70001").replace("32xf32", "2xf32")

# max, min and sum of rows of one block each (odd lengths: a tail of the block's threads):
# f32 max and min, an i32 sum, a bf16 max, and an element-shaped result written by the row's
# threads.
BLOCK_ROW_REDUCTIONS = """
module @m {
  func.func public @main(%x: tensor<5x2053xf32>, %i: tensor<3x3001xi32>, %h: tensor<2x2048xbf16>)
      -> (tensor<5xf32>, tensor<5xf32>, tensor<3xi32>, tensor<2xbf16>, tensor<5x2053xf32>) {
    %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %pinf = stablehlo.constant dense<0x7F800000> : tensor<f32>
    %zero = stablehlo.constant dense<0> : tensor<i32>
    %hninf = stablehlo.constant dense<0xFF80> : tensor<bf16>
    %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1]
        : (tensor<5x2053xf32>, tensor<f32>) -> tensor<5xf32>
    %n = stablehlo.reduce(%x init: %pinf) applies stablehlo.minimum across dimensions = [1]
        : (tensor<5x2053xf32>, tensor<f32>) -> tensor<5xf32>
    %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<5xf32>) -> tensor<5x2053xf32>
    %d = stablehlo.subtract %x, %mb : tensor<5x2053xf32>
    %s = stablehlo.reduce(%i init: %zero) applies stablehlo.add across dimensions = [1]
        : (tensor<3x3001xi32>, tensor<i32>) -> tensor<3xi32>
    %hs = stablehlo.reduce(%h init: %hninf) applies stablehlo.maximum across dimensions = [1]
        : (tensor<2x2048xbf16>, tensor<bf16>) -> tensor<2xbf16>
    return %m, %n, %s, %hs, %d
        : tensor<5xf32>, tensor<5xf32>, tensor<3xi32>, tensor<2xbf16>, tensor<5x2053xf32>
  }
}
"""

# A max pool (2x3 windows, strides 2, padding on both sides) and a sum from 1 (no identity:
# padding and base-dilation holes count) with base and window dilations and a negative
# (cropping) padding.
REDUCE_WINDOWS = """
module @m {
  func.func public @main(%x: tensor<2x7x6xf32>, %y: tensor<5x4xi32>)
      -> (tensor<2x4x3xf32>, tensor<5x6xi32>) {
    %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %one = stablehlo.constant dense<1> : tensor<i32>
    %m = "stablehlo.reduce_window"(%x, %ninf) <{window_dimensions = array<i64: 1, 2, 3>,
        window_strides = array<i64: 1, 2, 2>,
        padding = dense<[[0, 0], [1, 1], [1, 0]]> : tensor<3x2xi64>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %c = stablehlo.maximum %a, %b : tensor<f32>
      stablehlo.return %c : tensor<f32>
    }) : (tensor<2x7x6xf32>, tensor<f32>) -> tensor<2x4x3xf32>
    %s = "stablehlo.reduce_window"(%y, %one) <{window_dimensions = array<i64: 2, 2>,
        window_strides = array<i64: 2, 1>, base_dilations = array<i64: 2, 2>,
        window_dilations = array<i64: 1, 2>,
        padding = dense<[[1, 0], [2, -1]]> : tensor<2x2xi64>}> ({
    ^bb0(%a: tensor<i32>, %b: tensor<i32>):
      %c = stablehlo.add %a, %b : tensor<i32>
      stablehlo.return %c : tensor<i32>
    }) : (tensor<5x4xi32>, tensor<i32>) -> tensor<5x6xi32>
    return %m, %s : tensor<2x4x3xf32>, tensor<5x6xi32>
  }
}
"""

# The three shifts of each integer width, signed and unsigned (the test passes amounts from
# -2, read as unsigned, to past the bit width).
SHIFTS = "\n".join(["module @m {", "  func.func public @main(" + ", ".join(
    f"%{t}a: tensor<64x{t}>, %{t}b: tensor<64x{t}>" for t in ("i8", "ui16", "i32", "ui32", "i64",
                                                              "ui64")) + ") -> (" +
    ", ".join(f"tensor<64x{t}>" for t in ("i8", "ui16", "i32", "ui32", "i64", "ui64")
              for _ in range(3)) + ") {"] + [
    f"    %{t}{k} = stablehlo.shift_{s} %{t}a, %{t}b : tensor<64x{t}>"
    for t in ("i8", "ui16", "i32", "ui32", "i64", "ui64")
    for k, s in enumerate(("left", "right_logical", "right_arithmetic"))] + [
    "    return " + ", ".join(f"%{t}{k}" for t in ("i8", "ui16", "i32", "ui32", "i64", "ui64")
                              for k in range(3)) + " : " +
    ", ".join(f"tensor<64x{t}>" for t in ("i8", "ui16", "i32", "ui32", "i64", "ui64")
              for _ in range(3)),
    "  }", "}"])
