// Low-precision GEMMs of the cpu backend: int8 x int8 -> int32 and bf16 x bf16 -> f32 (on
// AMX tiles, else AVX-512 VNNI / AVX-512 BF16), and f32 activations x int8/int4 weights
// (weight-only quantization, decoded in registers). Each has a portable loop that gives the
// same integers (int8) or the same floats (weight-only: the same order of fused
// multiply-adds); the bf16 ones agree within f32 rounding. The fast path is picked at run
// time (cpu_isa.h).
//
// The right-hand operand (the weight) is prepared once into the layout its microkernel
// streams (`pack_*`), so a caller that sees the same weight again reuses it; the left one is
// read in place or repacked per call (it is the smaller one in the products that matter).
// All of them run on the backend's thread pool.
#pragma once

#include <cstdint>
#include <vector>

namespace openhlo::cpu::lowp {

// A matrix of `rows` x `cols`: element (r, c) at data[r * ld + c], or at data[c * ld + r]
// when `transposed` (a [cols, rows] row-major array read as its transpose).
template <typename T>
struct MatrixView {
  const T* data = nullptr;
  int64_t ld = 0;
  bool transposed = false;
  T at(int64_t r, int64_t c) const { return transposed ? data[c * ld + r] : data[r * ld + c]; }
};

// ---------------------------------------------------------------------------------------
// int8: C[m, n] = sum_k A[m, k] * B[k, n] in int32 (wrapping, as the interpreter's i32).

// The packed depth of both: k rounded up to 64 bytes of elements (one AMX tile row), the
// padding zero.
struct PackedS8 {
  int64_t k = 0, n = 0, depth = 0;       // depth: k rounded up to a multiple of 64
  std::vector<int8_t> panels;            // [n / 32][depth / 4][32 columns][4 k] (zero padded)
  std::vector<int32_t> column_sums;      // sum over k of B[k, n] (the +128 correction)
};
PackedS8 pack_s8(MatrixView<int8_t> b, int64_t k, int64_t n);

// The epilogue applied as C is stored: int32 as is, or (when `scale` is given) the float
// C[m, n] * scale[n] (a per-output-channel dequantization).
struct S8Epilogue {
  int32_t* out_s32 = nullptr;        // [m, n] row-major, or
  float* out_f32 = nullptr;          // [m, n] row-major with
  const float* column_scale = nullptr;  // [n]
};
void gemm_s8(int64_t m, MatrixView<int8_t> a, const PackedS8& b, const S8Epilogue& out);

// ---------------------------------------------------------------------------------------
// bf16 (raw bf16 bits): C[m, n] = sum_k A[m, k] * B[k, n] in f32.

struct PackedBF16 {
  int64_t k = 0, n = 0, depth = 0;       // depth: k rounded up to a multiple of 32
  std::vector<uint16_t> panels;          // [n / 32][depth / 2][32 columns][2 k]
};
PackedBF16 pack_bf16(MatrixView<uint16_t> b, int64_t k, int64_t n);
void gemm_bf16(int64_t m, MatrixView<uint16_t> a, const PackedBF16& b, float* c);

// ---------------------------------------------------------------------------------------
// Weight-only: Y[m, n] = sum over groups g of scale[g, n] * (sum_{k in g} X[m, k] * W[k, n]),
// X f32 [m, k] row-major, W integers of `bits` (8, or 4: -8..7) with one scale per group of
// `group` consecutive k and output column (group == k: per channel).

struct PackedWeight {
  int bits = 8;
  int64_t k = 0, n = 0, group = 0;
  std::vector<uint8_t> blocks;  // [n / 64][k][64 columns] bytes (int4: 32 bytes, two a byte)
  std::vector<float> scales;    // [n / 64][k / group][64]
};
// `w` holds one value per element (int4 values -8..7 in a byte); `scales` is [k / group, n]
// row-major. Throws std::invalid_argument when group does not divide k or a value is out of
// range for `bits`.
PackedWeight pack_weight(MatrixView<int8_t> w, int64_t k, int64_t n, int bits,
                         const float* scales, int64_t group);
void gemm_weight(int64_t m, const float* x, const PackedWeight& w, float* y);

// ---------------------------------------------------------------------------------------
// Weights stored as rows, read in place (lowp_rows.cc): row n of W holds output n's k
// weights, contiguous (int8: k bytes; int4: k / 2 bytes, two a byte, the low nibble the
// even k). A caller's buffer in this layout is used as it is, with nothing packed or cached.

struct RowWeight {
  const uint8_t* data = nullptr;  // [n][k] bytes (int4: [n][k / 2])
  int bits = 8;                   // 8, or 4 (values -8..7; k even)
  int64_t k = 0, n = 0, group = 0;  // group divides k (group == k: per channel)
  const float* scales = nullptr;  // [n][k / group]
};
// Y[m, n] = sum over groups g of scales[n, g] * (sum_{k in g} X[m, k] * W[n, k]), X f32
// [m, k] row-major; within f32 rounding of that sum in any order.
void gemm_weight_rows(int64_t m, const float* x, const RowWeight& w, float* y);

// C[m, n] = sum_k A[m, k] * W[n, k] in int32 (wrapping), A and W int8 row-major.
void gemm_s8_rows(int64_t m, const int8_t* a, const int8_t* w, int64_t k, int64_t n,
                  int32_t* c);

}  // namespace openhlo::cpu::lowp
