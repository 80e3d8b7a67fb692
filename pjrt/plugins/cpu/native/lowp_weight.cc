// Weight-only GEMV/GEMM (lowp_gemm.h): f32 activations times int8 or int4 weights, decoded
// in registers. A decode step (batch 1) is bound by the bytes of weight it streams, so the
// weights stay 1 byte (int8) or half a byte (int4) per element all the way into registers:
// each k of a 64-column block is one 64-byte (int8) or 32-byte (int4) load, sign-extended
// to four vectors of 16 f32 and multiply-added into 4 independent accumulators per row.
// A group's partial sums are scaled once at the group's end (group == k: per channel).
//
// Batches of at least kDecodeRows rows are compute-bound instead: each 64-column block is
// dequantized to f32 once and multiplied by BLAS.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "blas.h"
#include "cpu_isa.h"
#include "lowp_gemm.h"
#include "thread_pool.h"

namespace openhlo::cpu::lowp {
namespace {

constexpr int64_t kBlock = 64;        // columns of a packed block
constexpr int64_t kDecodeRows = 16;   // from this many rows on: dequantize + BLAS
constexpr int64_t kSplitWork = int64_t{1} << 16;
// How far ahead of the bytes being decoded a block's stream is fetched (the CPU's own
// prefetchers stop at each 4 KiB page).
constexpr int64_t kPrefetchBytes = 2048;

int64_t row_bytes(int bits) { return bits == 8 ? kBlock : kBlock / 2; }

// Column c of a block's row of packed bytes (int4: byte c % 32, low nibble for c < 32).
int8_t weight_at(const uint8_t* row, int bits, int64_t c) {
  if (bits == 8) return static_cast<int8_t>(row[c]);
  const uint8_t nibble = c < 32 ? row[c] & 0x0f : row[c - 32] >> 4;
  return static_cast<int8_t>((nibble ^ 8) - 8);
}

// --- fast path: R rows of x against one block ---------------------------------------------

// GCC 12's headers make the sign extensions below read an uninitialized "undefined" vector
// (the unmasked form ignores it) and warn at every use; the warning says nothing about ours.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

template <int Bits>
__attribute__((target("avx512f,avx512bw"), always_inline)) inline void decode_row(
    const uint8_t* row, __m512 w[4]) {
  if constexpr (Bits == 8) {
    for (int i = 0; i < 4; ++i) {
      w[i] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 16 * i))));
    }
  } else {
    const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row));
    const __m256i low4 = _mm256_set1_epi8(0x0f), eight = _mm256_set1_epi8(8);
    __m256i lo = _mm256_and_si256(bytes, low4);
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low4);
    lo = _mm256_sub_epi8(_mm256_xor_si256(lo, eight), eight);  // -8..7
    hi = _mm256_sub_epi8(_mm256_xor_si256(hi, eight), eight);
    w[0] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(lo)));
    w[1] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(lo, 1)));
    w[2] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(hi)));
    w[3] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(hi, 1)));
  }
}

template <int R, int Bits>
__attribute__((target("avx512f,avx512bw"))) void block_fast(const float* x, const PackedWeight& w,
                                                            int64_t blk, float* y, int64_t cols) {
  const int64_t k = w.k, step = row_bytes(Bits), groups = k / w.group;
  const uint8_t* bytes = w.blocks.data() + blk * k * step;
  const float* scales = w.scales.data() + blk * groups * kBlock;
  __m512 acc[R][4];
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < 4; ++i) acc[r][i] = _mm512_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    __m512 part[R][4];
    for (int r = 0; r < R; ++r)
      for (int i = 0; i < 4; ++i) part[r][i] = _mm512_setzero_ps();
    for (int64_t kk = g * w.group; kk < (g + 1) * w.group; ++kk) {
      // a block's rows lie one after another: one stream (int4: a line every other kk)
      if (Bits == 8 || kk % 2 == 0) {
        _mm_prefetch(reinterpret_cast<const char*>(bytes + kk * step + kPrefetchBytes),
                     _MM_HINT_T0);
      }
      __m512 wv[4];
      decode_row<Bits>(bytes + kk * step, wv);
      for (int r = 0; r < R; ++r) {
        const __m512 xv = _mm512_set1_ps(x[r * k + kk]);
        for (int i = 0; i < 4; ++i) part[r][i] = _mm512_fmadd_ps(xv, wv[i], part[r][i]);
      }
    }
    for (int i = 0; i < 4; ++i) {
      const __m512 s = _mm512_loadu_ps(scales + g * kBlock + 16 * i);
      for (int r = 0; r < R; ++r) acc[r][i] = _mm512_fmadd_ps(part[r][i], s, acc[r][i]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < 4; ++i) {
      const int64_t left = std::clamp<int64_t>(cols - 16 * i, 0, 16);
      const __mmask16 mask = static_cast<__mmask16>((uint32_t{1} << left) - 1);
      _mm512_mask_storeu_ps(y + r * w.n + 16 * i, mask, acc[r][i]);
    }
  }
}

// --- portable path: the same multiply-adds in the same order, one column at a time ------

void block_portable(int64_t rows, const float* x, const PackedWeight& w, int64_t blk, float* y,
                    int64_t cols) {
  const int64_t k = w.k, step = row_bytes(w.bits), groups = k / w.group;
  const uint8_t* bytes = w.blocks.data() + blk * k * step;
  const float* scales = w.scales.data() + blk * groups * kBlock;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      float acc = 0.0f;
      for (int64_t g = 0; g < groups; ++g) {
        float part = 0.0f;
        for (int64_t kk = g * w.group; kk < (g + 1) * w.group; ++kk) {
          part = std::fma(x[r * k + kk], static_cast<float>(weight_at(bytes + kk * step, w.bits, c)),
                          part);
        }
        acc = std::fma(part, scales[g * kBlock + c], acc);
      }
      y[r * w.n + c] = acc;
    }
  }
}

void block_decode(int64_t m, const float* x, const PackedWeight& w, int64_t blk, float* y,
                  int64_t cols) {
  if (!active_isa().avx512) {
    block_portable(m, x, w, blk, y, cols);
    return;
  }
  int64_t r = 0;
  for (; r + 2 <= m; r += 2) {
    (w.bits == 8 ? block_fast<2, 8> : block_fast<2, 4>)(x + r * w.k, w, blk, y + r * w.n, cols);
  }
  if (r < m) (w.bits == 8 ? block_fast<1, 8> : block_fast<1, 4>)(x + r * w.k, w, blk, y + r * w.n, cols);
}

// The block dequantized to f32 [k, 64] and multiplied by BLAS.
void block_dequantized(int64_t m, const float* x, const PackedWeight& w, int64_t blk, float* y,
                       int64_t cols) {
  const int64_t k = w.k, step = row_bytes(w.bits);
  const uint8_t* bytes = w.blocks.data() + blk * k * step;
  const float* scales = w.scales.data() + blk * (k / w.group) * kBlock;
  std::vector<float> dense(static_cast<size_t>(k * kBlock));
  for (int64_t kk = 0; kk < k; ++kk) {
    const float* s = scales + (kk / w.group) * kBlock;
    for (int64_t c = 0; c < kBlock; ++c) {
      dense[kk * kBlock + c] = static_cast<float>(weight_at(bytes + kk * step, w.bits, c)) * s[c];
    }
  }
  blas::sgemm(false, false, static_cast<int>(m), static_cast<int>(cols), static_cast<int>(k),
              1.0f, x, static_cast<int>(k), dense.data(), static_cast<int>(kBlock), 0.0f, y,
              static_cast<int>(w.n));
}

}  // namespace

PackedWeight pack_weight(MatrixView<int8_t> w, int64_t k, int64_t n, int bits,
                         const float* scales, int64_t group) {
  if (bits != 8 && bits != 4) throw std::invalid_argument("weight bits must be 8 or 4");
  if (group <= 0 || k % group != 0) {
    throw std::invalid_argument("group size " + std::to_string(group) +
                                " does not divide the contracting size " + std::to_string(k));
  }
  PackedWeight packed;
  packed.bits = bits;
  packed.k = k;
  packed.n = n;
  packed.group = group;
  const int64_t blocks = (n + kBlock - 1) / kBlock, step = row_bytes(bits), groups = k / group;
  packed.blocks.assign(static_cast<size_t>(blocks * k * step), 0);
  packed.scales.assign(static_cast<size_t>(blocks * groups * kBlock), 0.0f);
  for (int64_t kk = 0; kk < k; ++kk) {
    for (int64_t col = 0; col < n; ++col) {
      const int8_t v = w.at(kk, col);
      if (bits == 4 && (v < -8 || v > 7)) {
        throw std::invalid_argument("int4 weight value " + std::to_string(v) + " out of range");
      }
      const int64_t blk = col / kBlock, c = col % kBlock;
      uint8_t* row = packed.blocks.data() + (blk * k + kk) * step;
      if (bits == 8) {
        row[c] = static_cast<uint8_t>(v);
      } else if (c < 32) {
        row[c] = static_cast<uint8_t>((row[c] & 0xf0) | (v & 0x0f));
      } else {
        row[c - 32] = static_cast<uint8_t>((row[c - 32] & 0x0f) | ((v & 0x0f) << 4));
      }
    }
  }
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t col = 0; col < n; ++col) {
      packed.scales[((col / kBlock) * groups + g) * kBlock + col % kBlock] = scales[g * n + col];
    }
  }
  return packed;
}

void gemm_weight(int64_t m, const float* x, const PackedWeight& w, float* y) {
  const int64_t blocks = (w.n + kBlock - 1) / kBlock;
  if (m == 0 || w.n == 0) return;
  if (w.k == 0) {
    std::fill(y, y + m * w.n, 0.0f);
    return;
  }
  const auto run = m >= kDecodeRows ? block_dequantized : block_decode;
  const int64_t min_chunk = m * w.k * w.n < kSplitWork ? blocks : 1;
  parallel_for(blocks, min_chunk, [&](int64_t begin, int64_t end) {
    for (int64_t blk = begin; blk < end; ++blk) {
      run(m, x, w, blk, y + blk * kBlock, std::min(kBlock, w.n - blk * kBlock));
    }
  });
}

}  // namespace openhlo::cpu::lowp
