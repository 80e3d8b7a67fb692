// Products with weights stored as rows (lowp_gemm.h: RowWeight, gemm_s8_rows), read in
// place. A weight [N, K] whose row n is output n's K weights is what torch's linear layers,
// quantize_ and the dynamic-int8 lowering hand the backend as program arguments: a caller's
// buffer that may change between calls, so nothing is packed or cached; a decode step reads
// each weight byte once, from where it lies.
//
// Weight-only (f32 x int8/int4): each 16 weights of a row are sign-extended to 16 f32 lanes
// and multiply-added against 16 activations; int4 bytes hold k = 2j (low nibble) and 2j + 1
// (high), so each row of x is first split per 32 k into its even and odd halves, and the
// low and high nibbles of 16 bytes meet 16 even and 16 odd activations; a nibble becomes
// its f32 value in one table lookup (vpermps on a register of the 16 values), as cheap as
// int8's sign extension and conversion. A group's lanes are scaled once at its end and the lanes summed at the row's end: the sums differ
// from the decomposition's order only by f32 rounding. From kDenseRows rows on the product is
// compute-bound: 64 rows of W are dequantized to f32 at a time and multiplied by BLAS.
//
// int8 x int8 -> int32: the bytes are widened to int16 and multiplied in pairs into int32
// lanes (vpmaddwd; no product or pair sum overflows), the same wrapping integers as the
// portable loop.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "blas.h"
#include "cpu_isa.h"
#include "lowp_gemm.h"
#include "thread_pool.h"

namespace openhlo::cpu::lowp {
namespace {

constexpr int64_t kDenseRows = 16;   // from this many rows of x on: dequantize + BLAS
constexpr int64_t kDenseBlock = 64;  // weight rows dequantized per BLAS call
constexpr int64_t kRowsPerTask = 16;
constexpr int64_t kSplitWork = int64_t{1} << 20;

int64_t row_bytes(const RowWeight& w) { return w.bits == 8 ? w.k : w.k / 2; }

// Weight (n, kk) as an integer (int4: -8..7).
int weight_at(const RowWeight& w, int64_t n, int64_t kk) {
  const uint8_t* row = w.data + n * row_bytes(w);
  if (w.bits == 8) return static_cast<int8_t>(row[kk]);
  const uint8_t nibble = kk % 2 == 0 ? row[kk / 2] & 0x0f : row[kk / 2] >> 4;
  return (nibble ^ 8) - 8;
}

int64_t min_chunk_for(int64_t tasks, int64_t work) { return work < kSplitWork ? tasks : 1; }

// --- weight-only: portable -------------------------------------------------------------

void rows_portable(int64_t m, const float* x, const RowWeight& w, int64_t n0, int64_t n1,
                   float* y) {
  const int64_t groups = w.k / w.group;
  for (int64_t n = n0; n < n1; ++n) {
    for (int64_t r = 0; r < m; ++r) {
      float acc = 0.0f;
      for (int64_t g = 0; g < groups; ++g) {
        float part = 0.0f;
        for (int64_t kk = g * w.group; kk < (g + 1) * w.group; ++kk) {
          part = std::fma(x[r * w.k + kk], static_cast<float>(weight_at(w, n, kk)), part);
        }
        acc = std::fma(part, w.scales[n * groups + g], acc);
      }
      y[r * w.n + n] = acc;
    }
  }
}

// --- weight-only: AVX-512 ---------------------------------------------------------------

// GCC 12's headers read an "undefined" vector in the sign extensions and the lane sums
// (the unmasked forms ignore it) and warn at every use, as in lowp_weight.cc.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// x's rows with each 32 k split into 16 even then 16 odd (the int4 bytes' nibble order).
std::vector<float> split_even_odd(int64_t m, const float* x, int64_t k) {
  std::vector<float> out(static_cast<size_t>(m * k));
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < k; c += 32) {
      for (int64_t j = 0; j < 16; ++j) {
        out[r * k + c + j] = x[r * k + c + 2 * j];
        out[r * k + c + 16 + j] = x[r * k + c + 2 * j + 1];
      }
    }
  }
  return out;
}

template <int R, int Bits>
__attribute__((target("avx512f,avx512bw"))) void rows_fast(const float* x, const RowWeight& w,
                                                           int64_t n, float* y) {
  const int64_t k = w.k, groups = k / w.group;
  const uint8_t* row = w.data + n * row_bytes(w);
  const float* scales = w.scales + n * groups;
  // int4: the value of each nibble 0..15 (two's complement), looked up by vpermps
  const __m512 values = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    __m512 part[R][2];
    for (int r = 0; r < R; ++r) part[r][0] = part[r][1] = _mm512_setzero_ps();
    const int64_t end = (g + 1) * w.group;
    for (int64_t kk = g * w.group; kk < end; kk += 32) {
      __m512 lo, hi;
      if constexpr (Bits == 8) {
        lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + kk))));
        hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + kk + 16))));
      } else {  // vpermps reads the low 4 bits of each lane: the nibble's f32 value
        const __m512i bytes = _mm512_cvtepu8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + kk / 2)));
        lo = _mm512_permutexvar_ps(bytes, values);
        hi = _mm512_permutexvar_ps(_mm512_srli_epi32(bytes, 4), values);
      }
      for (int r = 0; r < R; ++r) {
        part[r][0] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * k + kk), lo, part[r][0]);
        part[r][1] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * k + kk + 16), hi, part[r][1]);
      }
    }
    const __m512 s = _mm512_set1_ps(scales[g]);
    for (int r = 0; r < R; ++r) {
      acc[r] = _mm512_fmadd_ps(_mm512_add_ps(part[r][0], part[r][1]), s, acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[r * w.n + n] = _mm512_reduce_add_ps(acc[r]);
}

void rows_decode(int64_t m, const float* x, const RowWeight& w, int64_t n0, int64_t n1,
                 float* y) {
  for (int64_t n = n0; n < n1; ++n) {
    int64_t r = 0;
    for (; r + 4 <= m; r += 4) {
      (w.bits == 8 ? rows_fast<4, 8> : rows_fast<4, 4>)(x + r * w.k, w, n, y + r * w.n);
    }
    for (; r < m; ++r) {
      (w.bits == 8 ? rows_fast<1, 8> : rows_fast<1, 4>)(x + r * w.k, w, n, y + r * w.n);
    }
  }
}

// --- weight-only: many rows (dequantize 64 weight rows, BLAS) --------------------------

void rows_dense(int64_t m, const float* x, const RowWeight& w, int64_t n0, int64_t n1,
                float* y) {
  const int64_t k = w.k, groups = k / w.group;
  std::vector<float> dense(static_cast<size_t>((n1 - n0) * k));
  for (int64_t n = n0; n < n1; ++n) {
    for (int64_t kk = 0; kk < k; ++kk) {
      dense[(n - n0) * k + kk] =
          static_cast<float>(weight_at(w, n, kk)) * w.scales[n * groups + kk / w.group];
    }
  }
  blas::sgemm(false, true, static_cast<int>(m), static_cast<int>(n1 - n0), static_cast<int>(k),
              1.0f, x, static_cast<int>(k), dense.data(), static_cast<int>(k), 0.0f, y + n0,
              static_cast<int>(w.n));
}

bool fast_rows(const RowWeight& w) {
  return active_isa().avx512 && w.group % 32 == 0;
}

// --- int8 x int8 rows -------------------------------------------------------------------

void s8_portable(int64_t m, const int8_t* a, const int8_t* w, int64_t k, int64_t n, int64_t n0,
                 int64_t n1, int32_t* c) {
  for (int64_t j = n0; j < n1; ++j) {
    for (int64_t r = 0; r < m; ++r) {
      uint32_t acc = 0;  // wrapping, as the interpreter's i32
      for (int64_t kk = 0; kk < k; ++kk) {
        acc += static_cast<uint32_t>(int32_t{a[r * k + kk]} * int32_t{w[j * k + kk]});
      }
      c[r * n + j] = static_cast<int32_t>(acc);
    }
  }
}

__attribute__((target("avx512f,avx512bw"))) void s8_fast(int64_t m, const int16_t* a16,
                                                         const int8_t* w, int64_t k, int64_t n,
                                                         int64_t n0, int64_t n1, int32_t* c) {
  const int64_t body = k / 32 * 32;
  for (int64_t j = n0; j < n1; ++j) {
    const int8_t* row = w + j * k;
    for (int64_t r = 0; r < m; ++r) {
      const int16_t* ar = a16 + r * k;
      __m512i acc = _mm512_setzero_si512();
      for (int64_t kk = 0; kk < body; kk += 32) {
        const __m512i wv = _mm512_cvtepi8_epi16(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + kk)));
        acc = _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_loadu_si512(ar + kk), wv));
      }
      uint32_t sum = static_cast<uint32_t>(_mm512_reduce_add_epi32(acc));
      for (int64_t kk = body; kk < k; ++kk) {
        sum += static_cast<uint32_t>(int32_t{ar[kk]} * int32_t{row[kk]});
      }
      c[r * n + j] = static_cast<int32_t>(sum);
    }
  }
}

}  // namespace

void gemm_weight_rows(int64_t m, const float* x, const RowWeight& w, float* y) {
  if (m == 0 || w.n == 0) return;
  if (w.k == 0) {
    std::fill(y, y + m * w.n, 0.0f);
    return;
  }
  if (m >= kDenseRows) {
    const int64_t tasks = (w.n + kDenseBlock - 1) / kDenseBlock;
    parallel_for(tasks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        rows_dense(m, x, w, t * kDenseBlock, std::min(w.n, (t + 1) * kDenseBlock), y);
      }
    });
    return;
  }
  const bool fast = fast_rows(w);
  std::vector<float> split;
  if (fast && w.bits == 4) {
    split = split_even_odd(m, x, w.k);
    x = split.data();
  }
  const int64_t tasks = (w.n + kRowsPerTask - 1) / kRowsPerTask;
  parallel_for(tasks, min_chunk_for(tasks, m * w.k * w.n), [&](int64_t begin, int64_t end) {
    const int64_t n0 = begin * kRowsPerTask, n1 = std::min(w.n, end * kRowsPerTask);
    (fast ? rows_decode : rows_portable)(m, x, w, n0, n1, y);
  });
}

void gemm_s8_rows(int64_t m, const int8_t* a, const int8_t* w, int64_t k, int64_t n,
                  int32_t* c) {
  if (m == 0 || n == 0) return;
  const int64_t tasks = (n + kRowsPerTask - 1) / kRowsPerTask;
  const int64_t min_chunk = min_chunk_for(tasks, m * k * n);
  if (!active_isa().avx512) {
    parallel_for(tasks, min_chunk, [&](int64_t begin, int64_t end) {
      s8_portable(m, a, w, k, n, begin * kRowsPerTask, std::min(n, end * kRowsPerTask), c);
    });
    return;
  }
  const std::vector<int16_t> a16(a, a + m * k);
  parallel_for(tasks, min_chunk, [&](int64_t begin, int64_t end) {
    s8_fast(m, a16.data(), w, k, n, begin * kRowsPerTask, std::min(n, end * kRowsPerTask), c);
  });
}

}  // namespace openhlo::cpu::lowp
