// Products with weights stored as rows (lowp_gemm.h: RowWeight, gemm_s8_rows), read in
// place. A weight [N, K] whose row n is output n's K weights is what torch's linear layers,
// quantize_ and the dynamic-int8 lowering hand the backend as program arguments: a caller's
// buffer that may change between calls, so nothing is packed or cached; a decode step reads
// each weight byte once, from where it lies.
//
// Weight-only (f32 x int8/int4), batch 1 (a decode step) bound by the weight bytes it
// streams: 4 weight rows are read side by side, each 32 weights of a row decoded in
// registers to two vectors of f32 and multiply-added against 32 activations loaded once for
// the 4 rows (x stays in L1); each row's stream is prefetched kPrefetchBytes ahead, on into
// the next 4 rows at its end; the pool's threads take contiguous runs of rows. int8 is
// sign-extended; int4 bytes hold k = 2j (low nibble) and 2j + 1 (high), so x is first split
// per 32 k into its even and odd halves, and the low and high nibbles of 16 bytes meet 16
// even and 16 odd activations; a nibble becomes its f32 value in one table lookup (vpermps
// on a register of the 16 values), as cheap as int8's sign extension and conversion. A
// group's lanes are scaled once at its end and the lanes summed at the row's end: the sums
// differ from the decomposition's order only by f32 rounding. Groups of any size (int4:
// even) run here, a last partial 32 k masked. Batches of 4 rows share each decoded weight
// row. From kDenseRows rows on the product is compute-bound: 64 rows of W are dequantized
// to f32 at a time and multiplied by BLAS.
//
// int8 x int8 -> int32: the bytes are widened to int16 and multiplied in pairs into int32
// lanes (vpmaddwd; no product or pair sum overflows), the same wrapping integers as the
// portable loop.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
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
constexpr int64_t kWeightRows = 4;  // weight rows a batch-1 pass reads side by side
constexpr int64_t kLineBytes = 64;
// How far ahead of the bytes being decoded each weight row's stream is fetched: far enough
// that the fetches in flight cover the memory's latency (the CPU's own prefetchers stop at
// each 4 KiB page).
constexpr int64_t kPrefetchBytes = 2048;
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

// Floats a group of x takes in the int4 kernel's layout: the group padded to 32 k.
int64_t split_group(const RowWeight& w) { return (w.group + 31) / 32 * 32; }

// x as the int4 kernel reads it: each group of each row padded with zeros to split_group(w)
// floats, each 32 k split into 16 even then 16 odd (the bytes' nibble order). Built by the
// calling thread in a buffer it keeps, so a decode step allocates nothing.
const float* split_even_odd(int64_t m, const float* x, const RowWeight& w) {
  thread_local std::vector<float> buffer;
  const int64_t groups = w.k / w.group, padded = split_group(w);
  buffer.assign(static_cast<size_t>(m * groups * padded), 0.0f);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* from = x + r * w.k + g * w.group;
      float* to = buffer.data() + (r * groups + g) * padded;
      for (int64_t c = 0; c < w.group; ++c) to[c / 32 * 32 + c % 2 * 16 + c % 32 / 2] = from[c];
    }
  }
  return buffer.data();
}

// Fetches the cache line kPrefetchBytes ahead of byte `at` in each of the W rows of a block.
// Past a row's end the stream goes on in the same row of the next block (the W rows lie one
// after another, so the row after it is being read already).
template <int W>
__attribute__((always_inline)) inline void prefetch_rows(const uint8_t* rows, int64_t bytes,
                                                         int64_t at) {
  const int64_t ahead = at + kPrefetchBytes;
  const int64_t skip = ahead >= bytes ? (W - 1) * bytes : 0;
  for (int j = 0; j < W; ++j) {
    _mm_prefetch(reinterpret_cast<const char*>(rows + j * bytes + ahead + skip), _MM_HINT_T0);
  }
}

// 32 weights of a row as two vectors of f32: int8 in k order; int4 the 16 low nibbles (even
// k) and the 16 high ones (odd k) of 16 bytes, each looked up in `values` by vpermps (which
// reads the low 4 bits of each lane).
template <int Bits>
__attribute__((target("avx512f,avx512bw"), always_inline)) inline void decode32(
    const uint8_t* bytes, __m512 values, __m512& lo, __m512& hi) {
  if constexpr (Bits == 8) {
    lo = _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes))));
    hi = _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + 16))));
  } else {
    const __m512i b =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes)));
    lo = _mm512_permutexvar_ps(b, values);
    hi = _mm512_permutexvar_ps(_mm512_srli_epi32(b, 4), values);
  }
}

// One 32 k step: the W rows' weights (at wbytes[j]) decoded once, multiply-added against the
// R rows of x at `xs` (masked: the lanes past a group's end are read as zeros).
template <int R, int W, int Bits>
__attribute__((target("avx512f,avx512bw"), always_inline)) inline void step32(
    const uint8_t* const* wbytes, const float* xs, int64_t x_stride, __m512 values,
    __mmask16 mask_lo, __mmask16 mask_hi, __m512 (&part)[R][W][2]) {
  __m512 lo[W], hi[W];
  for (int j = 0; j < W; ++j) decode32<Bits>(wbytes[j], values, lo[j], hi[j]);
  for (int r = 0; r < R; ++r) {
    const __m512 xl = _mm512_maskz_loadu_ps(mask_lo, xs + r * x_stride);
    const __m512 xh = _mm512_maskz_loadu_ps(mask_hi, xs + r * x_stride + 16);
    for (int j = 0; j < W; ++j) {
      part[r][j][0] = _mm512_fmadd_ps(xl, lo[j], part[r][j][0]);
      part[r][j][1] = _mm512_fmadd_ps(xh, hi[j], part[r][j][1]);
    }
  }
}

// R rows of x (int4: split_even_odd's layout) against the W weight rows n .. n + W - 1: each
// 32 k, the W rows' weights are decoded once and the R rows' activations loaded once, into
// two accumulators per (x row, weight row) so the additions do not wait on each other; a
// group's sums are scaled once at its end. A group's partial last 32 k (group % 32 != 0)
// reads its weight bytes from a zeroed copy, so nothing past the weight's end is read, and
// x masked (int8) or its zero padding (int4).
template <int R, int W, int Bits>
__attribute__((target("avx512f,avx512bw"))) void rows_fast(const float* x, int64_t x_stride,
                                                           const RowWeight& w, int64_t n,
                                                           float* y) {
  const int64_t groups = w.k / w.group, bytes = row_bytes(w);
  const int64_t full = w.group / 32 * 32, tail = w.group - full;
  const int64_t x_group = Bits == 8 ? w.group : split_group(w);
  const uint8_t* rows = w.data + n * bytes;
  const float* scales = w.scales + n * groups;
  // int4: the value of each nibble 0..15 (two's complement)
  const __m512 values = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1);
  constexpr int64_t kStepBytes = 32 * Bits / 8;
  __m512 acc[R][W];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < W; ++j) acc[r][j] = _mm512_setzero_ps();
  const uint8_t* wbytes[W];
  for (int64_t g = 0; g < groups; ++g) {
    __m512 part[R][W][2];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < W; ++j) part[r][j][0] = part[r][j][1] = _mm512_setzero_ps();
    const float* xg = x + g * x_group;
    const int64_t byte0 = g * w.group * Bits / 8;  // int4: group is even
    for (int64_t c = 0; c < full; c += 32) {
      const int64_t at = byte0 + c * Bits / 8;
      if (at % kLineBytes < kStepBytes) prefetch_rows<W>(rows, bytes, at);  // once a line
      for (int j = 0; j < W; ++j) wbytes[j] = rows + j * bytes + at;
      step32<R, W, Bits>(wbytes, xg + c, x_stride, values, 0xffff, 0xffff, part);
    }
    if (tail > 0) {
      uint8_t copies[W][kStepBytes] = {};
      const int64_t at = byte0 + full * Bits / 8;
      for (int j = 0; j < W; ++j) {
        std::memcpy(copies[j], rows + j * bytes + at, static_cast<size_t>(tail * Bits / 8));
        wbytes[j] = copies[j];
      }
      const int64_t lanes = Bits == 8 ? tail : 32;  // int4's padding is zeros already
      const auto mask = [](int64_t count) {
        return static_cast<__mmask16>((uint32_t{1} << std::clamp<int64_t>(count, 0, 16)) - 1);
      };
      step32<R, W, Bits>(wbytes, xg + full, x_stride, values, mask(lanes), mask(lanes - 16),
                         part);
    }
    for (int j = 0; j < W; ++j) {
      const __m512 s = _mm512_set1_ps(scales[j * groups + g]);
      for (int r = 0; r < R; ++r) {
        acc[r][j] = _mm512_fmadd_ps(_mm512_add_ps(part[r][j][0], part[r][j][1]), s, acc[r][j]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < W; ++j) y[r * w.n + n + j] = _mm512_reduce_add_ps(acc[r][j]);
}

// Weight rows n .. n + W - 1 against every row of x: 4 rows of x at a time against one
// weight row (the decoded weights used 4 times), then each remaining row against all W.
template <int W, int Bits>
void rows_block(int64_t m, const float* x, int64_t x_stride, const RowWeight& w, int64_t n,
                float* y) {
  int64_t r = 0;
  for (; r + 4 <= m; r += 4) {
    for (int j = 0; j < W; ++j) {
      rows_fast<4, 1, Bits>(x + r * x_stride, x_stride, w, n + j, y + r * w.n);
    }
  }
  for (; r < m; ++r) rows_fast<1, W, Bits>(x + r * x_stride, x_stride, w, n, y + r * w.n);
}

template <int Bits>
void rows_decode(int64_t m, const float* x, int64_t x_stride, const RowWeight& w, int64_t n0,
                 int64_t n1, float* y) {
  int64_t n = n0;
  for (; n + kWeightRows <= n1; n += kWeightRows) {
    rows_block<kWeightRows, Bits>(m, x, x_stride, w, n, y);
  }
  for (; n < n1; ++n) rows_block<1, Bits>(m, x, x_stride, w, n, y);
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

// int8 takes any group; int4 an even one (no byte holds two groups' weights).
bool fast_rows(const RowWeight& w) {
  return active_isa().avx512 && (w.bits == 8 || w.group % 2 == 0);
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
  const float* xs = fast && w.bits == 4 ? split_even_odd(m, x, w) : x;
  const int64_t x_stride = fast && w.bits == 4 ? w.k / w.group * split_group(w) : w.k;
  const int64_t tasks = (w.n + kRowsPerTask - 1) / kRowsPerTask;
  parallel_for(tasks, min_chunk_for(tasks, m * w.k * w.n), [&](int64_t begin, int64_t end) {
    const int64_t n0 = begin * kRowsPerTask, n1 = std::min(w.n, end * kRowsPerTask);
    if (!fast) {
      rows_portable(m, x, w, n0, n1, y);
    } else if (w.bits == 8) {
      rows_decode<8>(m, xs, x_stride, w, n0, n1, y);
    } else {
      rows_decode<4>(m, xs, x_stride, w, n0, n1, y);
    }
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
