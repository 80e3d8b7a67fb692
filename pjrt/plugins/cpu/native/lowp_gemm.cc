// int8 and bf16 GEMMs (lowp_gemm.h), one driver over the element type. C is computed in
// blocks of R rows x 32 columns by a microkernel, swept over the whole depth: on AMX
// (lowp_amx.h) R = 32, four tile registers of C; else R = 8, a register tile of 8 rows x 2
// vectors of 16 columns, one broadcast of 4 int8 (or 2 bf16) of a row of A against 64 bytes
// of packed B per instruction; else the portable loop over the same layout. Tasks of the
// pool take 64 rows x 128 columns of C, whose A (64 x k) and B (k x 128) stay in L2. A's 64
// rows are packed by the task (and kept for the next task of the same rows on that thread),
// by a loop that vectorizes, while they are in cache: packing all of A first, an element
// at a time, took 70% of the time of a narrow product as quantized convolutions make (one
// per kernel tap: m = N*H*W, k = C_in, n = C_out; 3136 x 576 x 64), the multiplications 8%.
//
// int8: vpdpbusd and tdpbusd multiply unsigned by signed bytes, so A is stored as a + 128
// (u8) and 128 * (column sum of B) is subtracted as C is stored: exact in wrapping int32
// arithmetic, the same integers as the portable loop.
#include "lowp_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "cpu_isa.h"
#include "lowp_amx.h"
#include "thread_pool.h"

namespace openhlo::cpu::lowp {
namespace {

constexpr int64_t kRows = 8;      // rows of an AVX-512 register tile
constexpr int64_t kMaxRows = amx::kRows;
constexpr int64_t kCols = 32;     // columns of a block (a packed panel)
constexpr int64_t kTaskRows = 64;
constexpr int64_t kTaskPanels = 4;
constexpr int64_t kDepthBytes = 64;  // packed depth granule: one AMX tile row
// Multiply-adds below which a GEMM runs on the calling thread alone.
constexpr int64_t kSplitWork = int64_t{1} << 18;
static_assert(kTaskRows % kRows == 0 && kTaskRows % amx::kRows == 0);

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// B in panels of 32 columns, `group` consecutive k per column (4 int8 or 2 bf16), the
// 16-column halves of a panel one after the other: the layout one 64-byte load feeds
// to the dot-product instructions, and one AMX tile row of each half holds.
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

// A microkernel: block[r][c] (r < rows, c < kCols) = sum over k of A[r, k] * B[k, c], A
// `rows` packed rows `lda` elements apart, B one packed panel. `begin` and `end`, where
// given, run before and after each run of blocks on a thread (AMX's tile configuration).
template <typename AElem, typename BElem, typename Acc>
struct Microkernel {
  void (*fn)(const AElem* a, int64_t lda, int64_t k, const BElem* panel, Acc* block);
  int64_t rows;
  void (*begin)() = nullptr;
  void (*end)() = nullptr;
};

// --- int8 tiles: tile[r][c] = sum over k of (A[r, k] + 128) * B[k, c], wrapping ------------

__attribute__((target("avx512f,avx512bw,avx512vnni")))
void tile_s8_vnni(const uint8_t* a, int64_t lda, int64_t k, const int8_t* panel,
                  int32_t* tile) {
  __m512i acc[kRows][2];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
  for (int64_t q = 0; q < (k + 3) / 4; ++q) {
    const __m512i b0 = _mm512_loadu_si512(panel + q * 128);
    const __m512i b1 = _mm512_loadu_si512(panel + q * 128 + 64);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      int32_t word;
      std::memcpy(&word, a + r * lda + q * 4, sizeof word);
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

void tile_s8_portable(const uint8_t* a, int64_t lda, int64_t k, const int8_t* panel,
                      int32_t* tile) {
  uint32_t acc[kRows][kCols] = {};
  for (int64_t q = 0; q < (k + 3) / 4; ++q) {
    const int8_t* step = panel + q * 128;
    for (int r = 0; r < kRows; ++r) {
      for (int j = 0; j < 4; ++j) {
        const uint32_t av = a[r * lda + q * 4 + j];
        for (int c = 0; c < kCols; ++c) {
          acc[r][c] += av * static_cast<uint32_t>(step[(c / 16) * 64 + (c % 16) * 4 + j]);
        }
      }
    }
  }
  std::memcpy(tile, acc, sizeof acc);
}

// --- bf16 tiles: tile[r][c] = sum over k of A[r, k] * B[k, c] in f32 ---------------------

__attribute__((target("avx512f,avx512bw,avx512bf16")))
void tile_bf16_fast(const uint16_t* a, int64_t lda, int64_t k, const uint16_t* panel,
                    float* tile) {
  __m512 acc[kRows][2];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t q = 0; q < (k + 1) / 2; ++q) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(panel + q * 64);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(panel + q * 64 + 32);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      int32_t word;
      std::memcpy(&word, a + r * lda + q * 2, sizeof word);
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

void tile_bf16_portable(const uint16_t* a, int64_t lda, int64_t k, const uint16_t* panel,
                        float* tile) {
  float acc[kRows][kCols] = {};
  for (int64_t q = 0; q < (k + 1) / 2; ++q) {
    const uint16_t* step = panel + q * 64;
    for (int r = 0; r < kRows; ++r) {
      const float a0 = bf16_value(a[r * lda + q * 2]);
      const float a1 = bf16_value(a[r * lda + q * 2 + 1]);
      for (int c = 0; c < kCols; ++c) {
        const uint16_t* pair = step + (c / 16) * 32 + (c % 16) * 2;
        acc[r][c] += a0 * bf16_value(pair[0]) + a1 * bf16_value(pair[1]);
      }
    }
  }
  std::memcpy(tile, acc, sizeof acc);
}

// --- what the driver needs of each element type -------------------------------------------

struct S8Gemm {
  using Source = int8_t;  // A as given
  using AElem = uint8_t;  // A as packed: a + 128
  using BElem = int8_t;
  using Acc = int32_t;
  static constexpr uint8_t kPad = 0x80;  // a packed 0
  static uint8_t pack(int8_t v) { return static_cast<uint8_t>(v ^ 0x80); }
  static Microkernel<AElem, BElem, Acc> microkernel(const LowPrecisionIsa& isa) {
    if (isa.amx) return {amx::block_s8, amx::kRows, amx::configure_tiles, amx::release_tiles};
    return {isa.vnni ? tile_s8_vnni : tile_s8_portable, kRows};
  }
};

struct BF16Gemm {
  using Source = uint16_t;
  using AElem = uint16_t;
  using BElem = uint16_t;
  using Acc = float;
  static constexpr uint16_t kPad = 0;
  static uint16_t pack(uint16_t v) { return v; }
  static Microkernel<AElem, BElem, Acc> microkernel(const LowPrecisionIsa& isa) {
    if (isa.amx) return {amx::block_bf16, amx::kRows, amx::configure_tiles, amx::release_tiles};
    return {isa.bf16 ? tile_bf16_fast : tile_bf16_portable, kRows};
  }
};

// B packed for Gemm: `group` k per 4-byte lane, depth a whole number of 64-byte steps.
template <typename Gemm, typename Packed>
void pack_b(MatrixView<typename Gemm::BElem> b, int64_t k, int64_t n, Packed& packed) {
  constexpr int64_t elem = sizeof(typename Gemm::BElem);
  packed.k = k;
  packed.n = n;
  packed.depth = round_up(k, kDepthBytes / elem);
  packed.panels = pack_panels(b, k, n, packed.depth, 4 / elem);
}

// Rows [r0, r0 + rows) of A into `packed`, `lda` elements apart, each element mapped by
// Gemm::pack; the rest of each row (k to lda) is left as it is. A row-major A is read a row
// at a time (the loop vectorizes), a transposed one a column at a time (contiguous reads).
template <typename Gemm>
void pack_rows(MatrixView<typename Gemm::Source> a, int64_t r0, int64_t rows, int64_t k,
               int64_t lda, typename Gemm::AElem* packed) {
  if (!a.transposed) {
    for (int64_t r = 0; r < rows; ++r) {
      const typename Gemm::Source* src = a.data + (r0 + r) * a.ld;
      typename Gemm::AElem* row = packed + r * lda;
      for (int64_t c = 0; c < k; ++c) row[c] = Gemm::pack(src[c]);
    }
    return;
  }
  for (int64_t c = 0; c < k; ++c) {
    const typename Gemm::Source* src = a.data + c * a.ld + r0;
    for (int64_t r = 0; r < rows; ++r) packed[r * lda + c] = Gemm::pack(src[r]);
  }
}

// C = A B on the best microkernel active_isa() allows; store(r0, c0, rows, cols, block)
// writes a block's valid rows x cols (block rows kCols apart) to C.
template <typename Gemm, typename Packed, typename Store>
void gemm(int64_t m, MatrixView<typename Gemm::Source> a, const Packed& b, const Store& store) {
  using AElem = typename Gemm::AElem;
  using Acc = typename Gemm::Acc;
  const int64_t n = b.n, k = b.k, depth = b.depth;
  if (m == 0 || n == 0) return;
  const Microkernel<AElem, typename Gemm::BElem, Acc> kernel = Gemm::microkernel(active_isa());
  // Rows one 64-byte step longer than the depth: rows a power of two bytes apart would all
  // fall in a few sets of the L1 cache, and a block reads 32 of them at once.
  const int64_t lda = depth + kDepthBytes / static_cast<int64_t>(sizeof(AElem));
  const int64_t panels = (n + kCols - 1) / kCols;
  const int64_t row_blocks = (m + kTaskRows - 1) / kTaskRows;
  const int64_t col_blocks = (panels + kTaskPanels - 1) / kTaskPanels;
  const int64_t tasks = row_blocks * col_blocks;
  const int64_t min_chunk = m * n * std::max<int64_t>(k, 1) < kSplitWork ? tasks : 1;
  parallel_for(tasks, min_chunk, [&](int64_t begin, int64_t end) {
    // The task's rows of A, packed; the padding past k stays a packed zero (B is zero
    // there too, but an uninitialized bf16 could be a NaN, and NaN * 0 is not 0).
    std::vector<AElem> ap(static_cast<size_t>(kTaskRows * lda), Gemm::kPad);
    int64_t packed_block = -1;  // the row block `ap` holds (tasks run row block by row block)
    if (kernel.begin != nullptr) kernel.begin();
    for (int64_t t = begin; t < end; ++t) {
      const int64_t rb = t / col_blocks, cb = t % col_blocks;
      const int64_t r0 = rb * kTaskRows, rows = std::min(kTaskRows, m - r0);
      if (rb != packed_block) {
        pack_rows<Gemm>(a, r0, rows, k, lda, ap.data());
        packed_block = rb;
      }
      const int64_t p_end = std::min(panels, (cb + 1) * kTaskPanels);
      for (int64_t p = cb * kTaskPanels; p < p_end; ++p) {
        const int64_t c0 = p * kCols;
        for (int64_t r = 0; r < rows; r += kernel.rows) {
          // rows of a last, partial block past `rows` hold stale rows of A: their sums are
          // computed and not stored
          alignas(64) Acc block[kMaxRows * kCols];
          kernel.fn(ap.data() + r * lda, lda, k, b.panels.data() + p * depth * kCols, block);
          store(r0 + r, c0, std::min(kernel.rows, rows - r), std::min(kCols, n - c0), block);
        }
      }
    }
    if (kernel.end != nullptr) kernel.end();
  });
}

}  // namespace

// ---------------------------------------------------------------------------------------

PackedS8 pack_s8(MatrixView<int8_t> b, int64_t k, int64_t n) {
  PackedS8 packed;
  pack_b<S8Gemm>(b, k, n, packed);
  packed.column_sums.assign(static_cast<size_t>(n), 0);
  for (int64_t kk = 0; kk < k; ++kk) {
    for (int64_t c = 0; c < n; ++c) packed.column_sums[c] += b.at(kk, c);
  }
  return packed;
}

void gemm_s8(int64_t m, MatrixView<int8_t> a, const PackedS8& b, const S8Epilogue& out) {
  const int64_t n = b.n;
  gemm<S8Gemm>(m, a, b, [&](int64_t r0, int64_t c0, int64_t rows, int64_t cols,
                            const int32_t* block) {
    // 128 * (column sum of B), wrapping: what the +128 of A added to each column
    uint32_t offset[kCols];
    for (int64_t c = 0; c < cols; ++c) {
      offset[c] = 128u * static_cast<uint32_t>(b.column_sums[c0 + c]);
    }
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t* sums = block + r * kCols;
      const int64_t at = (r0 + r) * n + c0;
      if (out.column_scale != nullptr) {
        for (int64_t c = 0; c < cols; ++c) {
          const auto value = static_cast<int32_t>(static_cast<uint32_t>(sums[c]) - offset[c]);
          out.out_f32[at + c] = static_cast<float>(value) * out.column_scale[c0 + c];
        }
      } else {
        for (int64_t c = 0; c < cols; ++c) {
          out.out_s32[at + c] = static_cast<int32_t>(static_cast<uint32_t>(sums[c]) - offset[c]);
        }
      }
    }
  });
}

PackedBF16 pack_bf16(MatrixView<uint16_t> b, int64_t k, int64_t n) {
  PackedBF16 packed;
  pack_b<BF16Gemm>(b, k, n, packed);
  return packed;
}

void gemm_bf16(int64_t m, MatrixView<uint16_t> a, const PackedBF16& b, float* c) {
  const int64_t n = b.n;
  gemm<BF16Gemm>(m, a, b, [&](int64_t r0, int64_t c0, int64_t rows, int64_t cols,
                              const float* block) {
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(c + (r0 + r) * n + c0, block + r * kCols, cols * sizeof(float));
    }
  });
}

}  // namespace openhlo::cpu::lowp
