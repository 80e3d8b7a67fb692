// AMX microkernels (lowp_amx.h). Eight tile registers of 16 rows x 64 bytes: four hold the
// 32 x 32 block of C (f32 or int32), two the block's 32 rows of A and two the panel's 32
// columns of B over one 64-byte step of k, so each step is four loads feeding four tile
// products (tdpbf16ps / tdpbusd: 16 x 16 outputs of 32 bf16 or 64 int8 products each).
//
// The whole file is compiled for AMX (the pragma below, set after the includes so no library
// code is): the build gives no file flags of its own, and only these functions may hold
// tile instructions, as they run only where cpuid and Linux allow them (cpu_isa.h).
#include "lowp_amx.h"

#include <immintrin.h>

#include <type_traits>

#pragma GCC target("amx-tile,amx-bf16,amx-int8")

namespace openhlo::cpu::lowp::amx {
namespace {

constexpr int64_t kStepBytes = 64;     // bytes of k per tile row
constexpr int64_t kPanelCols = 32;     // columns of a packed panel (lowp_gemm.cc)

// The operand of ldtilecfg: palette 1, tiles 0-7 of 16 rows x 64 bytes.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

const TileConfig& config() {
  static const TileConfig c = [] {
    TileConfig t;
    for (int i = 0; i < 8; ++i) {
      t.bytes_per_row[i] = kStepBytes;
      t.rows[i] = 16;
    }
    return t;
  }();
  return c;
}

// tdp*(c, a, b) for the element type: bf16 pairs into f32, or u8 x s8 quads into int32.
#define OPENHLO_TILE_DOT(Acc, c, a, b)                 \
  do {                                                 \
    if constexpr (std::is_same_v<Acc, float>) {        \
      _tile_dpbf16ps(c, a, b);                         \
    } else {                                           \
      _tile_dpbusd(c, a, b);                           \
    }                                                  \
  } while (0)

template <typename AElem, typename BElem, typename Acc>
void block(const AElem* a, int64_t lda, int64_t k, const BElem* panel, Acc* tile) {
  constexpr int64_t step = kStepBytes / sizeof(AElem);   // k per tile row
  constexpr int64_t group = 4 / sizeof(BElem);            // k per 4-byte lane of B
  constexpr int64_t b_stride = kPanelCols * 4;            // bytes from one k-group to the next
  const int64_t a_stride = lda * static_cast<int64_t>(sizeof(AElem));
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t k0 = 0; k0 < k; k0 += step) {
    _tile_loadd(4, a + k0, a_stride);
    _tile_loadd(5, a + 16 * lda + k0, a_stride);
    const BElem* b = panel + k0 * kPanelCols;
    _tile_loadd(6, b, b_stride);
    _tile_loadd(7, b + 16 * group, b_stride);
    OPENHLO_TILE_DOT(Acc, 0, 4, 6);
    OPENHLO_TILE_DOT(Acc, 1, 4, 7);
    OPENHLO_TILE_DOT(Acc, 2, 5, 6);
    OPENHLO_TILE_DOT(Acc, 3, 5, 7);
  }
  constexpr int64_t c_stride = kPanelCols * sizeof(Acc);
  _tile_stored(0, tile, c_stride);
  _tile_stored(1, tile + 16, c_stride);
  _tile_stored(2, tile + 16 * kPanelCols, c_stride);
  _tile_stored(3, tile + 16 * kPanelCols + 16, c_stride);
}

#undef OPENHLO_TILE_DOT

}  // namespace

// Loaded once per run of blocks, not per block: per block, ldtilecfg and tilerelease made a
// narrow product (3136 x 64 x 64: one 64-byte step of k, four tile products a block) about
// 1.5x slower.
void configure_tiles() { _tile_loadconfig(&config()); }

// Released so the thread's saved state shrinks back when it is switched out.
void release_tiles() { _tile_release(); }

void block_s8(const uint8_t* a, int64_t lda, int64_t k, const int8_t* panel, int32_t* tile) {
  block(a, lda, k, panel, tile);
}

void block_bf16(const uint16_t* a, int64_t lda, int64_t k, const uint16_t* panel, float* tile) {
  block(a, lda, k, panel, tile);
}

}  // namespace openhlo::cpu::lowp::amx
