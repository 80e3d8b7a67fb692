// int8 and bf16 GEMMs (lowp_gemm.h). Both compute C in 8 x 32 tiles: a register tile of
// 8 rows x 2 vectors of 16 columns, swept over the whole depth with one broadcast of 4 int8
// (or 2 bf16) of a row of A against 64 bytes of packed B per instruction. Tasks of the
// pool take 64 rows x 128 columns of C, whose A (64 x k) and B (k x 128) stay in L2.
//
// int8: vpdpbusd multiplies unsigned by signed bytes, so A is stored as a + 128 (u8) and
// 128 * (column sum of B) is subtracted as C is stored: exact in wrapping int32 arithmetic,
// the same integers as the portable loop.
#include "lowp_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu_isa.h"
#include "thread_pool.h"

namespace openhlo::cpu::lowp {
namespace {

constexpr int64_t kRows = 8;      // rows of a register tile
constexpr int64_t kCols = 32;     // columns of a register tile (a packed panel)
constexpr int64_t kTaskRows = 64;
constexpr int64_t kTaskPanels = 4;
// Multiply-adds below which a GEMM runs on the calling thread alone.
constexpr int64_t kSplitWork = int64_t{1} << 18;

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// Runs tile(row0, panel) over all register tiles of an m x n product, in pool tasks.
template <typename TileFn>
void for_each_tile(int64_t m, int64_t n, int64_t k, const TileFn& tile) {
  const int64_t panels = (n + kCols - 1) / kCols;
  const int64_t row_blocks = (m + kTaskRows - 1) / kTaskRows;
  const int64_t col_blocks = (panels + kTaskPanels - 1) / kTaskPanels;
  const int64_t tasks = row_blocks * col_blocks;
  const int64_t min_chunk = m * n * std::max<int64_t>(k, 1) < kSplitWork ? tasks : 1;
  parallel_for(tasks, min_chunk, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t rb = t / col_blocks, cb = t % col_blocks;
      const int64_t p_end = std::min(panels, (cb + 1) * kTaskPanels);
      const int64_t r_end = std::min(m, (rb + 1) * kTaskRows);
      for (int64_t p = cb * kTaskPanels; p < p_end; ++p) {
        for (int64_t r0 = rb * kTaskRows; r0 < r_end; r0 += kRows) tile(r0, p);
      }
    }
  });
}

// A's rows padded to whole register tiles and its depth to `depth`, each element mapped by
// `map` (padding stays `pad`).
template <typename T, typename S, typename Map>
std::vector<T> pack_rows(int64_t m, int64_t k, int64_t depth, MatrixView<S> a, T pad, Map map) {
  std::vector<T> packed(static_cast<size_t>(round_up(m, kRows) * depth), pad);
  parallel_for(m, std::max<int64_t>(1, 16384 / std::max<int64_t>(k, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      T* row = packed.data() + r * depth;
      for (int64_t c = 0; c < k; ++c) row[c] = map(a.at(r, c));
    }
  });
  return packed;
}

// B in panels of 32 columns, `group` consecutive k per column (4 int8 or 2 bf16), the
// 16-column halves of a panel one after the other: the layout one 64-byte load feeds
// to the dot-product instructions.
template <typename T>
std::vector<T> pack_panels(MatrixView<T> b, int64_t k, int64_t n, int64_t depth, int64_t group) {
  const int64_t panels = (n + kCols - 1) / kCols;
  std::vector<T> packed(static_cast<size_t>(panels * depth * kCols), T{0});
  parallel_for(panels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      T* panel = packed.data() + p * depth * kCols;
      for (int64_t kk = 0; kk < k; ++kk) {
        T* step = panel + (kk / group) * kCols * group + kk % group;
        for (int64_t c = 0; c < kCols && p * kCols + c < n; ++c) {
          step[(c / 16) * 16 * group + (c % 16) * group] = b.at(kk, p * kCols + c);
        }
      }
    }
  });
  return packed;
}

// --- int8 tiles: tile[r][c] = sum over k of (A[r, k] + 128) * B[k, c], wrapping ------------

using TileS8 = void (*)(const uint8_t* a, int64_t depth, const int8_t* panel, int32_t* tile);

__attribute__((target("avx512f,avx512bw,avx512vnni")))
void tile_s8_vnni(const uint8_t* a, int64_t depth, const int8_t* panel, int32_t* tile) {
  __m512i acc[kRows][2];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
  for (int64_t q = 0; q < depth / 4; ++q) {
    const __m512i b0 = _mm512_loadu_si512(panel + q * 128);
    const __m512i b1 = _mm512_loadu_si512(panel + q * 128 + 64);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      int32_t word;
      std::memcpy(&word, a + r * depth + q * 4, sizeof word);
      const __m512i av = _mm512_set1_epi32(word);
      acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], av, b0);
      acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], av, b1);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
    _mm512_storeu_si512(tile + r * kCols, acc[r][0]);
    _mm512_storeu_si512(tile + r * kCols + 16, acc[r][1]);
  }
}

void tile_s8_portable(const uint8_t* a, int64_t depth, const int8_t* panel, int32_t* tile) {
  uint32_t acc[kRows][kCols] = {};
  for (int64_t q = 0; q < depth / 4; ++q) {
    const int8_t* step = panel + q * 128;
    for (int r = 0; r < kRows; ++r) {
      for (int j = 0; j < 4; ++j) {
        const uint32_t av = a[r * depth + q * 4 + j];
        for (int c = 0; c < kCols; ++c) {
          acc[r][c] += av * static_cast<uint32_t>(step[(c / 16) * 64 + (c % 16) * 4 + j]);
        }
      }
    }
  }
  std::memcpy(tile, acc, sizeof acc);
}

// --- bf16 tiles: tile[r][c] = sum over k of A[r, k] * B[k, c] in f32 ---------------------

using TileBF16 = void (*)(const uint16_t* a, int64_t depth, const uint16_t* panel, float* tile);

__attribute__((target("avx512f,avx512bw,avx512bf16")))
void tile_bf16_fast(const uint16_t* a, int64_t depth, const uint16_t* panel, float* tile) {
  __m512 acc[kRows][2];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t q = 0; q < depth / 2; ++q) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(panel + q * 64);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(panel + q * 64 + 32);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      int32_t word;
      std::memcpy(&word, a + r * depth + q * 2, sizeof word);
      const __m512bh av = (__m512bh)_mm512_set1_epi32(word);
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) {
    _mm512_storeu_ps(tile + r * kCols, acc[r][0]);
    _mm512_storeu_ps(tile + r * kCols + 16, acc[r][1]);
  }
}

float bf16_value(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

void tile_bf16_portable(const uint16_t* a, int64_t depth, const uint16_t* panel, float* tile) {
  float acc[kRows][kCols] = {};
  for (int64_t q = 0; q < depth / 2; ++q) {
    const uint16_t* step = panel + q * 64;
    for (int r = 0; r < kRows; ++r) {
      const float a0 = bf16_value(a[r * depth + q * 2]);
      const float a1 = bf16_value(a[r * depth + q * 2 + 1]);
      for (int c = 0; c < kCols; ++c) {
        const uint16_t* pair = step + (c / 16) * 32 + (c % 16) * 2;
        acc[r][c] += a0 * bf16_value(pair[0]) + a1 * bf16_value(pair[1]);
      }
    }
  }
  std::memcpy(tile, acc, sizeof acc);
}

}  // namespace

// ---------------------------------------------------------------------------------------

PackedS8 pack_s8(MatrixView<int8_t> b, int64_t k, int64_t n) {
  PackedS8 packed;
  packed.k = k;
  packed.n = n;
  packed.k4 = round_up(k, 4);
  packed.panels = pack_panels(b, k, n, packed.k4, 4);
  packed.column_sums.assign(static_cast<size_t>(n), 0);
  for (int64_t kk = 0; kk < k; ++kk) {
    for (int64_t c = 0; c < n; ++c) packed.column_sums[c] += b.at(kk, c);
  }
  return packed;
}

void gemm_s8(int64_t m, MatrixView<int8_t> a, const PackedS8& b, const S8Epilogue& out) {
  const int64_t n = b.n, depth = b.k4;
  if (m == 0 || n == 0) return;
  const std::vector<uint8_t> ap = pack_rows<uint8_t>(
      m, b.k, depth, a, uint8_t{0x80}, [](int8_t v) { return static_cast<uint8_t>(v ^ 0x80); });
  const TileS8 tile_fn = active_isa().vnni ? tile_s8_vnni : tile_s8_portable;
  for_each_tile(m, n, b.k, [&](int64_t r0, int64_t p) {
    alignas(64) int32_t tile[kRows * kCols];
    tile_fn(ap.data() + r0 * depth, depth, b.panels.data() + p * depth * kCols, tile);
    const int64_t rows = std::min(kRows, m - r0), c0 = p * kCols;
    const int64_t cols = std::min(kCols, n - c0);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        const auto value = static_cast<int32_t>(
            static_cast<uint32_t>(tile[r * kCols + c]) -
            128u * static_cast<uint32_t>(b.column_sums[c0 + c]));
        const int64_t at = (r0 + r) * n + c0 + c;
        if (out.column_scale != nullptr) {
          out.out_f32[at] = static_cast<float>(value) * out.column_scale[c0 + c];
        } else {
          out.out_s32[at] = value;
        }
      }
    }
  });
}

PackedBF16 pack_bf16(MatrixView<uint16_t> b, int64_t k, int64_t n) {
  PackedBF16 packed;
  packed.k = k;
  packed.n = n;
  packed.k2 = round_up(k, 2);
  packed.panels = pack_panels(b, k, n, packed.k2, 2);
  return packed;
}

void gemm_bf16(int64_t m, MatrixView<uint16_t> a, const PackedBF16& b, float* c) {
  const int64_t n = b.n, depth = b.k2;
  if (m == 0 || n == 0) return;
  const std::vector<uint16_t> ap =
      pack_rows<uint16_t>(m, b.k, depth, a, uint16_t{0}, [](uint16_t v) { return v; });
  const TileBF16 tile_fn = active_isa().bf16 ? tile_bf16_fast : tile_bf16_portable;
  for_each_tile(m, n, b.k, [&](int64_t r0, int64_t p) {
    alignas(64) float tile[kRows * kCols];
    tile_fn(ap.data() + r0 * depth, depth, b.panels.data() + p * depth * kCols, tile);
    const int64_t rows = std::min(kRows, m - r0), c0 = p * kCols;
    const int64_t cols = std::min(kCols, n - c0);
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(c + (r0 + r) * n + c0, tile + r * kCols, cols * sizeof(float));
    }
  });
}

}  // namespace openhlo::cpu::lowp
